"""Indexing primitives: Slice, Gather, GatherAxis."""

from __future__ import annotations

import mlx.core as mx

from mlx2onnx import dtypes
from mlx2onnx.registry import handles


def index_int64(ctx, value, spec):
    """Indices as int64 (MLX uses uint32 and other widths; ONNX Gather wants int32/int64)."""
    return ctx.cast(value, mx.int64)


@handles("Slice")
def slice_(ctx, rec):
    """inputs (x,); arguments [start:tuple, stop:tuple, strides:tuple], full rank. Start is
    normalised to >= 0, stop is left as written; ONNX Slice clamps the same way."""
    (x,) = ctx.inputs(rec)
    start, stop, strides = rec.arguments
    axes = list(range(len(start)))
    return [ctx.slice(x, start, stop, axes, strides)]


@handles("Gather")
def gather(ctx, rec):
    """inputs (a, idx_0 .. idx_{m-1}) broadcast to one shape I; arguments [axes:list,
    slice_sizes:tuple]. Output shape is I + slice_sizes (indexed axes keep a size-1 dim).
    Negative indices wrap, as on MLX's CPU."""
    a, *indices = ctx.inputs(rec)
    axes, slice_sizes = rec.arguments
    axes = [int(ax) for ax in axes]
    src = rec.inputs[0]
    out = rec.outputs[0]
    for ax in axes:
        if slice_sizes[ax] != 1:
            raise ctx.fail(
                f"slice_sizes[{ax}]={slice_sizes[ax]} on an indexed axis is not supported "
                "(only mx.core C++ gather produces it); index with size-1 slices instead"
            )
    others = [d for d in range(src.rank) if d not in axes]
    if any(slice_sizes[d] != src.shape[d] for d in others):
        a = ctx.slice(a, [0] * len(others), [slice_sizes[d] for d in others], others)
    index_shape = rec.inputs[1].shape if indices else ()
    if not indices:
        return [ctx.reshape(a, out.shape)]
    if len(axes) == 1:
        axis = axes[0]
        idx = index_int64(ctx, indices[0], rec.inputs[1])
        gathered = ctx.op.Gather(a, idx, axis=axis)  # pre + I + post
        k = len(index_shape)
        perm = list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, src.rank - 1 + k))
        if perm != list(range(len(perm))):
            gathered = ctx.op.Transpose(gathered, perm=perm)
        return [ctx.reshape(gathered, out.shape)]
    order = axes + others
    moved = a if order == list(range(src.rank)) else ctx.op.Transpose(a, perm=order)
    stacked = ctx.op.Concat(*[ctx.unsqueeze(index_int64(ctx, i, None), [-1]) for i in indices], axis=-1)
    gathered = ctx.op.GatherND(moved, stacked)  # I + [a.shape[o] for o in others]
    return [ctx.reshape(gathered, out.shape)]


@handles("GatherAxis")
def gather_axis(ctx, rec):
    """inputs (a, idx) of equal rank; arguments [axis]: GatherElements (take_along_axis)."""
    a, idx = ctx.inputs(rec)
    (axis,) = rec.arguments
    return [ctx.op.GatherElements(a, index_int64(ctx, idx, rec.inputs[1]), axis=int(axis))]
