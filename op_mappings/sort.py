"""Sort and search: Sort, ArgSort, Partition, ArgPartition, SearchSorted.

MLX sorts stably with NaN last (any sign of NaN), and ``-0.0`` ties ``+0.0``; ONNX
``TopK(largest=0, sorted=1)`` with k = the axis length orders the same way (lower index
first on ties, NaN last), so it is the sort. onnxruntime's TopK runs only float32/float64
and int8..int64/uint8: other dtypes are sorted through an order-preserving key (float16 and
bfloat16 as float32, uint16/uint32 widened, uint64 as int64 with the sign bit flipped).
A full sort is a valid partition, so Partition/ArgPartition use it too (MLX's element order
inside the two sides is implementation-defined).
"""

from __future__ import annotations

import mlx.core as mx

from mlx2onnx import dtypes
from mlx2onnx.translate.registry import handles

from .order_keys import from_key, ordered_key


def sorted_along(ctx, rec, axis):
    """(values, int64 indices) of the stable ascending sort of input 0 along ``axis``."""
    (x,) = ctx.inputs(rec)
    spec = rec.inputs[0]
    dtype = spec.dtype
    if not -spec.rank <= axis < spec.rank:
        raise ctx.fail(f"argument axis={axis} is out of range for a rank-{spec.rank} input")
    axis %= spec.rank
    key, key_dtype = ordered_key(ctx, x, dtype, "TopK")
    values, indices = ctx.op.TopK(key, ctx.ints([spec.shape[axis]]), axis=axis, largest=0, sorted=1, _outputs=2)
    if key_dtype == mx.uint64:
        values = ctx.op.GatherElements(x, indices, axis=axis)
    else:
        values = from_key(ctx, values, key_dtype, dtype)
    return values, indices


@handles("Sort")
def sort(ctx, rec):
    """inputs (x,); arguments [axis]: values sorted ascending along ``axis``, NaN last."""
    (axis,) = rec.args
    values, _ = sorted_along(ctx, rec, int(axis))
    return [values]


@handles("ArgSort")
def argsort(ctx, rec):
    """inputs (x,); arguments [axis]: uint32 indices of the stable ascending sort."""
    (axis,) = rec.args
    _, indices = sorted_along(ctx, rec, int(axis))
    return [ctx.cast(indices, rec.outputs[0].dtype)]


def check_kth(ctx, rec, kth, axis):
    spec = rec.inputs[0]
    n = spec.shape[int(axis) % spec.rank]
    if not -n <= kth < max(n, 1):
        raise ctx.fail(f"argument kth={kth} is out of range for an axis of length {n}")


@handles("Partition")
def partition(ctx, rec):
    """inputs (x,); arguments [kth, axis]: element kth in its sorted place, smaller ones
    before it and larger ones after (a full sort; ``mx.topk`` is Partition + Slice)."""
    kth, axis = rec.args
    check_kth(ctx, rec, kth, axis)
    values, _ = sorted_along(ctx, rec, int(axis))
    return [values]


@handles("ArgPartition")
def argpartition(ctx, rec):
    """inputs (x,); arguments [kth, axis]: uint32 indices of a partition (a stable full sort)."""
    kth, axis = rec.args
    check_kth(ctx, rec, kth, axis)
    _, indices = sorted_along(ctx, rec, int(axis))
    return [ctx.cast(indices, rec.outputs[0].dtype)]


@handles("SearchSorted")
def searchsorted(ctx, rec):
    """inputs (sorted 1-D sequence a, values v) of one dtype; arguments [right: bool]: uint32
    with the shape of v. left: the number of a[i] before v, right: the number not after v,
    in MLX's order (NaN after everything, so a NaN value lands after all numbers)."""
    a, v = ctx.inputs(rec)
    (right,) = rec.args
    dtype = rec.inputs[1].dtype
    if rec.inputs[0].rank != 1:
        raise ctx.fail(f"input 0 has rank {rec.inputs[0].rank}: SearchSorted needs a 1-D sorted sequence")
    work = ctx.work_dtype("Less", dtype)
    a = ctx.cast(a, work)
    v = ctx.unsqueeze(ctx.cast(v, work), [-1])

    def before(p, q):
        """p sorts strictly before q (NaN last)."""
        less = ctx.op.Less(p, q)
        if not dtypes.is_float(dtype):
            return less
        return ctx.op.Or(less, ctx.op.And(ctx.op.IsNaN(q), ctx.op.Not(ctx.op.IsNaN(p))))

    hits = ctx.op.Not(before(v, a)) if right else before(a, v)
    count = ctx.reduce("ReduceSum", ctx.cast(hits, mx.int64), [-1], keepdims=False)
    return [ctx.cast(count, rec.outputs[0].dtype)]
