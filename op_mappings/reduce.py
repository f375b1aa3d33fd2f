"""Reductions: Reduce (all types), Softmax, LogSumExp."""

from __future__ import annotations

import math

import mlx.core as mx

from mlx2onnx import dtypes
from mlx2onnx.registry import handles

# Reduce::ReduceType
AND, OR, SUM, PROD, MIN, MAX = range(6)
REDUCE_OPS = {SUM: "ReduceSum", PROD: "ReduceProd", MIN: "ReduceMin", MAX: "ReduceMax"}


def any_nan(ctx, x, axes, dtype):
    """Bool, keepdims: whether any element along ``axes`` is NaN."""
    return ctx.reduce_via("ReduceMax", ctx.isnan(x, dtype), axes, mx.bool_)


@handles("Reduce")
def reduce(ctx, rec):
    """inputs (x,); arguments [type, axes:list] with And=0, Or=1, Sum=2, Prod=3, Min=4, Max=5;
    keepdims result. The output dtype can differ (sum(bool) -> int32): cast first. Min/Max
    propagate NaN as in MLX (ONNX ReduceMax ignores it)."""
    (x,) = ctx.inputs(rec)
    kind, axes = rec.arguments
    axes = [int(a) for a in axes]
    out_dtype = rec.outputs[0].dtype
    in_dtype = rec.inputs[0].dtype
    if kind in (AND, OR):
        flags = x if in_dtype == mx.bool_ else ctx.op.Not(ctx.run("Equal", [x, ctx.scalar(0, in_dtype)], in_dtype, out_dtype=mx.bool_))
        op = "ReduceMin" if kind == AND else "ReduceMax"
        return [ctx.cast(ctx.reduce_via(op, flags, axes, mx.bool_), out_dtype)]
    if kind not in REDUCE_OPS:
        raise ctx.fail(f"argument type={kind!r} is not a Reduce::ReduceType (0..5)")
    x = ctx.cast(x, out_dtype)
    result = ctx.reduce_via(REDUCE_OPS[kind], x, axes, out_dtype)
    if kind in (MIN, MAX) and dtypes.is_float(out_dtype) and rec.inputs[0].size > 0:
        nan = ctx.scalar(math.nan, out_dtype)
        result = ctx.run("Where", [any_nan(ctx, x, axes, out_dtype), nan, result], out_dtype, fixed=(0,))
    return [result]


@handles("Softmax")
def softmax(ctx, rec):
    """inputs (x,); arguments [precise: bool]: Softmax over the last axis (float16 and
    bfloat16 are computed in float32 either way)."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    return [ctx.run("Softmax", [x], dtype, axis=-1)]


@handles("LogSumExp")
def logsumexp(ctx, rec):
    """inputs (x,); arguments []: log(sum(exp(x))) over the last axis, keepdims; stable,
    -inf for an all -inf row and +inf when the row holds +inf, as in MLX."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Exp", dtype)
    x = ctx.cast(x, work)
    peak = ctx.reduce("ReduceMax", x, [-1], keepdims=True)
    peak = ctx.op.Where(ctx.op.IsInf(peak), ctx.scalar(0, work), peak)
    total = ctx.reduce("ReduceSum", ctx.op.Exp(ctx.op.Sub(x, peak)), [-1], keepdims=True)
    return [ctx.cast(ctx.op.Add(ctx.op.Log(total), peak), dtype)]
