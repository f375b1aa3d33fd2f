"""Shape and layout primitives: Broadcast, Reshape, Transpose, Squeeze, Concatenate, ..."""

from __future__ import annotations

from mlx2onnx.translate.registry import handles


@handles("Broadcast", "BroadcastAxes")
def broadcast(ctx, rec):
    """Broadcast: inputs (x,) (shapeless exports add the other operands), arguments
    [shape:tuple] (BroadcastAxes: [ignore_axes:list], inputs (x, others...)).
    Both: Expand x to its (static) output shape. An empty result is a slice of nothing
    instead: onnxruntime infers Expand's size-1 axis broadcast to 0 as 1, and its memory
    planner then hands a later node a buffer of the wrong size."""
    x = ctx.inputs(rec)[0]
    out = rec.outputs[0]
    if tuple(rec.inputs[0].shape) == tuple(out.shape):
        return [ctx.op.Identity(x)]
    if isinstance(out.size, int) and out.size == 0 and isinstance(rec.inputs[0].size, int):
        return [ctx.empty(x, rec.inputs[0].size, out.shape)]
    return [ctx.run("Expand", [x, ctx.ints(out.shape)], out.dtype)]


@handles("Reshape")
def reshape(ctx, rec):
    """inputs (x,); arguments [shape:tuple] (may hold -1): Reshape to the concrete output shape."""
    (x,) = ctx.inputs(rec)
    return [ctx.reshape(x, rec.outputs[0].shape)]


@handles("Flatten")
def flatten(ctx, rec):
    """inputs (x,); arguments [start_axis, end_axis] (end inclusive): Reshape."""
    (x,) = ctx.inputs(rec)
    return [ctx.reshape(x, rec.outputs[0].shape)]


@handles("Unflatten")
def unflatten(ctx, rec):
    """inputs (x,); arguments [axis, shape:tuple]: Reshape."""
    (x,) = ctx.inputs(rec)
    return [ctx.reshape(x, rec.outputs[0].shape)]


@handles("Transpose")
def transpose(ctx, rec):
    """inputs (x,); arguments [perm:list]: Transpose (identity permutations become Identity)."""
    (x,) = ctx.inputs(rec)
    (perm,) = rec.args
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return [ctx.op.Identity(x)]
    return [ctx.op.Transpose(x, perm=perm)]


@handles("ExpandDims")
def expand_dims(ctx, rec):
    """inputs (x,); arguments [axes:list] (output positions): Unsqueeze."""
    (x,) = ctx.inputs(rec)
    (axes,) = rec.args
    return [ctx.unsqueeze(x, axes)]


@handles("Squeeze")
def squeeze(ctx, rec):
    """inputs (x,); arguments [axes:list]: Squeeze."""
    (x,) = ctx.inputs(rec)
    (axes,) = rec.args
    if not axes:
        return [ctx.op.Identity(x)]
    return [ctx.squeeze(x, axes)]


@handles("Concatenate")
def concatenate(ctx, rec):
    """inputs (arrays...); arguments [axis]: Concat."""
    values = ctx.inputs(rec)
    (axis,) = rec.args
    if len(values) == 1:
        return [ctx.op.Identity(values[0])]
    return [ctx.op.Concat(*values, axis=int(axis))]


@handles("Split")
def split(ctx, rec):
    """inputs (x,); arguments [indices:tuple (split points), axis]: Split with sizes."""
    (x,) = ctx.inputs(rec)
    indices, axis = rec.args
    axis = int(axis)
    sizes = [out.shape[axis] for out in rec.outputs]
    if len(sizes) == 1:
        return [ctx.op.Identity(x)]
    if any(s == 0 for s in sizes):
        # ONNX Split has no zero-size parts in every runtime: slice each part instead.
        outs, start = [], 0
        for size in sizes:
            outs.append(ctx.slice(x, [start], [start + size], [axis]))
            start += size
        return outs
    return list(ctx.split(x, sizes, axis))


@handles("Depends")
def depends(ctx, rec):
    """inputs (outputs..., dependencies...); arguments []: the first len(outputs) inputs pass through."""
    values = ctx.inputs(rec)
    return [ctx.op.Identity(v) for v in values[: len(rec.outputs)]]


@handles("Copy", "StopGradient")
def copy(ctx, rec):
    """inputs (x,); arguments []: Identity. MLX 0.32's simplify pass removes both before the
    export callback, so they appear only in hand-built or future traces."""
    (x,) = ctx.inputs(rec)
    return [ctx.op.Identity(x)]
