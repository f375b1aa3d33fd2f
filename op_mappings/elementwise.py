"""Elementwise unary, binary and ternary primitives.

MLX inputs always arrive already broadcast to the output shape. One-to-one maps live in
the two tables below; everything with a semantic trap has its own function.
"""

from __future__ import annotations

import math

import mlx.core as mx

from mlx2onnx import dtypes
from mlx2onnx.registry import handles, register

# MLX name -> ONNX op; inputs and output share one dtype.
UNARY = {
    "Abs": "Abs",
    "Sin": "Sin",
    "Cos": "Cos",
    "Tan": "Tan",
    "Sinh": "Sinh",
    "Cosh": "Cosh",
    "Tanh": "Tanh",
    "ArcSin": "Asin",
    "ArcCos": "Acos",
    "ArcTan": "Atan",
    "ArcSinh": "Asinh",
    "ArcCosh": "Acosh",
    "ArcTanh": "Atanh",
    "Sigmoid": "Sigmoid",
    "Erf": "Erf",
    "Exp": "Exp",
}

BINARY = {
    "Add": "Add",
    "Subtract": "Sub",
    "Multiply": "Mul",
    "Divide": "Div",
    "Maximum": "Max",
    "Minimum": "Min",
    "Power": "Pow",
}

# MLX name -> ONNX op producing bool from two inputs of one dtype.
COMPARISON = {
    "Less": "Less",
    "LessEqual": "LessOrEqual",
    "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual",
}

LOGICAL = {"LogicalAnd": "And", "LogicalOr": "Or"}


def _unary(onnx_op: str):
    def unary(ctx, rec):
        (x,) = ctx.inputs(rec)
        return [ctx.run(onnx_op, [x], rec.outputs[0].dtype)]

    unary.__name__ = f"unary_{onnx_op.lower()}"
    unary.__doc__ = f"inputs (x,); arguments []: ONNX {onnx_op}."
    return unary


def _binary(onnx_op: str):
    def binary(ctx, rec):
        a, b = ctx.inputs(rec)
        return [ctx.run(onnx_op, [a, b], rec.outputs[0].dtype)]

    binary.__name__ = f"binary_{onnx_op.lower()}"
    binary.__doc__ = f"inputs (a, b) broadcast to one shape; arguments []: ONNX {onnx_op}."
    return binary


def _comparison(onnx_op: str):
    def comparison(ctx, rec):
        a, b = ctx.inputs(rec)
        return [ctx.run(onnx_op, [a, b], rec.inputs[0].dtype, out_dtype=mx.bool_)]

    comparison.__name__ = f"compare_{onnx_op.lower()}"
    comparison.__doc__ = f"inputs (a, b); arguments []: ONNX {onnx_op}, bool result."
    return comparison


def _logical(onnx_op: str):
    def logical(ctx, rec):
        a, b = ctx.inputs(rec)
        return [ctx.op.__getattr__(onnx_op)(ctx.cast(a, mx.bool_), ctx.cast(b, mx.bool_))]

    logical.__name__ = f"logical_{onnx_op.lower()}"
    logical.__doc__ = f"inputs (a, b) bool; arguments []: ONNX {onnx_op}."
    return logical


for _name, _op in UNARY.items():
    register(_name, _unary(_op))
for _name, _op in BINARY.items():
    register(_name, _binary(_op))
for _name, _op in COMPARISON.items():
    register(_name, _comparison(_op))
for _name, _op in LOGICAL.items():
    register(_name, _logical(_op))


@handles("Negative")
def negative(ctx, rec):
    """inputs (x,); arguments []. Unsigned values wrap: computed as 0 - x."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    if dtypes.is_unsigned(dtype):
        return [ctx.run("Sub", [ctx.scalar(0, dtype), x], dtype)]
    return [ctx.run("Neg", [x], dtype)]


@handles("Floor", "Ceil", "Round")
def rounding(ctx, rec):
    """inputs (x,); arguments []. Round is half-to-even in MLX and ONNX; integers pass through."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    if not dtypes.is_float(dtype):
        return [ctx.op.Identity(x)]
    return [ctx.run(rec.name, [x], dtype)]


@handles("LogicalNot")
def logical_not(ctx, rec):
    """inputs (x,) bool; arguments []: ONNX Not."""
    (x,) = ctx.inputs(rec)
    return [ctx.op.Not(ctx.cast(x, mx.bool_))]


