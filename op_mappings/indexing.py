"""Indexing primitives: Gather, GatherAxis, Scatter, ScatterAxis, MaskedScatter (slices:
:mod:`.slicing`).

Conventions shared by the handlers below (layouts: docs/records.md):

* Index arrays arrive in any integer dtype (uint32 from ``x[-1]`` and Arange, int8 ...).
  They are cast to int64; signed ones are wrapped (``i < 0 -> i + dim``) exactly like
  MLX's CPU ``offset_neg_idx``. Out-of-range indices are undefined in MLX.
* Scatter with reduce None and duplicate targets: MLX's CPU applies the updates in order,
  so the last write wins, while ONNX ScatterND/ScatterElements leave the winner
  undefined (onnxruntime writes in parallel). The handlers make it exact: an ONNX
  ``Unique`` over the flattened targets finds the last writer of every target and every
  duplicate writes that value.
* Scatter reductions (Sum, Prod, Max, Min) map to ScatterND's reductions, which
  onnxruntime applies in order with the same comparison rule as MLX
  (``(y > x) ? y : x``, so NaN handling matches). ScatterND max/min exist from opset 18;
  below it, integer and bool Max/Min are emulated exactly (TopK + Unique: integer max is
  order-free) and float Max/Min are refused (with NaN MLX's result depends on the order).
* Dynamic slices: MLX does not check bounds (out of range is undefined, even a crash);
  the export clamps the start into [0, dim - size], so the declared shape always holds.
* MaskedScatter: the k-th True takes source element k (per batch row); a mask with more
  Trues than source elements is undefined in MLX and reuses the last element here.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.capture.records import ScatterAxisReduce, ScatterReduce
from mlx2onnx.capture.symbolic import any_dynamic, is_dynamic
from mlx2onnx.translate.registry import handles

# Scatter / SliceUpdate reduce codes -> ONNX reduction names.
SCATTER_REDUCTIONS = {
    ScatterReduce.Max: "max",
    ScatterReduce.Min: "min",
    ScatterReduce.Sum: "add",
    ScatterReduce.Prod: "mul",
    ScatterReduce.None_: "none",
}
SCATTER_AXIS_REDUCTIONS = {ScatterAxisReduce.Sum: "add", ScatterAxisReduce.None_: "none"}


# -- helpers ----------------------------------------------------------------------------
def index_int64(ctx, value, spec, dim=None):
    """Indices as int64; with ``dim``, signed negative indices wrap (+dim) as on MLX's CPU."""
    idx = ctx.cast(value, mx.int64)
    if dim is None or spec is None or spec.dtype not in dtypes.SIGNED or (not is_dynamic(dim) and dim == 0):
        return idx
    # Where rather than Mod: tract's integer Mod takes the dividend's sign
    return ctx.op.Where(ctx.op.Less(idx, ctx.scalar(0, mx.int64)), ctx.op.Add(idx, _int64(ctx, dim)), idx)


def _int64(ctx, value):
    """A 0-d int64 of ``value``, a number or a dynamic size (computed from ``Shape``)."""
    return ctx.ints(value) if is_dynamic(value) else ctx.scalar(value, mx.int64)


def expand_to(ctx, value, spec_shape, shape):
    if tuple(spec_shape) == tuple(shape):
        return value
    return ctx.op.Expand(value, ctx.ints(list(shape)))


def index_grid(ctx, src_shape, sizes, batch, indexed):
    """int64 ``[*batch, *sizes, n]``: element ``(i, j)`` holds the source coordinate
    ``indexed[d][i] + j_d`` on the indexed axes ``d`` and ``j_d`` on the others."""
    n, b = len(src_shape), len(batch)
    full = list(batch) + list(sizes)
    parts = []
    for d in range(n):
        ramp = np.arange(sizes[d], dtype=np.int64).reshape([1] * b + [sizes[d] if k == d else 1 for k in range(n)])
        if d in indexed:
            comp = ctx.reshape(indexed[d], list(batch) + [1] * n)
            if sizes[d] != 1:
                comp = ctx.op.Add(comp, ctx.const(ramp))
        else:
            comp = ctx.const(ramp)
        parts.append(ctx.unsqueeze(ctx.op.Expand(comp, ctx.ints(full)), [-1]))
    return parts[0] if n == 1 else ctx.op.Concat(*parts, axis=-1)


