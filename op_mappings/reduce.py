"""Reductions and scans: Reduce (all types), ArgReduce, Softmax, LogSumExp, Scan,
NumberOfElements.

MLX semantics these handlers keep (checked on MLX 0.32.4, CPU):

* ``Reduce`` may change the dtype (sum/prod of bool and small ints accumulate in int32 or
  uint32); integer sums and products wrap; Min/Max propagate NaN (ONNX ReduceMax skips it).
* ``ArgReduce`` returns the index of the first NaN when the row holds one, else the first
  index of the extreme value (ONNX ArgMax skips NaN).
* ``Scan`` accumulates sequentially in the output dtype: a float16 cumsum rounds at every
  step, so it is computed with an ONNX ``Scan`` loop that casts back after each step;
  float32/float64 and integer sums use ``CumSum`` (bit-exact, integers wrap after the cast
  back), products ``CumProd`` from opset 26. Cummax/cummin have no ONNX op and use the loop.
  MLX 0.32.4's float16/bfloat16 cummax/cummin step gives 0 where either operand is NaN
  (float32 propagates NaN); the loop reproduces that.
* ORT's integer ReduceSum/ReduceProd saturate on overflow; MLX wraps. 32-bit sums are
  taken in int64, 64-bit sums and all integer products pairwise with Add/Mul (which wrap).
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from mlx2onnx import dtypes
from mlx2onnx.capture.records import ArgReduceType, ReduceType, ScanType
from mlx2onnx.translate.registry import handles
from mlx2onnx.translate.rounding import NARROW, needs_rounding, round_to

from .order_keys import from_key, ordered_key

REDUCE_OPS = {
    ReduceType.Sum: "ReduceSum",
    ReduceType.Prod: "ReduceProd",
    ReduceType.Min: "ReduceMin",
    ReduceType.Max: "ReduceMax",
}
SCAN_STEP = {ScanType.Max: "Max", ScanType.Min: "Min", ScanType.Sum: "Add", ScanType.Prod: "Mul"}


def any_nan(ctx, x, axes, dtype):
    """Bool, keepdims: whether any element along ``axes`` is NaN."""
    return ctx.reduce_via("ReduceMax", ctx.isnan(x, dtype), axes, mx.bool_)


# -- Reduce -----------------------------------------------------------------------------
@handles("Reduce")
def reduce(ctx, rec):
    """inputs (x,); arguments [type: ReduceType, axes:list]; keepdims result. The output dtype can differ (sum(bool) -> int32, prod(uint8) -> uint32):
    cast first. Min/Max propagate NaN as in MLX (ONNX ReduceMax ignores it)."""
    (x,) = ctx.inputs(rec)
    kind, axes = rec.args
    axes = [int(a) for a in axes]
    out_dtype = rec.outputs[0].dtype
    in_dtype = rec.inputs[0].dtype
    if kind not in (ReduceType.And, ReduceType.Or) and kind not in REDUCE_OPS:
        raise ctx.fail(f"argument type={kind!r} is not a Reduce::ReduceType (0..5)")
    if kind in (ReduceType.And, ReduceType.Or):
        x = (
            x
            if in_dtype == mx.bool_
            else ctx.op.Not(ctx.run("Equal", [x, ctx.scalar(0, in_dtype)], in_dtype, out_dtype=mx.bool_))
        )
        in_dtype = mx.bool_
    x = ctx.cast(x, out_dtype if kind in (ReduceType.Sum, ReduceType.Prod) else in_dtype)
    if not axes:  # ONNX would reduce everything when axes is empty
        return [ctx.cast(ctx.op.Identity(x), out_dtype)]
    if kind in (ReduceType.And, ReduceType.Or):
        op = "ReduceMin" if kind == ReduceType.And else "ReduceMax"  # in uint8: ORT's bool kernel refuses empty axes
        return [ctx.cast(ctx.reduce(op, ctx.cast(x, mx.uint8), axes, keepdims=True), out_dtype)]
    op = REDUCE_OPS[kind]
    if kind in (ReduceType.Min, ReduceType.Max):
        key, key_dtype = ordered_key(ctx, x, out_dtype, op)
        result = from_key(ctx, ctx.reduce(op, key, axes, keepdims=True), key_dtype, out_dtype)
        if dtypes.is_float(out_dtype) and rec.inputs[0].size > 0:
            nan = ctx.scalar(math.nan, out_dtype)
            result = ctx.run("Where", [any_nan(ctx, x, axes, out_dtype), nan, result], out_dtype, fixed=(0,))
        return [result]
    if dtypes.is_integer(out_dtype) and rec.inputs[0].size == 0:  # the identity (ORT lacks e.g. uint32 ReduceProd)
        return [filled(ctx, 0 if kind == ReduceType.Sum else 1, out_dtype, rec.outputs[0].shape)]
    if dtypes.is_integer(out_dtype):
        # ORT's integer ReduceSum/ReduceProd saturate instead of wrapping: sum 32-bit values in
        # int64 and wrap when casting back; multiply (and sum 64-bit values) pairwise
        if kind == ReduceType.Sum and out_dtype not in (mx.int64, mx.uint64):
            return [ctx.cast(ctx.reduce(op, ctx.cast(x, mx.int64), axes, keepdims=True), out_dtype)]
        work = mx.int64 if out_dtype == mx.uint64 else out_dtype
        step = "Add" if kind == ReduceType.Sum else "Mul"
        total = tree_reduce(ctx, ctx.cast(x, work), list(rec.inputs[0].shape), axes, step, op)
        return [ctx.cast(total, out_dtype)]
    return [ctx.reduce_via(op, x, axes, out_dtype)]


def tree_reduce(ctx, x, shape, axes, step, op_type):
    """Reduce ``axes`` (keepdims) by combining halves with the elementwise ``step`` (Add,
    Mul), log2(n) rounds per axis: exact for wrapping integer arithmetic, where ORT's
    Reduce* kernels saturate. An empty axis falls back to ``op_type``."""
    for axis in axes:
        n = shape[axis]
        if n == 0:
            x = ctx.reduce(op_type, x, [axis], keepdims=True)
        while n > 1:
            half, odd = n // 2, n % 2
            x_lo = ctx.slice(x, [0], [half], [axis])
            x_hi = ctx.slice(x, [half], [2 * half], [axis])
            combined = ctx.op.__getattr__(step)(x_lo, x_hi)
            x = ctx.op.Concat(combined, ctx.slice(x, [2 * half], [n], [axis]), axis=axis) if odd else combined
            n = half + odd
        shape[axis] = 1
    return x


@handles("ArgReduce")
def arg_reduce(ctx, rec):
    """inputs (x,); arguments [type: ArgReduceType, axis]; uint32 keepdims result.
    Ties give the first index; a row holding NaN gives the index of its first NaN (MLX),
    which ONNX ArgMax/ArgMin would skip."""
    (x,) = ctx.inputs(rec)
    kind, axis = rec.args
    axis = int(axis)
    dtype = rec.inputs[0].dtype
    if kind not in (ArgReduceType.ArgMin, ArgReduceType.ArgMax):
        raise ctx.fail(f"argument type={kind!r} is not an ArgReduce::ReduceType (ArgMin=0, ArgMax=1)")
    op = "ArgMax" if kind == ArgReduceType.ArgMax else "ArgMin"
    key, _ = ordered_key(ctx, x, dtype, op)
    index = ctx.op.__getattr__(op)(key, axis=axis, keepdims=1, select_last_index=0)
    if dtypes.is_float(dtype):
        nan = ctx.cast(ctx.isnan(x, dtype), mx.uint8)
        first_nan = ctx.op.ArgMax(nan, axis=axis, keepdims=1, select_last_index=0)
        has_nan = ctx.cast(ctx.reduce("ReduceMax", nan, [axis], keepdims=True), mx.bool_)
        index = ctx.op.Where(has_nan, first_nan, index)
    return [ctx.cast(index, rec.outputs[0].dtype)]


# -- Softmax, LogSumExp -----------------------------------------------------------------
@handles("Softmax")
def softmax(ctx, rec):
    """inputs (x,); arguments [precise: bool]: Softmax over the last axis (float16 and
    bfloat16 are computed in float32 either way). A row holding +inf or only -inf is NaN,
    in MLX and in ONNX alike."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    return [ctx.run("Softmax", [x], dtype, axis=-1)]


