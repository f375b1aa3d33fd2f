"""Exponentials and logarithms: Log, Log1p, Expm1, LogAddExp, Exp, Sigmoid.

ONNX has Log, Exp and Sigmoid but not MLX's corners: log1p and expm1 without cancellation
near 0 (and with MLX's signed zeros), MLX's CPU exp cut-offs at +-88, and its float16 /
bfloat16 sigmoid's order of rounding.
"""

from __future__ import annotations

import math

from mlx2onnx.capture.records import LogBase
from mlx2onnx.translate.registry import handles
from mlx2onnx.translate.rounding import NARROW, round_within

LOG_BASES = {LogBase.two: math.log(2.0), LogBase.ten: math.log(10.0), LogBase.e: None}


@handles("Log")
def log(ctx, rec):
    """inputs (x,); arguments [base: LogBase]: Log, divided by ln(base)."""
    (x,) = ctx.inputs(rec)
    (base,) = rec.args
    if base not in LOG_BASES:
        raise ctx.fail(f"argument base={base!r} is not a known Log::Base (0=two, 1=ten, 2=e)")
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Log", dtype)
    result = ctx.op.Log(ctx.cast(x, work))
    if LOG_BASES[base] is not None:
        result = ctx.op.Div(result, ctx.scalar(LOG_BASES[base], work))
    return [ctx.cast(result, dtype)]


# onnxruntime's CPU Where returns +0.0 where it selects a -0.0 from its X input (it merges
# the two selections with ``x != 0 ? x : y``), and its NotWhereFusion swaps X and Y, so no
# Where keeps the sign of a zero it selects: the composites below scale x by a factor that
# a Where selects (never 0) instead, and select_value repairs the sign by multiplication.


def log1p_value(ctx, x, work):
    """log(1 + x) without cancellation near 0: x * (log(u) / (u - 1)) with u = 1 + x, and
    the factor 1 where u == 1 (so log1p(-0.0) = -0.0 as in MLX)."""
    one = ctx.scalar(1, work)
    u = ctx.op.Add(one, x)
    um1 = ctx.op.Sub(u, one)
    is_one = ctx.op.Equal(u, one)
    factor = ctx.op.Where(is_one, one, ctx.op.Div(ctx.op.Log(u), ctx.op.Where(is_one, one, um1)))
    # u == inf: log(u); x == -1: x * inf = -inf (already right).
    return ctx.op.Where(ctx.op.IsInf(u), ctx.op.Log(u), ctx.op.Mul(x, factor))


def expm1_value(ctx, x, work):
    """exp(x) - 1 without cancellation near 0: x * ((u - 1) / log(u)) with u = exp(x), and
    the factor 1 where u == 1 (so expm1(-0.0) = -0.0 as in MLX)."""
    one = ctx.scalar(1, work)
    u = ctx.op.Exp(x)
    um1 = ctx.op.Sub(u, one)
    logu = ctx.op.Log(u)
    is_one = ctx.op.Equal(u, one)
    factor = ctx.op.Where(is_one, one, ctx.op.Div(um1, ctx.op.Where(is_one, one, logu)))
    result = ctx.op.Mul(x, factor)
    result = ctx.op.Where(ctx.op.Equal(um1, ctx.scalar(-1, work)), ctx.scalar(-1, work), result)
    return ctx.op.Where(ctx.op.IsInf(u), u, result)


def _through(ctx, rec, onnx_op: str, value):
    """The one input through ``value(ctx, x, work)`` in ``onnx_op``'s working dtype."""
    (x,) = ctx.inputs(rec)
    return [ctx.via(onnx_op, rec.outputs[0].dtype, lambda v, work: value(ctx, v, work), x)]


@handles("Log1p")
def log1p(ctx, rec):
    """inputs (x,); arguments []: log(1 + x), accurate for tiny x (ONNX has no Log1p)."""
    return _through(ctx, rec, "Log", log1p_value)


@handles("Expm1")
def expm1(ctx, rec):
    """inputs (x,); arguments []: exp(x) - 1, accurate for tiny x (ONNX has no Expm1)."""
    return _through(ctx, rec, "Exp", expm1_value)


@handles("LogAddExp")
def logaddexp(ctx, rec):
    """inputs (a, b); arguments []: max + log1p(exp(min - max)); max when min = -inf or max = +inf."""
    a, b = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Exp", dtype)
    a, b = ctx.cast(a, work), ctx.cast(b, work)
    hi, lo = ctx.op.Max(a, b), ctx.op.Min(a, b)
    out = ctx.op.Add(hi, log1p_value(ctx, ctx.op.Exp(ctx.op.Sub(lo, hi)), work))
    inf = ctx.scalar(math.inf, work)
    special = ctx.op.Or(ctx.op.Equal(lo, ctx.op.Neg(inf)), ctx.op.Equal(hi, inf))
    return [ctx.cast(ctx.op.Where(special, hi, out), dtype)]


# MLX's CPU exp (backend/cpu/simd/math.h) is a polynomial that returns +inf above 88 and
# 0 below -88; exp(88.5) = 2.7e38 is finite in float32, so ONNX Exp alone would differ.
EXP_OVERFLOW, EXP_UNDERFLOW = 88.0, -88.0


def mlx_exp_value(ctx, x, work):
    """exp(x) with MLX's cut-offs: +inf for x > 88, 0 for x < -88 (NaN stays NaN)."""
    result = ctx.op.Exp(x)
    result = ctx.op.Where(ctx.op.Greater(x, ctx.scalar(EXP_OVERFLOW, work)), ctx.scalar(math.inf, work), result)
    return ctx.op.Where(ctx.op.Less(x, ctx.scalar(EXP_UNDERFLOW, work)), ctx.scalar(0, work), result)


@handles("Exp")
def exp(ctx, rec):
    """inputs (x,); arguments []: Exp, +inf above 88 and 0 below -88 as MLX's CPU exp."""
    return _through(ctx, rec, "Exp", mlx_exp_value)


@handles("Sigmoid")
def sigmoid(ctx, rec):
    """inputs (x,); arguments []: Sigmoid; exactly 0 below -88, where MLX's 1 / (1 + exp(-x))
    meets its exp overflow. For float16/bfloat16 MLX's CPU kernel computes
    y = 1 / (1 + exp(|x|)) with exp(|x|) rounded to that dtype, and gives y below 0, 1 - y
    from 0 up: spelled out the same way, since Sigmoid would round differently."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Sigmoid", dtype)
    x = ctx.cast(x, work)
    if dtype in NARROW:
        one = ctx.scalar(1, work)
        grown = round_within(ctx, mlx_exp_value(ctx, ctx.op.Abs(x), work), dtype, work)
        y = ctx.op.Div(one, ctx.op.Add(one, grown))
        return [ctx.cast(ctx.op.Where(ctx.op.Less(x, ctx.scalar(0, work)), y, ctx.op.Sub(one, y)), dtype)]
    result = ctx.op.Sigmoid(x)
    result = ctx.op.Where(ctx.op.Less(x, ctx.scalar(-EXP_OVERFLOW, work)), ctx.scalar(0, work), result)
    return [ctx.cast(result, dtype)]