# The most write targets whose last writer is found with a scatter-max buffer (an int64
# buffer of this many entries is 128 MiB); larger targets use Unique.
MAX_KEY_SPACE = 1 << 24


def reverse(ctx, flat):
    """A 1-D value back to front (any length: the end is clamped to before the start)."""
    return ctx.slice(flat, [-1], [-(2**63)], [0], [-1])


def last_writer(ctx, keys, count, space=None):
    """For each of ``count`` flattened write keys, the position of the last write with the
    same key (MLX's 'last write wins' order). With the number of possible keys ``space``
    known (and opset 18+), each key's latest position is scattered with reduction max into
    a buffer of that size and read back, which every runtime of the portable target runs
    (tract has no 3- or 4-output Unique); otherwise Unique over the reversed keys."""
    flat = ctx.reshape(keys, [count])
    if space is not None and not is_dynamic(space) and ctx.has("scatter max/min") and 0 < space <= MAX_KEY_SPACE:
        zero = ctx.scalar(0, mx.int64)
        # a static count as a plain number: tract types a Size as a symbolic dim it cannot scatter
        limit = ctx.op.Size(flat) if is_dynamic(count) else ctx.scalar(count, mx.int64)
        positions = ctx.op.Range(zero, limit, ctx.scalar(1, mx.int64))
        latest = ctx.op.ScatterElements(
            ctx.op.Expand(zero, ctx.ints([space])), flat, positions, axis=0, reduction="max"
        )  # 0 is at most every position
        return ctx.op.Gather(latest, flat, axis=0)
    flipped = reverse(ctx, flat)
    _, first, inverse, _ = ctx.op.Unique(flipped, sorted=0, _outputs=4)
    winner_flipped = ctx.op.Gather(first, inverse)
    return ctx.op.Sub(_int64(ctx, count - 1), reverse(ctx, winner_flipped))


def last_write_wins(ctx, keys, values, lead, rest, space=None):
    """``values`` (shape lead + rest, one write per lead position, targets ``keys`` of shape
    lead, ``space`` possible targets) with every duplicate write replaced by the last one
    to the same target."""
    count = 1
    for d in lead:
        count = count * d
    if not is_dynamic(count) and count <= 1:
        return values
    winner = last_writer(ctx, keys, count, space)
    flat = ctx.reshape(values, [count] + list(rest))
    return ctx.reshape(ctx.op.Gather(flat, winner, axis=0), list(lead) + list(rest))


def linear_keys(ctx, nd, dims):
    """Row-major linear index of the (non-negative) coordinates on ``nd``'s last axis."""
    if len(dims) == 1:
        return ctx.squeeze(nd, [-1])
    strides = [1]
    for d in reversed(list(dims)[1:]):
        strides.insert(0, strides[0] * d)
    return ctx.reduce("ReduceSum", ctx.op.Mul(nd, ctx.ints(strides)), [-1], keepdims=False)


def reduction_dtype(reduction, dtype):
    """The dtype onnxruntime runs ScatterND/ScatterElements with ``reduction`` in, exactly."""
    if reduction == "none":
        return dtype
    if dtype in (mx.float16, mx.bfloat16):
        return mx.float32
    if dtype == mx.bool_:
        return mx.uint8 if reduction in ("max", "min") else mx.bool_
    return dtype


def scatter_op(ctx, op_type, data, indices, values, reduction, dtype, **attrs):
    work = reduction_dtype(reduction, dtype)
    if reduction != "none":
        attrs["reduction"] = reduction
    node = getattr(ctx.op, op_type)(ctx.cast(data, work), indices, ctx.cast(values, work), **attrs)
    return ctx.cast(node, dtype)


