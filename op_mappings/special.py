"""Functions ONNX lacks, rebuilt as MLX computes them: ArcTan2 (atan with IEEE's quadrants
and signed zeros) and ErfInv (MLX's CPU polynomial, step by step).
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx.translate.registry import handles


def sign_bit(ctx, x, work):
    """True where x is negative, -0.0 included (1 / -0.0 = -inf); False for NaN."""
    zero = ctx.scalar(0, work)
    return ctx.op.Or(ctx.op.Less(x, zero), ctx.op.Less(ctx.op.Div(ctx.scalar(1, work), x), zero))


@handles("ArcTan2")
def arctan2(ctx, rec):
    """inputs (y, x); arguments []: atan2(y, x) (ONNX has no Atan2).

    atan(y / x), plus copysign(pi, y) where x is negative or -0.0; the two quotients
    that are NaN for non-NaN inputs get IEEE's values: 0/0 -> y or copysign(pi, y), and
    inf/inf -> copysign(pi/4 or 3pi/4, y). Computed in float32 (float16, bfloat16 too)."""
    y, x = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Atan", dtype)
    y, x = ctx.cast(y, work), ctx.cast(x, work)
    zero, pi = ctx.scalar(0, work), ctx.scalar(math.pi, work)
    y_neg, x_neg = sign_bit(ctx, y, work), sign_bit(ctx, x, work)
    signed_pi = ctx.op.Where(y_neg, ctx.op.Neg(pi), pi)
    base = ctx.op.Atan(ctx.op.Div(y, x))
    result = ctx.op.Where(x_neg, ctx.op.Add(base, signed_pi), base)
    both_zero = ctx.op.And(ctx.op.Equal(y, zero), ctx.op.Equal(x, zero))
    result = ctx.op.Where(both_zero, ctx.op.Where(x_neg, signed_pi, y), result)
    both_inf = ctx.op.And(ctx.op.IsInf(y), ctx.op.IsInf(x))
    quarter = ctx.op.Where(x_neg, ctx.scalar(3 * math.pi / 4, work), ctx.scalar(math.pi / 4, work))
    result = ctx.op.Where(both_inf, ctx.op.Where(y_neg, ctx.op.Neg(quarter), quarter), result)
    return [ctx.cast(result, dtype)]


# MLX's CPU erfinv (backend/cpu/simd/math.h): t = log(1 - a*a) with one fma, then
# a * P(t), P one of two float32 Horner polynomials chosen by |t| > 6.125, each step
# one fma. Coefficients, highest degree first.
ERFINV_TAIL = (
    3.03697567e-10,
    2.93243101e-8,
    1.22150334e-6,
    2.84108955e-5,
    3.93552968e-4,
    3.02698812e-3,
    4.83185798e-3,
    -2.64646143e-1,
    8.40016484e-1,
)
ERFINV_CENTRE = (
    5.43877832e-9,
    1.43285448e-7,
    1.22774793e-6,
    1.12963626e-7,
    -5.61530760e-5,
    -1.47697632e-4,
    2.31468678e-3,
    1.15392581e-2,
    -2.32015476e-1,
    8.86226892e-1,
)
ERFINV_SWITCH = 6.125


def fma_f32(ctx, p, t64, c):
    """float32 fma(p, t, c): p * t is exact in float64, so one float64 Add and one
    rounding to float32 give the fused result (bar rare double rounding)."""
    wide = ctx.op.Add(ctx.op.Mul(ctx.cast(p, mx.float64), t64), ctx.scalar(float(np.float32(c)), mx.float64))
    return ctx.cast(wide, mx.float32)


def horner_f32(ctx, coefficients, t64):
    p = ctx.scalar(np.float32(coefficients[0]), mx.float32)
    for c in coefficients[1:]:
        p = fma_f32(ctx, p, t64, c)
    return p


@handles("ErfInv")
def erfinv(ctx, rec):
    """inputs (x,); arguments []: MLX's erfinv polynomial rebuilt step by step (ONNX has no
    ErfInv): erfinv(+-1) = +-inf, NaN for |x| > 1. float16/bfloat16 run in float32."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    a = ctx.cast(x, mx.float32)
    a64 = ctx.cast(a, mx.float64)
    t = ctx.cast(ctx.op.Sub(ctx.scalar(1, mx.float64), ctx.op.Mul(a64, a64)), mx.float32)  # fma(a, -a, 1)
    t = ctx.op.Log(t)
    t64 = ctx.cast(t, mx.float64)
    tail = ctx.op.Greater(ctx.op.Abs(t), ctx.scalar(ERFINV_SWITCH, mx.float32))
    p = ctx.op.Where(tail, horner_f32(ctx, ERFINV_TAIL, t64), horner_f32(ctx, ERFINV_CENTRE, t64))
    return [ctx.cast(ctx.op.Mul(a, p), dtype)]