@handles("Sign")
def sign(ctx, rec):
    """inputs (x,); arguments []. MLX sign(NaN) is 0, ONNX Sign(NaN) is NaN: guarded."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    if dtype == mx.bool_:
        return [ctx.op.Identity(x)]
    result = ctx.run("Sign", [x], dtype)
    if dtypes.is_float(dtype):
        result = ctx.run("Where", [ctx.isnan(x, dtype), ctx.scalar(0, dtype), result], dtype, fixed=(0,))
    return [result]


@handles("Sqrt")
def sqrt(ctx, rec):
    """inputs (x,); arguments [recip: bool]: sqrt(x), or 1/sqrt(x) when recip (rsqrt)."""
    (x,) = ctx.inputs(rec)
    (recip,) = rec.arguments
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Sqrt", dtype)
    root = ctx.op.Sqrt(ctx.cast(x, work))
    if recip:
        root = ctx.op.Div(ctx.scalar(1, work), root)
    return [ctx.cast(root, dtype)]


@handles("Square")
def square(ctx, rec):
    """inputs (x,); arguments []: x * x."""
    (x,) = ctx.inputs(rec)
    return [ctx.run("Mul", [x, x], rec.outputs[0].dtype)]


LOG_BASES = {0: math.log(2.0), 1: math.log(10.0), 2: None}  # Log::Base two=0, ten=1, e=2


@handles("Log")
def log(ctx, rec):
    """inputs (x,); arguments [base] with two=0, ten=1, e=2: Log, divided by ln(base)."""
    (x,) = ctx.inputs(rec)
    (base,) = rec.arguments
    if base not in LOG_BASES:
        raise ctx.fail(f"argument base={base!r} is not a known Log::Base (0=two, 1=ten, 2=e)")
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Log", dtype)
    result = ctx.op.Log(ctx.cast(x, work))
    if LOG_BASES[base] is not None:
        result = ctx.op.Div(result, ctx.scalar(LOG_BASES[base], work))
    return [ctx.cast(result, dtype)]


def log1p_value(ctx, x, work):
    """log(1 + x) without cancellation near 0: log(u) * x / (u - 1) with u = 1 + x."""
    one = ctx.scalar(1, work)
    u = ctx.op.Add(one, x)
    um1 = ctx.op.Sub(u, one)
    exact = ctx.op.Mul(ctx.op.Log(u), ctx.op.Div(x, ctx.op.Where(ctx.op.Equal(um1, ctx.scalar(0, work)), one, um1)))
    # u == 1: log1p(x) = x (x tiny); u == inf: log(u); x == -1: -inf (already right).
    result = ctx.op.Where(ctx.op.Equal(u, one), x, exact)
    return ctx.op.Where(ctx.op.IsInf(u), ctx.op.Log(u), result)


def expm1_value(ctx, x, work):
    """exp(x) - 1 without cancellation near 0: (u - 1) * x / log(u) with u = exp(x)."""
    one = ctx.scalar(1, work)
    u = ctx.op.Exp(x)
    um1 = ctx.op.Sub(u, one)
    logu = ctx.op.Log(u)
    safe_log = ctx.op.Where(ctx.op.Equal(logu, ctx.scalar(0, work)), one, logu)
    exact = ctx.op.Mul(um1, ctx.op.Div(x, safe_log))
    result = ctx.op.Where(ctx.op.Equal(u, one), x, exact)
    result = ctx.op.Where(ctx.op.Equal(um1, ctx.scalar(-1, work)), ctx.scalar(-1, work), result)
    return ctx.op.Where(ctx.op.IsInf(u), u, result)


@handles("Log1p")
def log1p(ctx, rec):
    """inputs (x,); arguments []: log(1 + x), accurate for tiny x (ONNX has no Log1p)."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Log", dtype)
    return [ctx.cast(log1p_value(ctx, ctx.cast(x, work), work), dtype)]


@handles("Expm1")
def expm1(ctx, rec):
    """inputs (x,); arguments []: exp(x) - 1, accurate for tiny x (ONNX has no Expm1)."""
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Exp", dtype)
    return [ctx.cast(expm1_value(ctx, ctx.cast(x, work), work), dtype)]