def scatter_extreme(ctx, data, shape, row_keys, values, lead, rest, reduction, dtype):
    """Scatter Max/Min of integers or bools without ScatterND's max/min (opset < 18):
    sort the writes by value (TopK), keep the first per target (Unique), then combine with
    the current value and write once. Exact because integer max/min ignore order."""
    width = int(np.prod(rest, dtype=np.int64))
    count = int(np.prod(lead, dtype=np.int64)) * width
    keys = ctx.op.Add(
        ctx.op.Mul(ctx.unsqueeze(ctx.reshape(row_keys, [count // width]), [-1]), ctx.scalar(width, mx.int64)),
        ctx.const(np.arange(width, dtype=np.int64)),
    )
    flat = ctx.cast(ctx.reshape(values, [count]), mx.int64)
    ordered, order = ctx.op.TopK(flat, ctx.ints([count]), axis=0, largest=int(reduction == "max"), sorted=1, _outputs=2)
    targets, first, _, _ = ctx.op.Unique(ctx.op.Gather(ctx.reshape(keys, [count]), order), sorted=0, _outputs=4)
    best = ctx.cast(ctx.op.Gather(ordered, first), dtype)
    base = ctx.reshape(data, [int(np.prod(shape, dtype=np.int64))])
    merged = ctx.run("Max" if reduction == "max" else "Min", [ctx.op.Gather(base, targets), best], dtype)
    written = ctx.op.ScatterND(base, ctx.unsqueeze(targets, [-1]), merged)
    return ctx.reshape(written, shape)


def inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def transpose(ctx, x, perm):
    return x if list(perm) == list(range(len(perm))) else ctx.op.Transpose(x, perm=list(perm))


# -- slicing ----------------------------------------------------------------------------
@handles("Gather")
def gather(ctx, rec):
    """inputs (a, idx_0 .. idx_{m-1}) broadcast to one shape I; arguments [axes:list,
    slice_sizes:tuple]. Output shape is I + slice_sizes; each slice starts at the indices
    on the indexed axes and at 0 elsewhere. Negative indices wrap, as on MLX's CPU.

    One index array: Gather(axis) + Transpose to MLX's order. Several: GatherND after
    moving the indexed axes to the front. A slice wider than 1 on an indexed axis (C++
    API only): GatherND over a full index grid."""
    a, *indices = ctx.inputs(rec)
    axes, slice_sizes = rec.args
    axes = [int(ax) for ax in axes]
    sizes = list(slice_sizes)  # SymInt where a size is dynamic
    src, out = rec.inputs[0], rec.outputs[0]
    n = src.rank
    batch = tuple(out.shape[: out.rank - n])
    if out.size == 0:
        return [ctx.empty(a, src.size, out.shape)]
    if not indices:
        if sizes != list(src.shape):
            a = ctx.slice(a, [0] * n, sizes, list(range(n)))
        return [ctx.reshape(a, out.shape)]
    if any(sizes[ax] != 1 for ax in axes):
        indexed = {
            ax: expand_to(ctx, index_int64(ctx, v, spec, src.shape[ax]), spec.shape, batch)
            for ax, v, spec in zip(axes, indices, rec.inputs[1:])
        }
        return [ctx.op.GatherND(a, index_grid(ctx, src.shape, sizes, batch, indexed))]
    others = [d for d in range(n) if d not in axes]
    if any(sizes[d] != src.shape[d] for d in others):
        a = ctx.slice(a, [0] * len(others), [sizes[d] for d in others], others)
    if len(axes) == 1 and axes[0] < n - 1 and src.dtype == mx.uint32 and ctx.portable and a.const_value is not None:
        return [gather_packed_rows(ctx, a, indices[0], rec)]
    if len(axes) == 1:
        axis = axes[0]
        gathered = ctx.op.Gather(a, index_int64(ctx, indices[0], rec.inputs[1]), axis=axis)  # pre + I + post
        k = rec.inputs[1].rank
        perm = list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, n - 1 + k))
        return [ctx.reshape(transpose(ctx, gathered, perm), out.shape)]
    moved = transpose(ctx, a, axes + others)
    stacked = ctx.op.Concat(
        *[
            ctx.unsqueeze(expand_to(ctx, index_int64(ctx, v, spec), spec.shape, batch), [-1])
            for v, spec in zip(indices, rec.inputs[1:])
        ],
        axis=-1,
    )
    gathered = ctx.op.GatherND(moved, stacked)  # I + [sizes[o] for o in others]
    return [ctx.reshape(gathered, out.shape)]


def gather_packed_rows(ctx, a, index, rec):
    """Rows of a constant uint32 table (a quantized embedding's packed words) for the
    portable target: the table is stored as its bytes (shared with the quantized matmul
    that reads the same weights, a tied lm_head) and the gathered rows are joined back
    into words: OpenVINO misreads uint32 constants at or above 2^31."""
    from .quant_codes import as_bytes, words_from_bytes

    src, out = rec.inputs[0], rec.outputs[0]
    data = as_bytes(ctx, a, a.const_value.numpy())
    words = src.shape[-1]
    axis = rec.args.axes[0]
    gathered = ctx.op.Gather(data, index_int64(ctx, index, rec.inputs[1]), axis=axis)
    k = rec.inputs[1].rank
    n = src.rank
    perm = list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, n - 1 + k))
    rows = transpose(ctx, gathered, perm)
    lead = [*rec.inputs[1].shape, *[src.shape[d] for d in range(n) if d != axis][:-1]]
    return ctx.reshape(words_from_bytes(ctx, rows, [*lead, words]), out.shape)


