"""MLX evaluators of the interpreter: shapes, layout, creation, indexing, sorting."""

from __future__ import annotations

from typing import Sequence

import mlx.core as mx

from ..capture.records import (
    ScatterReduce,
)
from .evaluators import evaluator, out_spec


# -- shape, layout, creation ----------------------------------------------------------------
@evaluator("Broadcast", "BroadcastAxes")
def broadcast(rec, xs, a):
    return [mx.broadcast_to(xs[0], out_spec(rec).shape)]


@evaluator("Reshape")
def reshape(rec, xs, a):
    return [mx.reshape(xs[0], out_spec(rec).shape)]


@evaluator("Flatten")
def flatten(rec, xs, a):
    return [mx.flatten(xs[0], a.start_axis, a.end_axis)]


@evaluator("Unflatten")
def unflatten(rec, xs, a):
    return [mx.unflatten(xs[0], a.axis, list(a.shape))]


@evaluator("ExpandDims")
def expand_dims(rec, xs, a):
    return [mx.expand_dims(xs[0], list(a.axes))]


@evaluator("Squeeze")
def squeeze(rec, xs, a):
    return [mx.squeeze(xs[0], list(a.axes)) if a.axes else xs[0]]


@evaluator("Transpose")
def transpose(rec, xs, a):
    return [mx.transpose(xs[0], list(a.perm))]


@evaluator("Concatenate")
def concatenate(rec, xs, a):
    return [mx.concatenate(xs, axis=a.axis)]


@evaluator("Split")
def split(rec, xs, a):
    return list(mx.split(xs[0], list(a.indices), axis=a.axis))


@evaluator("Pad")
def pad(rec, xs, a):
    x, value = xs
    width = [(0, 0)] * x.ndim
    for axis, low, high in zip(a.axes, a.low_pad, a.high_pad):
        width[axis] = (low, high)
    return [mx.pad(x, width, constant_values=value)]


@evaluator("Arange")
def arange(rec, xs, a):
    return [mx.arange(a.start, a.stop, a.step, dtype=out_spec(rec).dtype)]


@evaluator("Full")
def full(rec, xs, a):
    return [mx.broadcast_to(xs[0], out_spec(rec).shape)]


@evaluator("AsStrided")
def as_strided(rec, xs, a):
    return [mx.as_strided(xs[0], list(a.shape), list(a.strides), a.offset)]


@evaluator("Copy", "StopGradient")
def identity(rec, xs, a):
    return [xs[0]]


@evaluator("Depends")
def depends(rec, xs, a):
    return xs[: len(rec.outputs)]


# -- indexing -----------------------------------------------------------------------------
def _slices(a) -> tuple:
    return tuple(slice(s, e, st) for s, e, st in zip(a.start, a.stop, a.strides))


@evaluator("Slice")
def slice_(rec, xs, a):
    return [xs[0][_slices(a)]]


_AT = {
    ScatterReduce.Sum: "add",
    ScatterReduce.Prod: "multiply",
    ScatterReduce.Max: "maximum",
    ScatterReduce.Min: "minimum",
}


@evaluator("SliceUpdate")
def slice_update(rec, xs, a):
    src, update = xs
    index = _slices(a)
    if str(a.reduce) == "None":
        out = mx.array(src)  # a copy: item assignment must not rebind the caller's array
        out[index] = update
        return [out]
    return [getattr(src.at[index], _AT[a.reduce])(update)]


@evaluator("DynamicSlice")
def dynamic_slice(rec, xs, a):
    return [mx.slice(xs[0], xs[1], list(a.axes), list(a.slice_size))]


@evaluator("DynamicSliceUpdate")
def dynamic_slice_update(rec, xs, a):
    return [mx.slice_update(xs[0], xs[1], xs[2], list(a.axes))]