@handles("Equal")
def equal(ctx, rec):
    """inputs (a, b); arguments [equal_nan: bool]: Equal, and NaN == NaN when equal_nan."""
    a, b = ctx.inputs(rec)
    (equal_nan,) = rec.arguments or (False,)
    dtype = rec.inputs[0].dtype
    result = ctx.run("Equal", [a, b], dtype, out_dtype=mx.bool_)
    if equal_nan and dtypes.is_float(dtype):
        result = ctx.op.Or(result, ctx.op.And(ctx.isnan(a, dtype), ctx.isnan(b, dtype)))
    return [result]


@handles("NotEqual")
def not_equal(ctx, rec):
    """inputs (a, b); arguments []: Not(Equal(a, b)) (true for NaN != NaN, as in MLX)."""
    a, b = ctx.inputs(rec)
    return [ctx.op.Not(ctx.run("Equal", [a, b], rec.inputs[0].dtype, out_dtype=mx.bool_))]


@handles("Select")
def select(ctx, rec):
    """inputs (condition, x, y); arguments []: Where(condition, x, y)."""
    cond, x, y = ctx.inputs(rec)
    return [ctx.run("Where", [ctx.cast(cond, mx.bool_), x, y], rec.outputs[0].dtype, fixed=(0,))]


@handles("AsType")
def astype(ctx, rec):
    """inputs (x,); arguments [dtype]: Cast. Float to int truncates and NaN to bool is True,
    in MLX and ONNX alike."""
    (x,) = ctx.inputs(rec)
    (target,) = rec.arguments
    if target == mx.complex64 or rec.inputs[0].dtype == mx.complex64:
        raise ctx.fail("casts to or from complex64 cannot be expressed in ONNX on real tensors")
    if rec.inputs[0].dtype == target:
        return [ctx.op.Identity(x)]
    return [ctx.op.Cast(x, to=dtypes.to_onnx(target))]


def python_remainder(ctx, a, b, dtype):
    """a % b with the sign of the divisor (Python/MLX semantics) for any real dtype."""
    if not dtypes.is_float(dtype):
        return ctx.run("Mod", [a, b], dtype, fmod=0)
    work = ctx.work_dtype("Mod", dtype)
    a, b = ctx.cast(a, work), ctx.cast(b, work)
    r = ctx.op.Mod(a, b, fmod=1)
    zero = ctx.scalar(0, work)
    fix = ctx.op.And(ctx.op.Not(ctx.op.Equal(r, zero)), ctx.op.Xor(ctx.op.Less(r, zero), ctx.op.Less(b, zero)))
    return ctx.cast(ctx.op.Where(fix, ctx.op.Add(r, b), r), dtype)


def floor_divide_value(ctx, a, b, dtype):
    """floor(a / b): Floor(Div) for floats; truncating Div corrected by the sign rule for ints."""
    if dtypes.is_float(dtype):
        work = ctx.work_dtype("Div", dtype)
        return ctx.cast(ctx.op.Floor(ctx.op.Div(ctx.cast(a, work), ctx.cast(b, work))), dtype)
    quotient = ctx.run("Div", [a, b], dtype)
    if dtypes.is_unsigned(dtype) or dtype == mx.bool_:
        return quotient
    work = ctx.work_dtype("Mod", dtype)
    aw, bw = ctx.cast(a, work), ctx.cast(b, work)
    r = ctx.op.Mod(aw, bw, fmod=1)
    zero = ctx.scalar(0, work)
    fix = ctx.op.And(ctx.op.Not(ctx.op.Equal(r, zero)), ctx.op.Xor(ctx.op.Less(r, zero), ctx.op.Less(bw, zero)))
    return ctx.run("Sub", [quotient, ctx.cast(fix, dtype)], dtype)


@handles("Remainder")
def remainder(ctx, rec):
    """inputs (a, b); arguments []: Python-style remainder (sign of the divisor)."""
    a, b = ctx.inputs(rec)
    return [python_remainder(ctx, a, b, rec.outputs[0].dtype)]


@handles("FloorDivide")
def floor_divide(ctx, rec):
    """inputs (a, b); arguments []: floor(a / b) for floats and ints (MLX 0.32.4)."""
    a, b = ctx.inputs(rec)
    return [floor_divide_value(ctx, a, b, rec.outputs[0].dtype)]


@handles("DivMod")
def divmod_(ctx, rec):
    """inputs (a, b); arguments []; outputs (floor quotient, Python remainder)."""
    a, b = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    return [floor_divide_value(ctx, a, b, dtype), python_remainder(ctx, a, b, rec.outputs[1].dtype)]


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