@handles("GatherAxis")
def gather_axis(ctx, rec):
    """inputs (a, idx) of equal rank; arguments [axis]: GatherElements (take_along_axis).
    Negative indices wrap (GatherElements allows them)."""
    a, idx = ctx.inputs(rec)
    (axis,) = rec.args
    if rec.outputs[0].size == 0:
        return [ctx.empty(a, rec.inputs[0].size, rec.outputs[0].shape)]
    return [ctx.op.GatherElements(a, index_int64(ctx, idx, rec.inputs[1]), axis=int(axis))]


# -- scatters ---------------------------------------------------------------------------
@handles("Scatter")
def scatter(ctx, rec):
    """inputs (a, idx_0 .. idx_{m-1}, updates (I + a full-rank slice shape)); arguments
    [reduce: ScatterReduce, axes:list].

    ScatterND with reduction none/add/mul/max/min after moving the indexed axes to the
    front (or over a full index grid when the slices are not whole rows). Duplicate
    targets with None: the last write wins, as on MLX's CPU. Max/Min need opset 18."""
    a, *indices, updates = ctx.inputs(rec)
    reduce_code, axes = rec.args
    reduction = SCATTER_REDUCTIONS[int(reduce_code)]
    axes = [int(ax) for ax in axes]
    src, upd = rec.inputs[0], rec.inputs[-1]
    n = src.rank
    emulate = reduction in ("max", "min") and not ctx.has("scatter max/min")
    if emulate and (dtypes.is_float(src.dtype) or src.dtype == mx.uint64):
        raise ctx.fail(
            f"reduce={int(reduce_code)} ({'Max' if reduction == 'max' else 'Min'}) on "
            f"{dtypes.name(src.dtype)} needs ScatterND reduction='{reduction}', which ONNX has from "
            f"opset 18 (MLX's result with NaN depends on the write order); {ctx.needs('scatter max/min')}"
        )
    if upd.size == 0 or src.size == 0:
        return [ctx.op.Identity(a)]
    if n == 0:
        raise ctx.fail("a 0-d scatter target is not supported: index a 1-d array instead")
    batch = tuple(upd.shape[: upd.rank - n])
    sizes = tuple(upd.shape[upd.rank - n :])
    indexed = {
        ax: expand_to(ctx, index_int64(ctx, v, spec, src.shape[ax]), spec.shape, batch)
        for ax, v, spec in zip(axes, indices, rec.inputs[1:-1])
    }
    others = [d for d in range(n) if d not in axes]
    order = list(range(n))
    if axes and all(sizes[ax] == 1 for ax in axes) and all(sizes[d] == src.shape[d] for d in others):
        order = axes + others
        data = transpose(ctx, a, order)
        columns = [ctx.unsqueeze(indexed[ax], [-1]) for ax in axes]
        nd = columns[0] if len(columns) == 1 else ctx.op.Concat(*columns, axis=-1)
        lead, rest = batch, [src.shape[d] for d in others]
        values = ctx.reshape(updates, list(lead) + rest)
        key_dims = [src.shape[ax] for ax in axes]
    else:
        data, values = a, updates
        nd = index_grid(ctx, src.shape, sizes, batch, indexed)
        lead, rest, key_dims = batch + sizes, [], list(src.shape)
    if reduction == "none":
        values = last_write_wins(
            ctx,
            linear_keys(ctx, nd, key_dims),
            values,
            lead,
            rest,
            space=math.prod(key_dims) if not any_dynamic(key_dims) else None,
        )
    if emulate:
        shape = [src.shape[d] for d in order]
        result = scatter_extreme(
            ctx, data, shape, linear_keys(ctx, nd, key_dims), values, lead, rest, reduction, src.dtype
        )
    else:
        result = scatter_op(ctx, "ScatterND", data, nd, values, reduction, src.dtype)
    return [transpose(ctx, result, inverse(order))]