@handles("LogSumExp")
def logsumexp(ctx, rec):
    """inputs (x,); arguments []: log(sum(exp(x))) over the last axis, keepdims; stable,
    -inf for an all -inf row, +inf when the row holds +inf and NaN when it holds NaN, as in
    MLX."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Exp", dtype)
    x = ctx.cast(x, work)
    peak = ctx.reduce("ReduceMax", x, [-1], keepdims=True)
    peak = ctx.op.Where(ctx.op.IsInf(peak), ctx.scalar(0, work), peak)
    total = ctx.reduce("ReduceSum", ctx.op.Exp(ctx.op.Sub(x, peak)), [-1], keepdims=True)
    return [ctx.cast(ctx.op.Add(ctx.op.Log(total), peak), dtype)]


# -- Scan -------------------------------------------------------------------------------
def scan_identity(kind, dtype):
    """The start value of an exclusive scan (what MLX puts first)."""
    if kind == ScanType.Sum:
        return 0
    if kind == ScanType.Prod:
        return 1
    if dtype == mx.bool_:
        return kind == ScanType.Min
    if dtypes.is_float(dtype):
        return -math.inf if kind == ScanType.Max else math.inf
    info = np.iinfo(dtypes.to_numpy(dtype))  # an integer dtype: carried as itself
    return info.min if kind == ScanType.Max else info.max


def filled(ctx, value, dtype, shape):
    """A tensor of ``shape`` holding ``value`` (Expand in a dtype ORT has it for)."""
    work = ctx.work_dtype("Expand", dtype)
    return ctx.cast(ctx.op.Expand(ctx.scalar(value, work), ctx.ints(list(shape))), dtype)


def sequential_scan(ctx, x, dtype, shape, kind, axis, reverse, inclusive):
    """MLX's scan loop, step by step, as an ONNX ``Scan``: state = step(state, x[i]) in
    ``dtype`` (each step computed in a dtype ORT has a kernel for, then cast back, which
    rounds or wraps exactly like MLX: float32 holds float16/bfloat16 sums and products
    correctly rounded). An inclusive scan starts from the first element itself, an
    exclusive one from the identity, as MLX does."""
    n = shape[axis]
    if inclusive and n > 1:  # peel the first element (the last when reversed): it is the start
        edge, rest = ([n - 1, n], [0, n - 1]) if reverse else ([0, 1], [1, n])
        first = ctx.slice(x, [edge[0]], [edge[1]], [axis])
        rest_shape = list(shape)
        rest_shape[axis] = n - 1
        tail = run_scan(
            ctx,
            ctx.slice(x, [rest[0]], [rest[1]], [axis]),
            dtype,
            rest_shape,
            kind,
            axis,
            reverse,
            True,
            ctx.squeeze(first, [axis]),
        )
        return ctx.op.Concat(tail, first, axis=axis) if reverse else ctx.op.Concat(first, tail, axis=axis)
    if inclusive:
        return ctx.op.Identity(x)
    state_shape = [d for k, d in enumerate(shape) if k != axis]
    start = filled(ctx, scan_identity(kind, dtype), dtype, state_shape)
    return run_scan(ctx, x, dtype, shape, kind, axis, reverse, False, start)


class _BodyOps:
    """``op.Name(*inputs, **attributes)`` for a subgraph's node list (see translate.rounding)."""

    def __init__(self, node):
        self._node = node

    def __getattr__(self, op_type):
        return lambda *inputs, **attributes: self._node(op_type, list(inputs), **attributes)


