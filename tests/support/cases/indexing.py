"""Parity cases: Slice, Gather, GatherAxis, Scatter, ScatterAxis, SliceUpdate,
DynamicSlice, DynamicSliceUpdate, MaskedScatter.

Index arrays are random and valid (negative ones included for signed dtypes), drawn
from small ranges so duplicates are common; NaN/inf edges are planted into the data only.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from mlx2onnx import dtypes
from tests.support.harness import FLOATS, Case, rand, with_edges

DATA = FLOATS + (mx.int32, mx.int64, mx.int8, mx.uint8, mx.uint32, mx.bool_)
NUMERIC = FLOATS + (mx.int32, mx.int64, mx.int8, mx.uint8, mx.int16)
SIGNED_NUM = FLOATS + (mx.int32, mx.int8, mx.int64)
INT_LIKE = (mx.int32, mx.int64, mx.int8, mx.uint8, mx.int16, mx.uint32, mx.bool_)


def idx(rng, shape, dim, dtype=mx.int32, negative=True):
    """Random valid indices into an axis of size ``dim`` (negative ones too when signed)."""
    lo = -dim if negative and dtype in dtypes.SIGNED else 0
    return mx.array(rng.integers(lo, dim, size=tuple(shape)).astype(dtypes.to_numpy(dtype)))


def data(rng, shape, dt, edges=False):
    x = rand(rng, shape, dt, -20, 20)
    return with_edges(rng, x) if edges else x


def setitem(key_fn):
    """``lambda x, *k, u: x[key_fn(*k)] = u; return x``"""

    def fn(x, *rest):
        *keys, u = rest
        x[key_fn(*keys)] = u
        return x

    return fn


# -- Slice --------------------------------------------------------------------------------
CASES = [
    Case("indexing.slice_basic", lambda x: x[1:3, ::2], lambda r, dt: (data(r, (4, 5), dt),), dtypes=DATA, primitives=("Slice",)),
    Case("indexing.slice_reverse", lambda x: x[::-1, 3:0:-2], lambda r, dt: (data(r, (4, 5), dt),), dtypes=(mx.float32, mx.int32), primitives=("Slice",)),
    Case("indexing.slice_negative_stop", lambda x: x[:-1, -3:-1], lambda r, dt: (data(r, (4, 5), dt),), primitives=("Slice",)),
    Case("indexing.slice_empty", lambda x: x[2:2] + 1, lambda r, dt: (data(r, (4, 5), dt),), dtypes=(mx.float32, mx.int32), primitives=("Slice",)),
    Case("indexing.slice_int_inside", lambda x: x[None, :, 2], lambda r, dt: (data(r, (3, 4), dt),), primitives=("Slice",)),
]

# -- Gather -------------------------------------------------------------------------------
CASES += [
    Case("indexing.take_axis0", lambda x, i: mx.take(x, i, axis=0), lambda r, dt: (data(r, (5, 4), dt), idx(r, (3,), 5)),
         dtypes=DATA, primitives=("Gather",), onnx_ops=("Gather",)),
    Case("indexing.take_axis1", lambda x, i: mx.take(x, i, axis=1), lambda r, dt: (data(r, (3, 6, 2), dt), idx(r, (2, 4), 6)),
         dtypes=DATA, primitives=("Gather",)),
    Case("indexing.take_last_axis_2d_idx", lambda x, i: mx.take(x, i, axis=-1), lambda r, dt: (data(r, (2, 3, 5), dt), idx(r, (4, 2), 5)),
         dtypes=(mx.float32, mx.float16, mx.int8), primitives=("Gather",)),
    Case("indexing.take_flat", lambda x, i: mx.take(x, i), lambda r, dt: (data(r, (3, 4), dt), idx(r, (7,), 12)),
         dtypes=(mx.float32, mx.bfloat16, mx.int32), primitives=("Gather",)),
    Case("indexing.take_0d_array", lambda x, i: mx.take(x, i, axis=1), lambda r, dt: (data(r, (3, 4), dt), idx(r, (), 4)),
         dtypes=(mx.float32, mx.int32), primitives=("Gather",)),
    Case("indexing.getitem_last", lambda x: x[-1], lambda r, dt: (data(r, (3, 4), dt),), dtypes=DATA, primitives=("Gather",)),
    Case("indexing.getitem_int", lambda x: x[1] * 2, lambda r, dt: (data(r, (3, 4, 2), dt),), dtypes=(mx.float32, mx.int32), primitives=("Gather",)),
    Case("indexing.getitem_array_slice", lambda x, i: x[i, 1:3], lambda r, dt: (data(r, (5, 4), dt), idx(r, (3,), 5)),
         dtypes=(mx.float32, mx.float16), primitives=("Gather",)),
    Case("indexing.getitem_cols", lambda x, i: x[:, i], lambda r, dt: (data(r, (3, 5), dt), idx(r, (4,), 5)),
         dtypes=DATA, primitives=("Gather",), onnx_ops=("GatherND",)),
    Case("indexing.getitem_pairs", lambda x, i, j: x[i, j], lambda r, dt: (data(r, (4, 5), dt), idx(r, (6,), 4), idx(r, (6,), 5)),
         dtypes=DATA, primitives=("Gather",), onnx_ops=("GatherND",)),
    Case("indexing.getitem_split_axes", lambda x, i, j: x[i, :, j], lambda r, dt: (data(r, (2, 3, 4), dt), idx(r, (2,), 2), idx(r, (2,), 4)),
         dtypes=(mx.float32, mx.int32), primitives=("Gather",)),
    Case("indexing.getitem_ellipsis_2d", lambda x, i: x[..., i], lambda r, dt: (data(r, (2, 3, 4), dt), idx(r, (2, 2), 4)),
         dtypes=(mx.float32, mx.bfloat16), primitives=("Gather",)),
    Case("indexing.getitem_broadcast", lambda x, i, j: x[i[:, None], j], lambda r, dt: (data(r, (4, 5), dt), idx(r, (3,), 4), idx(r, (2,), 5)),
         dtypes=(mx.float32, mx.int8), primitives=("Gather",)),
    Case("indexing.getitem_none_between", lambda x, i, j: x[i, None, j], lambda r, dt: (data(r, (3, 4, 2), dt), idx(r, (5,), 3), idx(r, (5,), 4)),
         primitives=("Gather",)),
    Case("indexing.embedding_tokens", lambda w, t: w[t], lambda r, dt: (data(r, (10, 4), dt), idx(r, (2, 3), 10, negative=False)),
         dtypes=FLOATS, primitives=("Gather",)),
    Case("indexing.embedding_no_tokens", lambda w, t: w[t], lambda r, dt: (data(r, (10, 4), dt), idx(r, (1, 0), 10)),
         dtypes=(mx.float32, mx.float16), primitives=("Gather",)),
    Case("indexing.take_empty", lambda x, i: x[i], lambda r, dt: (data(r, (3, 4), dt), idx(r, (0,), 3)),
         dtypes=(mx.float32, mx.int32), primitives=("Gather",)),
    Case("indexing.diagonal", lambda x: mx.diagonal(x), lambda r, dt: (data(r, (4, 4), dt),), dtypes=(mx.float32, mx.int32), primitives=("Gather",)),
]

_EMBED = nn.Embedding(10, 6)
mx.eval(_EMBED.parameters())
CASES += [Case("indexing.nn_embedding", _EMBED, lambda r, dt: (idx(r, (2, 5), 10, negative=False),), primitives=("Gather",))]

INDEX_DTYPES = (mx.uint32, mx.int64, mx.int8, mx.uint8, mx.int16, mx.uint16)
CASES += [
    Case(f"indexing.take_index_{dtypes.name(it)}", (lambda x, i: x[i]), (lambda it: lambda r, dt: (data(r, (6, 3), dt), idx(r, (5,), 6, it)))(it),
         dtypes=(mx.float32, mx.float16), primitives=("Gather",))
    for it in INDEX_DTYPES
]
CASES += [
    Case(f"indexing.take_along_index_{dtypes.name(it)}", (lambda x, i: mx.take_along_axis(x, i, axis=1)),
         (lambda it: lambda r, dt: (data(r, (3, 6), dt), idx(r, (3, 4), 6, it)))(it), primitives=("GatherAxis",))
    for it in (mx.uint32, mx.int64, mx.int8)
]

# -- GatherAxis ---------------------------------------------------------------------------
CASES += [
    Case("indexing.take_along_axis1", lambda x, i: mx.take_along_axis(x, i, axis=1), lambda r, dt: (data(r, (3, 5), dt), idx(r, (3, 4), 5)),
         dtypes=DATA, primitives=("GatherAxis",), onnx_ops=("GatherElements",)),
    Case("indexing.take_along_axis0_3d", lambda x, i: mx.take_along_axis(x, i, axis=0), lambda r, dt: (data(r, (4, 2, 3), dt), idx(r, (6, 2, 3), 4)),
         dtypes=(mx.float32, mx.bfloat16, mx.int32), primitives=("GatherAxis",)),
    Case("indexing.take_along_broadcast", lambda x, i: mx.take_along_axis(x, i, axis=-1), lambda r, dt: (data(r, (2, 3, 5), dt), idx(r, (1, 3, 2), 5)),
         dtypes=(mx.float32, mx.int32), primitives=("GatherAxis",)),
    Case("indexing.take_along_empty", lambda x, i: mx.take_along_axis(x, i, axis=1), lambda r, dt: (data(r, (3, 5), dt), idx(r, (3, 0), 5)),
         primitives=("GatherAxis",)),
]

# -- Scatter ------------------------------------------------------------------------------
def rows_update(shape, n_idx, negative=True, edges=False, it=mx.int32, lo=-20, hi=20):
    def make(r, dt):
        x = data(r, shape, dt, edges)
        u = rand(r, (n_idx,) + tuple(shape[1:]), dt, lo, hi)
        return x, idx(r, (n_idx,), shape[0], it, negative), with_edges(r, u) if edges else u

    return make


AT_REDUCTIONS = [
    ("add", lambda x, i, u: x.at[i].add(u), NUMERIC + (mx.bool_,), (28, 17)),
    ("subtract", lambda x, i, u: x.at[i].subtract(u), SIGNED_NUM, (28, 17)),
    ("multiply", lambda x, i, u: x.at[i].multiply(u), NUMERIC + (mx.bool_,), (28, 17)),
    ("divide", lambda x, i, u: x.at[i].divide(u), FLOATS, (28, 17)),
    ("maximum", lambda x, i, u: x.at[i].maximum(u), FLOATS, (28,)),
    ("minimum", lambda x, i, u: x.at[i].minimum(u), FLOATS, (28,)),
    # integers at opset 17: emulated through TopK + Unique (ScatterND max/min is opset 18)
    ("maximum_int", lambda x, i, u: x.at[i].maximum(u), INT_LIKE, (28, 17)),
    ("minimum_int", lambda x, i, u: x.at[i].minimum(u), INT_LIKE, (28, 17)),
]

CASES += [
    Case("indexing.setitem_rows", setitem(lambda i: i), rows_update((4, 3), 6), dtypes=DATA, primitives=("Scatter",), onnx_ops=("ScatterND",)),
    Case("indexing.setitem_rows_edges", setitem(lambda i: i), rows_update((3, 5), 7, edges=True), dtypes=FLOATS, primitives=("Scatter",)),
    Case("indexing.setitem_scalar", lambda x, i: setitem(lambda i: i)(x, i, mx.array(7, x.dtype)),
         lambda r, dt: (data(r, (5, 2), dt), idx(r, (3,), 5)), dtypes=(mx.float32, mx.int32, mx.bool_), primitives=("Scatter",)),
    Case("indexing.setitem_cols", setitem(lambda i: (slice(None), i)),
         lambda r, dt: (data(r, (3, 5), dt), idx(r, (4,), 5), data(r, (3, 4), dt)), dtypes=DATA, primitives=("Scatter",)),
    Case("indexing.setitem_pairs", setitem(lambda i, j: (i, j)),
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (8,), 3), idx(r, (8,), 4), data(r, (8,), dt)), dtypes=(mx.float32, mx.float16, mx.int32),
         primitives=("Scatter",)),
    Case("indexing.setitem_array_slice", setitem(lambda i: (i, slice(1, 3))),
         lambda r, dt: (data(r, (4, 5), dt), idx(r, (3,), 4), data(r, (3, 2), dt)), dtypes=(mx.float32, mx.int8), primitives=("Scatter",)),
    Case("indexing.setitem_middle_axis", setitem(lambda i: (slice(None), i)),
         lambda r, dt: (data(r, (2, 5, 3), dt), idx(r, (4,), 5), data(r, (2, 4, 3), dt)), dtypes=(mx.float32, mx.bfloat16), primitives=("Scatter",)),
    Case("indexing.setitem_empty", setitem(lambda i: i),
         lambda r, dt: (data(r, (4, 3), dt), idx(r, (0,), 4), data(r, (0, 3), dt)), primitives=("Scatter",)),
    Case("indexing.eye_plus", lambda x: x + mx.eye(4, dtype=x.dtype), lambda r, dt: (data(r, (4, 4), dt),), dtypes=(mx.float32, mx.int32),
         primitives=("Scatter",)),
    Case("indexing.grad_take", lambda x, i, w: mx.vjp(lambda x: mx.take(x, i, axis=0), [x], [w])[1][0],
         lambda r, dt: (data(r, (4, 3), dt), idx(r, (6,), 4), data(r, (6, 3), dt)), dtypes=FLOATS, primitives=("Scatter",)),
]
CASES += [
    Case(f"indexing.at_{name}", fn, rows_update((4, 3), 7, it=it, lo=lo, hi=hi), dtypes=dts, primitives=("Scatter",), opsets=opsets)
    for name, fn, dts, opsets in AT_REDUCTIONS
    for it, lo, hi in [(mx.int32, 1, 3 if name in ("multiply", "divide") else 20)]
]
CASES += [
    Case("indexing.at_add_wraps", AT_REDUCTIONS[0][1], rows_update((3, 4), 12, lo=-128, hi=127), dtypes=(mx.int8, mx.uint8, mx.int16), primitives=("Scatter",)),
    Case("indexing.at_add_edges", AT_REDUCTIONS[0][1], rows_update((3, 4), 8, edges=True), dtypes=FLOATS, primitives=("Scatter",)),
    Case("indexing.at_maximum_edges", AT_REDUCTIONS[4][1], rows_update((3, 4), 9, edges=True), dtypes=FLOATS, primitives=("Scatter",), opsets=(28,)),
    Case("indexing.at_minimum_edges", AT_REDUCTIONS[5][1], rows_update((3, 4), 9, edges=True), dtypes=FLOATS, primitives=("Scatter",), opsets=(28,)),
    Case("indexing.at_maximum_int_edges", AT_REDUCTIONS[6][1], rows_update((3, 4), 9, edges=True), dtypes=(mx.int32, mx.int8, mx.uint8, mx.int64), primitives=("Scatter",)),
    Case("indexing.at_minimum_int_edges", AT_REDUCTIONS[7][1], rows_update((3, 4), 9, edges=True), dtypes=(mx.int32, mx.int8, mx.uint32, mx.int64), primitives=("Scatter",)),
    Case("indexing.at_pairs_maximum_int", lambda x, i, j, u: x.at[i, j].maximum(u),
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (9,), 3), idx(r, (9,), 4), data(r, (9,), dt)), dtypes=(mx.int32, mx.uint8), primitives=("Scatter",)),
    Case("indexing.at_block_minimum_int", lambda x, i, u: x.at[i, 1:3].minimum(u),
         lambda r, dt: (data(r, (4, 5), dt), idx(r, (6,), 4), data(r, (6, 2), dt)), dtypes=(mx.int32, mx.int16), primitives=("Scatter",)),
    Case("indexing.at_pairs_add", lambda x, i, j, u: x.at[i, j].add(u),
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (9,), 3), idx(r, (9,), 4), data(r, (9,), dt)), dtypes=(mx.float32, mx.int32), primitives=("Scatter",)),
    Case("indexing.at_cols_maximum", lambda x, i, u: x.at[:, i].maximum(u),
         lambda r, dt: (data(r, (3, 5), dt, True), idx(r, (6,), 5), data(r, (3, 6), dt, True)), dtypes=(mx.float32, mx.float16), primitives=("Scatter",), opsets=(28,)),
]
CASES += [
    Case("indexing.setitem_broadcast_indices", setitem(lambda i, j: (i[:, None], j)),
         lambda r, dt: (data(r, (4, 5), dt), idx(r, (3,), 4), idx(r, (2,), 5), data(r, (3, 2), dt)), dtypes=(mx.float32, mx.int32), primitives=("Scatter",)),
    Case("indexing.at_broadcast_add", lambda x, i, j, u: x.at[i[:, None], j].add(u),
         lambda r, dt: (data(r, (4, 5), dt), idx(r, (3,), 4), idx(r, (2,), 5), data(r, (3, 2), dt)), dtypes=(mx.float32, mx.float16, mx.int32), primitives=("Scatter",)),
    Case("indexing.setitem_ellipsis", setitem(lambda i: (Ellipsis, i)),
         lambda r, dt: (data(r, (2, 3, 4), dt), idx(r, (2,), 4), data(r, (2, 3, 2), dt)), dtypes=(mx.float32, mx.uint8), primitives=("Scatter",)),
    Case("indexing.at_uint32_maximum_1d", lambda x, i, u: x.at[i].maximum(u),
         lambda r, dt: (rand(r, (5,), dt, 0, 9), idx(r, (8,), 5), rand(r, (8,), dt, 0, 9)), dtypes=(mx.uint32, mx.int64), primitives=("Scatter",)),
]
CASES += [
    Case(f"indexing.setitem_index_{dtypes.name(it)}", setitem(lambda i: i), rows_update((5, 2), 6, it=it), dtypes=(mx.float32,), primitives=("Scatter",))
    for it in INDEX_DTYPES
]

# -- ScatterAxis --------------------------------------------------------------------------
CASES += [
    Case("indexing.put_along_axis0", lambda x, i, u: mx.put_along_axis(x, i, u, axis=0),
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (5, 4), 3), data(r, (5, 4), dt)), dtypes=DATA, primitives=("ScatterAxis",), onnx_ops=("ScatterElements",)),
    Case("indexing.put_along_axis_last_3d", lambda x, i, u: mx.put_along_axis(x, i, u, axis=-1),
         lambda r, dt: (data(r, (2, 3, 4), dt), idx(r, (2, 3, 6), 4), data(r, (2, 3, 6), dt)), dtypes=(mx.float32, mx.float16, mx.int8), primitives=("ScatterAxis",)),
    Case("indexing.put_along_axis_one_per_row", lambda x, i, u: mx.put_along_axis(x, i, u, axis=-1),
         lambda r, dt: (data(r, (2, 5, 4), dt), idx(r, (2, 5, 1), 4), data(r, (2, 5, 1), dt)), dtypes=DATA,
         primitives=("ScatterAxis",), onnx_ops=("ScatterElements",)),
    Case("indexing.put_along_scalar", lambda x, i: mx.put_along_axis(x, i, mx.array(5, x.dtype), axis=1),
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (3, 2), 4, mx.uint32)), dtypes=(mx.float32, mx.int32), primitives=("ScatterAxis",)),
    Case("indexing.grad_take_along_axis", lambda x, i, w: mx.vjp(lambda x: mx.take_along_axis(x, i, axis=1), [x], [w])[1][0],
         lambda r, dt: (data(r, (3, 4), dt), idx(r, (3, 6), 4), data(r, (3, 6), dt, True)), dtypes=FLOATS, primitives=("ScatterAxis",)),
]

# -- SliceUpdate --------------------------------------------------------------------------
def slice_inputs(shape, update_shape, edges=False, lo=-20, hi=20):
    def make(r, dt):
        u = rand(r, update_shape, dt, lo, hi)
        return data(r, shape, dt, edges), (with_edges(r, u) if edges else u)

    return make


KV = (slice(None), slice(None), slice(2, 4))
CASES += [
    Case("indexing.slice_set_rows", setitem(lambda: slice(1, 3)), slice_inputs((4, 3), (2, 3)), dtypes=DATA, primitives=("SliceUpdate",), onnx_ops=("Concat",)),
    Case("indexing.slice_set_block", setitem(lambda: (slice(1, 3), slice(2, 4))), slice_inputs((4, 5), (2, 2)), dtypes=(mx.float32, mx.bfloat16, mx.int8), primitives=("SliceUpdate",)),
    Case("indexing.slice_set_strided", setitem(lambda: (slice(1, 3), slice(None, None, 2))), slice_inputs((3, 4), (2, 2)), dtypes=DATA,
         primitives=("SliceUpdate",), onnx_ops=("ScatterND",)),
    Case("indexing.slice_set_reverse", setitem(lambda: slice(None, None, -1)), slice_inputs((4,), (4,)), dtypes=(mx.float32, mx.int32), primitives=("SliceUpdate",)),
    Case("indexing.slice_set_reverse_part", setitem(lambda: (slice(3, 1, -1), slice(None, None, 2))), slice_inputs((5, 4), (2, 2)), dtypes=(mx.float32, mx.uint8), primitives=("SliceUpdate",)),
    Case("indexing.slice_set_negative_stop", setitem(lambda: (slice(None, -1), slice(-3, -1))), slice_inputs((4, 5), (3, 2)), primitives=("SliceUpdate",)),
    Case("indexing.slice_set_negative_step2", setitem(lambda: slice(None, None, -2)), slice_inputs((5, 2), (3, 2)), dtypes=(mx.float32, mx.float16), primitives=("SliceUpdate",)),
    Case("indexing.slice_set_int", lambda x: setitem(lambda: 0)(x, mx.array(0, x.dtype)), lambda r, dt: (data(r, (3, 4), dt),), dtypes=DATA, primitives=("SliceUpdate",)),
    Case("indexing.slice_set_kv_cache", setitem(lambda: KV), slice_inputs((1, 2, 6, 3), (1, 2, 2, 3)), dtypes=FLOATS, primitives=("SliceUpdate",)),
    Case("indexing.slice_set_empty", setitem(lambda: slice(2, 2)), slice_inputs((4, 3), (0, 3)), dtypes=(mx.float32, mx.int32), primitives=("SliceUpdate",)),
    Case("indexing.slice_add", lambda x, u: x.at[1:3].add(u), slice_inputs((4, 3), (2, 3)), dtypes=NUMERIC + (mx.bool_,), primitives=("SliceUpdate",)),
    Case("indexing.slice_add_strided", lambda x, u: x.at[::2, 1:].add(u), slice_inputs((5, 3), (3, 2)), dtypes=(mx.float32, mx.int8), primitives=("SliceUpdate",)),
    Case("indexing.slice_subtract", lambda x, u: x.at[:, 1:3].subtract(u), slice_inputs((3, 4), (3, 2)), dtypes=SIGNED_NUM, primitives=("SliceUpdate",)),
    Case("indexing.slice_multiply", lambda x, u: x.at[1:3].multiply(u), slice_inputs((4, 3), (2, 3), lo=-3, hi=3), dtypes=NUMERIC, primitives=("SliceUpdate",)),
    Case("indexing.slice_divide", lambda x, u: x.at[::-1].divide(u), slice_inputs((4, 3), (4, 3), lo=1, hi=3), dtypes=FLOATS, primitives=("SliceUpdate",)),
    Case("indexing.slice_maximum", lambda x, u: x.at[1:4, ::2].maximum(u), slice_inputs((4, 5), (3, 3), edges=True), dtypes=FLOATS + (mx.int32, mx.uint8),
         primitives=("SliceUpdate",)),
    Case("indexing.slice_minimum", lambda x, u: x.at[:-1].minimum(u), slice_inputs((4, 3), (3, 3), edges=True), dtypes=FLOATS + (mx.int32, mx.int8),
         primitives=("SliceUpdate",)),
    Case("indexing.slice_add_edges", lambda x, u: x.at[1:].add(u), slice_inputs((3, 4), (2, 4), edges=True), dtypes=FLOATS + (mx.int32,), primitives=("SliceUpdate",)),
]

# -- DynamicSlice / DynamicSliceUpdate ----------------------------------------------------
def start(r, highs, dtype=mx.int32):
    return mx.array(np.array([r.integers(0, h + 1) for h in highs]).astype(dtypes.to_numpy(dtype)))


CASES += [
    Case("indexing.dynamic_slice", lambda x, s: mx.slice(x, s, [0, 1], (2, 2)), lambda r, dt: (data(r, (3, 4), dt), start(r, (1, 2))),
         dtypes=DATA, primitives=("DynamicSlice",), onnx_ops=("Slice",)),
    Case("indexing.dynamic_slice_one_axis", lambda x, s: mx.slice(x, s, [1], (2, 3, 3)), lambda r, dt: (data(r, (2, 5, 3), dt), start(r, (2,), mx.uint32)),
         dtypes=(mx.float32, mx.float16), primitives=("DynamicSlice",)),
    Case("indexing.dynamic_slice_0d_start", lambda x, s: mx.slice(x, s, [0], (2, 4)), lambda r, dt: (data(r, (3, 4), dt), mx.array(int(r.integers(0, 2)))),
         dtypes=(mx.float32, mx.int32), primitives=("DynamicSlice",)),
    Case("indexing.dynamic_slice_int64_start", lambda x, s: mx.slice(x, s, [0], (1, 4)), lambda r, dt: (data(r, (3, 4), dt), start(r, (2,), mx.int64)),
         dtypes=(mx.float32,), primitives=("DynamicSlice",)),
    Case("indexing.dynamic_slice_update", lambda x, u, s: mx.slice_update(x, u, s, [0, 1]),
         lambda r, dt: (data(r, (3, 4), dt), data(r, (2, 2), dt), start(r, (1, 2))), dtypes=DATA, primitives=("DynamicSliceUpdate",), onnx_ops=("ScatterND",)),
    Case("indexing.dynamic_kv_cache_write", lambda c, u, s: mx.slice_update(c, u, s, [2]),
         lambda r, dt: (data(r, (1, 2, 6, 3), dt), data(r, (1, 2, 1, 3), dt), start(r, (5,), mx.uint32)), dtypes=FLOATS, primitives=("DynamicSliceUpdate",)),
    Case("indexing.dynamic_slice_empty", lambda x, s: mx.slice(x, s, [1], (3, 0)) + 1, lambda r, dt: (data(r, (3, 4), dt), start(r, (4,))),
         dtypes=(mx.float32, mx.int32), primitives=("DynamicSlice",)),
    Case("indexing.dynamic_slice_update_empty", lambda x, u, s: mx.slice_update(x, u, s, [0]),
         lambda r, dt: (data(r, (3, 4), dt), data(r, (0, 4), dt), start(r, (3,))), dtypes=(mx.float32, mx.int32), primitives=("DynamicSliceUpdate",)),
    Case("indexing.dynamic_slice_update_broadcast", lambda x, u, s: mx.slice_update(x, u, s, [1]),
         lambda r, dt: (data(r, (3, 5), dt), data(r, (2,), dt), start(r, (3,))), dtypes=(mx.float32, mx.int8), primitives=("DynamicSliceUpdate",)),
]

# -- MaskedScatter ------------------------------------------------------------------------
def mask_inputs(shape, mask_shape=None, values=None):
    def make(r, dt):
        m = mx.array(r.random(mask_shape or shape) < 0.5)
        return data(r, shape, dt), m, data(r, values or (int(np.prod(shape)),), dt)

    return make


CASES += [
    Case("indexing.masked_set", setitem(lambda m: m), mask_inputs((3, 4)), dtypes=DATA, primitives=("MaskedScatter",), onnx_ops=("CumSum", "GatherElements")),
    Case("indexing.masked_set_rows", setitem(lambda m: m), mask_inputs((3, 4), (3,), (3, 4)), dtypes=(mx.float32, mx.int8), primitives=("MaskedScatter",)),
    Case("indexing.masked_set_3d", setitem(lambda m: m), mask_inputs((2, 3, 2)), dtypes=(mx.float32, mx.bfloat16, mx.int32), primitives=("MaskedScatter",)),
    Case("indexing.masked_set_scalar", lambda x, m: setitem(lambda m: m)(x, m, mx.array(3, x.dtype)),
         lambda r, dt: mask_inputs((4, 3))(r, dt)[:2], dtypes=(mx.float32, mx.int32, mx.bool_), primitives=("MaskedScatter",)),
    Case("indexing.masked_set_batched", mx.vmap(setitem(lambda m: m)), mask_inputs((3, 2, 3), values=(3, 6)), dtypes=(mx.float32, mx.int32),
         primitives=("MaskedScatter",)),
]