@handles("ScatterAxis")
def scatter_axis(ctx, rec):
    """inputs (a, idx, updates) (idx and updates of one shape, same rank as a); arguments
    [reduce: ScatterAxisReduce, axis]: ScatterElements(axis, reduction add/none), the last
    write winning on duplicate targets with None (as on MLX's CPU; an index one long along
    the axis has none)."""
    a, idx, updates = ctx.inputs(rec)
    reduce_code, axis = rec.args
    reduction = SCATTER_AXIS_REDUCTIONS[int(reduce_code)]
    src, ispec, uspec = rec.inputs
    axis = int(axis) % src.rank
    if ispec.size == 0 or src.size == 0:
        return [ctx.op.Identity(a)]
    positions = index_int64(ctx, idx, ispec, src.shape[axis])
    updates = expand_to(ctx, updates, uspec.shape, ispec.shape)
    # one index per row along the axis (put_along_axis of a [.., 1] index) cannot write a
    # target twice: no last-writer search, and no fixed sizes needed for it
    if reduction == "none" and ispec.size > 1 and ispec.shape[axis] != 1:
        strides = np.cumprod([1] + list(src.shape[::-1])[:-1])[::-1].astype(np.int64)
        coords = np.indices(ispec.shape, dtype=np.int64)
        base = sum((coords[d] * strides[d] for d in range(src.rank) if d != axis), np.zeros(ispec.shape, np.int64))
        keys = ctx.op.Add(ctx.op.Mul(positions, ctx.scalar(int(strides[axis]), mx.int64)), ctx.const(base))
        updates = last_write_wins(ctx, keys, updates, ispec.shape, [], space=src.size)
    return [scatter_op(ctx, "ScatterElements", a, positions, updates, reduction, src.dtype, axis=axis)]


@handles("MaskedScatter")
def masked_scatter(ctx, rec):
    """inputs (a[B, ...], mask[B, ...], src[B, ...]) (ExpandDims adds a batch of 1 for x[mask] = v);
    arguments []: per batch row, the k-th True of the mask (row-major) takes src's k-th element.
    CumSum(mask) - 1 -> GatherElements(src) -> Where(mask, gathered, a)."""
    a, mask, source = ctx.inputs(rec)
    aspec, mspec, sspec = rec.inputs
    dtype = rec.outputs[0].dtype
    if aspec.size == 0 or sspec.size == 0:
        return [ctx.op.Identity(a)]
    rows = aspec.shape[0]
    width, count = aspec.size // rows, sspec.size // rows
    mask = expand_to(ctx, mask, mspec.shape, aspec.shape)
    flat_mask = ctx.reshape(mask, [rows, width])
    taken = ctx.op.CumSum(ctx.cast(flat_mask, mx.int64), ctx.scalar(1, mx.int64))
    taken = ctx.op.Sub(taken, ctx.scalar(1, mx.int64))
    taken = ctx.op.Min(ctx.op.Max(taken, ctx.scalar(0, mx.int64)), ctx.scalar(count - 1, mx.int64))
    gathered = ctx.op.GatherElements(ctx.reshape(source, [rows, count]), taken, axis=1)
    chosen = ctx.run("Where", [flat_mask, gathered, ctx.reshape(a, [rows, width])], dtype, fixed=(0,))
    return [ctx.reshape(chosen, aspec.shape)]
