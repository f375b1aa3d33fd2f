"""Slices: Slice, SliceUpdate, DynamicSlice, DynamicSliceUpdate.

* Dynamic slices: MLX does not check bounds (out of range is undefined, even a crash);
  the export clamps the start into [0, dim - size], so the declared shape always holds.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from mlx2onnx.capture.records import ScatterReduce
from mlx2onnx.capture.symbolic import any_dynamic
from mlx2onnx.translate.registry import handles

SLICE_UPDATE_OPS = {
    ScatterReduce.Max: "Max",
    ScatterReduce.Min: "Min",
    ScatterReduce.Sum: "Add",
    ScatterReduce.Prod: "Mul",
}


@handles("Slice")
def slice_(ctx, rec):
    """inputs (x,); arguments [start:tuple, stop:tuple, strides:tuple], full rank. Start is
    normalised to >= 0, stop is left as written; ONNX Slice clamps the same way."""
    (x,) = ctx.inputs(rec)
    start, stop, strides = rec.args
    if (
        rec.inputs[0].rank == 0
        or tuple(rec.inputs[0].shape) == tuple(rec.outputs[0].shape)
        and all(s == 0 and st == 1 for s, st in zip(start, strides))
    ):
        return [ctx.op.Identity(x)]
    # MLX normalises a start below -dim with a negative stride to -1 ("before the first
    # element": nothing), which ONNX reads as the last element; spell empty axes plainly.
    empty = [d for d, n in enumerate(rec.outputs[0].shape) if n == 0]
    start = [0 if d in empty else s for d, s in enumerate(start)]
    stop = [0 if d in empty else e for d, e in enumerate(stop)]
    strides = [1 if d in empty else st for d, st in enumerate(strides)]
    # Only the axes that are cut (a dynamic axis kept whole then needs no Shape).
    shape = rec.inputs[0].shape
    axes = [
        d for d in range(len(start)) if d in empty or not (start[d] == 0 and strides[d] == 1 and stop[d] == shape[d])
    ]
    if not axes:
        return [ctx.op.Identity(x)]
    pick = lambda values: [values[d] for d in axes]  # noqa: E731
    return [ctx.slice(x, pick(start), pick(stop), axes, pick(strides))]


def slice_ranges(ctx, shape, start, stop, strides, update_shape):
    """The source positions each axis of a SliceUpdate writes, checked against the update."""
    ranges = []
    for d, (dim, s, e, st) in enumerate(zip(shape, start, stop, strides)):
        positions = list(range(*slice(int(s), int(e), int(st)).indices(dim)))
        if len(positions) != update_shape[d]:
            raise ctx.fail(
                f"slice start={tuple(start)} stop={tuple(stop)} strides={tuple(strides)} covers "
                f"{len(positions)} elements on axis {d} but the update has {update_shape[d]}"
            )
        ranges.append(positions)
    return ranges


def is_full(positions, dim):
    return len(positions) == dim and (dim == 0 or positions[0] == 0)


def write_block(ctx, region, shape, update, ranges):
    """``region`` (of ``shape``) with ``update`` written at the contiguous ascending
    ``ranges``, by Slice + Concat along each partially written axis."""
    for d, positions in enumerate(ranges):
        if is_full(positions, shape[d]):
            continue
        lo, hi = positions[0], positions[-1] + 1
        rest = ranges[d + 1 :]
        if any(not is_full(p, shape[d + 1 + k]) for k, p in enumerate(rest)):
            band_shape = list(shape)
            band_shape[d] = hi - lo
            inner = [list(range(n)) for n in band_shape[: d + 1]] + list(rest)
            middle = write_block(ctx, ctx.slice(region, [lo], [hi], [d]), band_shape, update, inner)
        else:
            middle = update
        parts = [ctx.slice(region, [0], [lo], [d])] if lo > 0 else []
        parts.append(middle)
        if hi < shape[d]:
            parts.append(ctx.slice(region, [hi], [shape[d]], [d]))
        return parts[0] if len(parts) == 1 else ctx.op.Concat(*parts, axis=d)
    return ctx.op.Identity(update)


@handles("SliceUpdate")
def slice_update(ctx, rec):
    """inputs (src, update) (update already cast and broadcast to the slice's shape);
    arguments [reduce: ScatterReduce, start, stop, strides].

    A reduction is computed elementwise on the slice first (MLX's SliceUpdate Max/Min
    propagate NaN like maximum/minimum), then the result is written: by Slice + Concat
    when every stride is +-1, otherwise by ScatterND with a constant index grid (a slice
    never writes one element twice)."""
    src, update = ctx.inputs(rec)
    reduce_code, start, stop, strides = rec.args
    s_spec, u_spec = rec.inputs
    dtype = rec.outputs[0].dtype
    n = s_spec.rank
    if any_dynamic((*start, *stop, *s_spec.shape, *u_spec.shape)):
        return [
            dynamic_slice_write(
                ctx, src, update, s_spec, u_spec, start, strides, SLICE_UPDATE_OPS.get(int(reduce_code)), dtype
            )
        ]
    steps = [int(st) for st in strides]
    ranges = slice_ranges(ctx, s_spec.shape, start, stop, strides, u_spec.shape)
    if u_spec.size == 0:
        return [ctx.op.Identity(src)]
    combine = SLICE_UPDATE_OPS.get(int(reduce_code))
    if combine is not None:
        current = ctx.slice(src, start, stop, list(range(n)), steps) if n else src
        update = ctx.run(combine, [current, update], dtype)
    if all(abs(st) == 1 for st in steps):
        flip = [d for d in range(n) if steps[d] == -1 and u_spec.shape[d] > 1]
        if flip:
            update = ctx.slice(update, [-1] * len(flip), [-u_spec.shape[d] - 1 for d in flip], flip, [-1] * len(flip))
        return [write_block(ctx, src, list(s_spec.shape), update, [sorted(r) for r in ranges])]
    depth = 1 + max(d for d in range(n) if not (steps[d] == 1 and is_full(ranges[d], s_spec.shape[d])))
    grid = np.stack(np.meshgrid(*[np.asarray(r, dtype=np.int64) for r in ranges[:depth]], indexing="ij"), axis=-1)
    return [ctx.op.ScatterND(src, ctx.const(grid), update)]


def dynamic_slice_write(ctx, src, update, s_spec, u_spec, start, strides, combine, dtype):
    """SliceUpdate whose bounds follow a dynamic size: the update padded out to the
    source's shape, selected by an equally padded mask (unit strides only)."""
    n = s_spec.rank
    if any(st != 1 for st in strides):
        raise ctx.fail(
            f"a slice update with strides {tuple(strides)} and bounds that change with a dynamic size "
            "is not supported (unit strides are); keep that dimension static"
        )
    if combine is not None:
        stop = [s + u for s, u in zip(start, u_spec.shape)]
        update = ctx.run(combine, [ctx.slice(src, start, stop, list(range(n))), update], dtype)
    before = list(start)
    after = [d - s - u for d, s, u in zip(s_spec.shape, start, u_spec.shape)]
    pads = ctx.ints(before + after)
    padded = ctx.run("Pad", [update, pads, ctx.scalar(0, dtype)], dtype, fixed=(1,), mode="constant")
    ones = ctx.op.Expand(ctx.const(np.asarray(1, np.uint8)), ctx.op.Shape(update))
    mask = ctx.op.Cast(ctx.op.Pad(ones, pads, ctx.const(np.asarray(0, np.uint8))), to=ir.DataType.BOOL)
    return ctx.op.Where(mask, padded, src)


@handles("DynamicSlice")
def dynamic_slice(ctx, rec):
    """inputs (x, start (1-D int, one per axis)); arguments [axes:list, slice_size:tuple
    (full rank)]: Slice with runtime starts. MLX does not check bounds (out of range is
    undefined, even a crash); here the start is clamped to [0, dim - size] so the output
    always has the declared shape (as in JAX's dynamic_slice)."""
    x, start = ctx.inputs(rec)
    axes, slice_size = rec.args
    src, out = rec.inputs[0], rec.outputs[0]
    n = src.rank
    axes = [int(ax) % n for ax in axes]
    sizes = list(slice_size)
    if out.size == 0:
        return [ctx.empty(x, src.size, out.shape)]
    fixed = [d for d in range(n) if d not in axes and sizes[d] != src.shape[d]]
    if fixed:
        x = ctx.slice(x, [0] * len(fixed), [sizes[d] for d in fixed], fixed)
    begin = clamped_start(ctx, start, rec.inputs[1], [src.shape[ax] - sizes[ax] for ax in axes])
    end = ctx.op.Add(begin, ctx.ints([sizes[ax] for ax in axes]))
    return [ctx.op.Slice(x, begin, end, ctx.ints(axes))]


def clamped_start(ctx, start, spec, highest):
    begin = ctx.cast(start, mx.int64)
    if spec.rank == 0:
        begin = ctx.reshape(begin, [1])
    return ctx.op.Min(ctx.op.Max(begin, ctx.ints([0] * len(highest))), ctx.ints(highest))


@handles("DynamicSliceUpdate")
def dynamic_slice_update(ctx, rec):
    """inputs (src, update, start (1-D int, one per axis)); arguments [axes:list]: ScatterND
    with a constant index grid plus the runtime start offsets. The start is clamped to
    [0, dim - update size] (MLX leaves out-of-range writes undefined)."""
    src_v, update, start = ctx.inputs(rec)
    (axes,) = rec.args
    src, upd = rec.inputs[0], rec.inputs[1]
    n = src.rank
    axes = [int(ax) % n for ax in axes]
    if upd.size == 0 or src.size == 0:
        return [ctx.op.Identity(src_v)]
    depth = 1 + max([d for d in range(n) if d in axes or upd.shape[d] != src.shape[d]])
    if any_dynamic(upd.shape[:depth]):
        grid = runtime_index_grid(ctx, upd.shape[:depth])
    else:
        grid = ctx.const(
            np.stack(
                np.meshgrid(*[np.arange(upd.shape[d], dtype=np.int64) for d in range(depth)], indexing="ij"), axis=-1
            )
        )
    begin = clamped_start(ctx, start, rec.inputs[2], [src.shape[ax] - upd.shape[ax] for ax in axes])
    mapping = [axes.index(d) if d in axes else len(axes) for d in range(depth)]
    offsets = ctx.op.Gather(ctx.op.Concat(begin, ctx.ints([0]), axis=0), ctx.ints(mapping))
    return [ctx.op.ScatterND(src_v, ctx.op.Add(grid, offsets), update)]


def runtime_index_grid(ctx, lengths):
    """int64 ``[*lengths, len(lengths)]``: every index of an array of shape ``lengths``
    (some of them dynamic), built from one ``Range`` per axis."""
    full = ctx.ints([*lengths, 1])
    parts = [ctx.op.Expand(ctx.axis_range(length, k, len(lengths) + 1), full) for k, length in enumerate(lengths)]
    return ctx.op.Concat(*parts, axis=-1)


# -- gathers ----------------------------------------------------------------------------