def run_scan(ctx, x, dtype, shape, kind, axis, reverse, inclusive, start):
    """One ONNX ``Scan`` over ``axis`` of ``x`` from the state ``start``."""
    step = SCAN_STEP[kind]
    work = ctx.work_dtype(step, dtype)
    state_shape = [d for k, d in enumerate(shape) if k != axis]
    onnx_type = ir.TensorType(ctx.onnx_type(dtype))
    prefix = ctx.fresh("scan_body")
    state_in = ir.Value(name=f"{prefix}/state", shape=ir.Shape(state_shape), type=onnx_type)
    elem_in = ir.Value(name=f"{prefix}/x", shape=ir.Shape(state_shape), type=onnx_type)
    nodes = []

    def node(op_type, inputs, **attrs):
        made = ir.Node(
            "",
            op_type,
            inputs,
            attributes=ir.convenience.convert_attributes(attrs),
            num_outputs=1,
            name=f"{prefix}/{op_type}_{len(nodes)}",
        )
        made.outputs[0].name = f"{prefix}/{op_type}_{len(nodes)}"
        nodes.append(made)
        return made.outputs[0]

    def cast(value, target):
        return node("Cast", [value], to=ctx.onnx_type(target))

    a, b = (state_in, elem_in) if work == dtype else (cast(state_in, work), cast(elem_in, work))
    new = node(step, [a, b])
    if step in ("Max", "Min") and dtype in NARROW:
        # MLX 0.32.4's float16/bfloat16 cummax/cummin give 0 (not NaN) where either operand is NaN
        either = node("Or", [node("IsNaN", [a]), node("IsNaN", [b])])
        zero = node("Cast", [node("Constant", [], value_int=0)], to=ctx.onnx_type(work))
        new = node("Where", [either, zero, new])
    if needs_rounding(ctx, dtype):  # carried wider: round each step
        new = round_to(ctx, new, dtype, op=_BodyOps(node))
    elif work != dtype:
        new = cast(new, dtype)
    new.type, new.shape = onnx_type, ir.Shape(state_shape)
    out = node("Identity", [new if inclusive else state_in])
    out.type, out.shape = onnx_type, ir.Shape(state_shape)
    body = ir.Graph([state_in, elem_in], [new, out], nodes=nodes, name=prefix)
    direction = [int(bool(reverse))]
    _, result = ctx.op.Scan(
        start,
        x,
        _outputs=2,
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[axis],
        scan_output_axes=[axis],
        scan_input_directions=direction,
        scan_output_directions=direction,
    )
    result.type = onnx_type
    return result