def _index_grid(
    shape: Sequence[int], axes: Sequence[int], indices: Sequence[mx.array], window: Sequence[int]
) -> tuple[mx.array, ...]:
    """Index arrays of shape ``I + window`` addressing ``a[idx_k + s_k (indexed axes), s_j]``.

    ``I`` is the broadcast shape of ``indices``; negative indices wrap as on MLX CPU.
    """
    batch = mx.broadcast_shapes(*[tuple(i.shape) for i in indices]) if indices else ()
    nb, nw = len(batch), len(window)
    grid = []
    positions = {axis: k for k, axis in enumerate(axes)}
    for d in range(len(shape)):
        offsets = mx.arange(window[d], dtype=mx.int64).reshape(
            (1,) * nb + tuple(window[d] if j == d else 1 for j in range(nw))
        )
        if d in positions:
            idx = indices[positions[d]].astype(mx.int64)
            idx = mx.where(idx < 0, idx + shape[d], idx)
            idx = mx.broadcast_to(idx, batch).reshape(tuple(batch) + (1,) * nw)
            grid.append(idx + offsets)
        else:
            grid.append(offsets)
    return tuple(grid)


@evaluator("Gather")
def gather(rec, xs, a):
    x, *indices = xs
    axes, sizes = list(a.axes), list(a.slice_sizes)
    if x.ndim == 0:
        return [x]
    return [x[_index_grid(x.shape, axes, indices, sizes)]]


@evaluator("GatherAxis")
def gather_axis(rec, xs, a):
    return [mx.take_along_axis(xs[0], xs[1], axis=a.axis)]


@evaluator("Scatter")
def scatter(rec, xs, a):
    x, *indices, updates = xs
    axes = list(a.axes)
    batch_rank = updates.ndim - x.ndim
    window = list(updates.shape[batch_rank:])
    grid = _index_grid(x.shape, axes, indices, window)
    updates = mx.broadcast_to(updates, mx.broadcast_shapes(*[tuple(g.shape) for g in grid], tuple(updates.shape)))
    if str(a.reduce) == "None":
        out = mx.array(x)
        out[grid] = updates
        return [out]
    return [getattr(x.at[grid], _AT[a.reduce])(updates)]


@evaluator("ScatterAxis")
def scatter_axis(rec, xs, a):
    x, idx, updates = xs
    axis = a.axis
    if str(a.reduce) == "None":
        return [mx.put_along_axis(x, idx, updates, axis=axis)]
    idx = idx.astype(mx.int64)
    idx = mx.where(idx < 0, idx + x.shape[axis], idx)
    grid = tuple(
        idx if d == axis else mx.arange(idx.shape[d]).reshape(tuple(-1 if j == d else 1 for j in range(x.ndim)))
        for d in range(x.ndim)
    )
    return [x.at[grid].add(updates)]


@evaluator("MaskedScatter")
def masked_scatter(rec, xs, a):
    x, mask, src = xs
    batch = x.shape[0] if x.ndim else 1
    flat_mask = mx.broadcast_to(mask, x.shape).reshape(batch, -1)
    flat_src = src.reshape(batch, -1)
    position = mx.cumsum(flat_mask.astype(mx.int32), axis=1) - 1
    position = mx.clip(position, 0, max(flat_src.shape[1] - 1, 0))
    picked = mx.take_along_axis(flat_src, position, axis=1).astype(x.dtype)
    return [mx.where(flat_mask, picked, x.reshape(batch, -1)).reshape(x.shape)]


# -- sort and search ------------------------------------------------------------------------
@evaluator("Sort")
def sort(rec, xs, a):
    return [mx.sort(xs[0], axis=a.axis)]


@evaluator("ArgSort")
def argsort(rec, xs, a):
    return [mx.argsort(xs[0], axis=a.axis)]


@evaluator("Partition")
def partition(rec, xs, a):
    return [mx.partition(xs[0], a.kth, axis=a.axis)]


@evaluator("ArgPartition")
def argpartition(rec, xs, a):
    return [mx.argpartition(xs[0], a.kth, axis=a.axis)]


@evaluator("SearchSorted")
def searchsorted(rec, xs, a):
    return [mx.searchsorted(xs[0], xs[1], side="right" if a.right else "left")]