@handles("Scan")
def scan(ctx, rec):
    """inputs (x,); arguments [type: ScanType, axis, reverse, inclusive] (LogAddExp never
    reaches the callback). Sequential, in the output dtype
    (cumsum(bool) -> int32; cumsum(int8) stays int8 and wraps)."""
    (x,) = ctx.inputs(rec)
    kind, axis, reverse, inclusive = rec.args
    axis, reverse, inclusive = int(axis), bool(reverse), bool(inclusive)
    dtype = rec.outputs[0].dtype
    shape = rec.inputs[0].shape
    if kind not in SCAN_STEP:
        raise ctx.fail(f"argument type={kind!r} is not supported: Scan types Max=0, Min=1, Sum=2, Prod=3")
    x = ctx.cast(x, dtype)
    if rec.inputs[0].size == 0:  # (ORT's Scan loop crashes on empty input)
        return [ctx.op.Identity(x)]
    native = {ScanType.Sum: "CumSum", ScanType.Prod: "CumProd"}.get(kind)
    if native == "CumProd" and not ctx.has("CumProd"):
        native = None
    if native is not None and (dtype in (mx.float32, mx.float64) or not dtypes.is_float(dtype)):
        # float32/float64 CumSum/CumProd are sequential like MLX's loop (bit-exact); integer
        # results wrap exactly when cast back from the wider type (uint64: the int64 view)
        work = mx.int64 if dtype == mx.uint64 else ctx.work_dtype(native, dtype)
        if ctx.has_kernel(native, work):
            total = ctx.op.__getattr__(native)(
                ctx.cast(x, work), ctx.ints(axis), exclusive=int(not inclusive), reverse=int(reverse)
            )
            return [ctx.cast(total, dtype)]
    return [sequential_scan(ctx, x, dtype, shape, kind, axis, reverse, inclusive)]


# -- NumberOfElements -------------------------------------------------------------------
@handles("NumberOfElements")
def number_of_elements(ctx, rec):
    """inputs (x,); arguments [axes:list, inverted: bool, dtype]: the 0-d product of
    x.shape[axes] (1 / that when inverted) in ``dtype``; only in shapeless exports, so it
    is read from the runtime shape (computed in float64, then cast, as MLX does)."""
    (x,) = ctx.inputs(rec)
    axes, inverted, dtype = rec.args
    count = ctx.reduce(
        "ReduceProd", ctx.op.Gather(ctx.op.Shape(x), ctx.ints([int(a) for a in axes])), [0], keepdims=False
    )
    if not inverted:
        return [ctx.cast(count, dtype)]
    if not dtypes.is_float(dtype):
        raise ctx.fail(
            f"argument dtype={dtypes.name(dtype)} with inverted=True is not supported: 1/n needs a float dtype"
        )
    return [ctx.cast(ctx.op.Reciprocal(ctx.cast(count, mx.float64)), dtype)]
