"""Elementwise unary, binary and ternary primitives.

MLX inputs always arrive already broadcast to the output shape. One-to-one maps live in
the two tables below; everything with a semantic trap has its own function.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.translate.markers import ZERO_SIGN_REPAIR
from mlx2onnx.translate.registry import handles, register
from mlx2onnx.translate.rounding import (
    NARROW,
    emulated,
    narrowed,
    needs_rounding,
    round_to,
    round_within,
)

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
    "Erf": "Erf",
}

BINARY = {
    "Add": "Add",
    "Subtract": "Sub",
    "Multiply": "Mul",
    "Divide": "Div",
}

# MLX name -> ONNX op producing bool from two inputs of one dtype.
COMPARISON = {
    "Less": "Less",
    "LessEqual": "LessOrEqual",
    "Greater": "Greater",
    "GreaterEqual": "GreaterOrEqual",
}

LOGICAL = {"LogicalAnd": "And", "LogicalOr": "Or"}


_MAPPED = {  # kind -> (name prefix, docstring): the one-to-one maps of the tables above
    "unary": ("unary", "inputs (x,); arguments []: ONNX {op}."),
    "binary": ("binary", "inputs (a, b) broadcast to one shape; arguments []: ONNX {op}."),
    "comparison": ("compare", "inputs (a, b); arguments []: ONNX {op}, bool result."),
}


def _mapped(onnx_op: str, kind: str):
    """The handler of a primitive that is ONNX ``onnx_op`` on its inputs, computed where
    onnxruntime has a kernel (a comparison gives bool)."""
    compares = kind == "comparison"

    def mapped(ctx, rec):
        dtype = (rec.inputs if compares else rec.outputs)[0].dtype
        return [ctx.run(onnx_op, ctx.inputs(rec), dtype, out_dtype=mx.bool_ if compares else None)]

    prefix, doc = _MAPPED[kind]
    mapped.__name__ = f"{prefix}_{onnx_op.lower()}"
    mapped.__doc__ = doc.format(op=onnx_op)
    return mapped


def _logical(onnx_op: str):
    def logical(ctx, rec):
        a, b = ctx.inputs(rec)
        return [ctx.op.__getattr__(onnx_op)(ctx.cast(a, mx.bool_), ctx.cast(b, mx.bool_))]

    logical.__name__ = f"logical_{onnx_op.lower()}"
    logical.__doc__ = f"inputs (a, b) bool; arguments []: ONNX {onnx_op}."
    return logical


for _kind, _table in (("unary", UNARY), ("binary", BINARY), ("comparison", COMPARISON)):
    for _name, _op in _table.items():
        register(_name, _mapped(_op, _kind))
for _name, _op in LOGICAL.items():
    register(_name, _logical(_op))


@handles("Maximum", "Minimum")
def extremum(ctx, rec):
    """inputs (a, b) broadcast to one shape; arguments []. MLX takes a where a > b (a < b)
    or a is NaN, else b: of two equal values it returns b, so maximum(+0.0, -0.0) is -0.0
    and relu(-0.0) is +0.0. ONNX Max/Min leave that choice open (onnxruntime returns
    either, by dtype and by which operand broadcasts). Where two float zeros can meet, a
    leaves the tie first: Max(Where(a == b, -inf, a), b) (+inf for Min), with a in Where's
    second branch, the one onnxruntime keeps a -0.0 in (it gives a -0.0 selected from the
    first as +0.0). passes.conv_fold.max_zero_to_relu makes a relu of a value that is never
    -0.0 one Relu again."""
    a, b = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    onnx_op = "Max" if rec.name == "Maximum" else "Min"
    if not dtypes.is_float(dtype) or not (_may_be_zero(a) and _may_be_zero(b)):
        return [ctx.run(onnx_op, [a, b], dtype)]
    tie = ctx.run("Equal", [a, b], dtype, out_dtype=mx.bool_)
    away = ctx.scalar(-math.inf if onnx_op == "Max" else math.inf, dtype)
    return [ctx.run(onnx_op, [ctx.run("Where", [tie, away, a], dtype, fixed=(0,)), b], dtype)]


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
    """inputs (x,); arguments [recip: bool]: sqrt(x), or 1/sqrt(x) when recip (rsqrt). MLX's
    CPU rsqrt of float16/bfloat16 divides 1 by the square root rounded to that dtype."""
    (x,) = ctx.inputs(rec)
    (recip,) = rec.args
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("Sqrt", dtype)
    root = ctx.op.Sqrt(ctx.cast(x, work))
    if recip:
        if dtype in NARROW:
            root = round_within(ctx, root, dtype, work)
        root = ctx.op.Div(ctx.scalar(1, work), root)
    return [ctx.cast(root, dtype)]


@handles("Square")
def square(ctx, rec):
    """inputs (x,); arguments []: x * x."""
    (x,) = ctx.inputs(rec)
    return [ctx.run("Mul", [x, x], rec.outputs[0].dtype)]


@handles("Equal")
def equal(ctx, rec):
    """inputs (a, b); arguments [equal_nan: bool]: Equal, and NaN == NaN when equal_nan."""
    a, b = ctx.inputs(rec)
    equal_nan = bool(rec.args.equal_nan)
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
    """inputs (condition, x, y); arguments []: Where(condition, x, y), keeping -0.0."""
    cond, x, y = ctx.inputs(rec)
    return [select_value(ctx, ctx.cast(cond, mx.bool_), x, y, rec.outputs[0].dtype)]


def select_value(ctx, cond, x, y, dtype):
    """Where(cond, x, y) as MLX selects, signed zeros included: onnxruntime's Where may give
    a selected -0.0 as +0.0 (see log1p_value). The Where of the reciprocals is the selected
    value's ±inf where that is a zero, and never 0, so it keeps its sign; where it and the
    reciprocal of the result differ in sign the result is multiplied by -1. Skipped when
    both values are constants without a -0.0."""
    result = ctx.run("Where", [cond, x, y], dtype, fixed=(0,))
    if not dtypes.is_float(dtype) or not (_may_be_negative_zero(x) or _may_be_negative_zero(y)):
        return result
    work = ctx.work_dtype("Where", dtype)
    one = ctx.scalar(1, work)
    chosen = ctx.cast(result, work)
    inverse = ctx.op.Where(cond, _reciprocal(ctx, x, work), _reciprocal(ctx, y, work))
    flip = ctx.op.Less(ctx.op.Mul(ctx.op.Div(one, chosen), inverse), ctx.scalar(0, work))  # only at zeros
    # (mlx2onnx/passes/zero_sign.py bypasses the repair where no consumer can see the sign of a zero)
    repaired = ctx.mark(ctx.op.Mul(chosen, ctx.op.Where(flip, ctx.scalar(-1, work), one)), ZERO_SIGN_REPAIR)
    return ctx.cast(repaired, dtype)


def _reciprocal(ctx, value, work):
    """1 / value in ``work``; a constant's computed here (constant folding would warn of the
    division by zero on stderr)."""
    tensor = _constant(value)
    if tensor is None:
        return ctx.op.Div(ctx.scalar(1, work), ctx.cast(value, work))
    with np.errstate(divide="ignore"):
        inverse = 1 / np.asarray(tensor.numpy(), dtype=np.float64)
    return ctx.const(inverse.astype(ctx.numpy_type(work)))


def _constant(value):
    """The constant ``value`` holds, or broadcasts (MLX's Broadcast of a Python scalar), or None."""
    while value.const_value is None and value.producer() is not None and value.producer().op_type == "Expand":
        value = value.producer().inputs[0]
    return value.const_value


def _may_be_zero(value) -> bool:
    tensor = _constant(value)
    return tensor is None or bool(np.any(np.asarray(tensor.numpy(), dtype=np.float64) == 0))


def _may_be_negative_zero(value) -> bool:
    tensor = _constant(value)
    if tensor is None:
        return True
    array = np.asarray(tensor.numpy(), dtype=np.float64)
    return bool(np.any((array == 0) & np.signbit(array)))


@handles("AsType")
def astype(ctx, rec):
    """inputs (x,); arguments [dtype]: Cast. Float to int truncates and NaN to bool is True,
    in MLX and ONNX alike."""
    (x,) = ctx.inputs(rec)
    (target,) = rec.args
    if target == mx.complex64 or rec.inputs[0].dtype == mx.complex64:
        raise ctx.fail("casts to or from complex64 cannot be expressed in ONNX on real tensors")
    source = rec.inputs[0].dtype
    if source == target:
        return [ctx.op.Identity(x)]
    # Under a float policy (bfloat16 carried as float32, ...) a carried value is rounded to
    # its own dtype first (already done after every op under "emulate"), and a carried
    # target is rounded to its dtype's values, as MLX's cast rounds (translate.rounding).
    if needs_rounding(ctx, source) and not emulated(ctx, source):
        x = round_to(ctx, x, source)
    y = ctx.op.Cast(x, to=ctx.onnx_type(target))
    return [round_to(ctx, y, target) if needs_rounding(ctx, target) else y]


def python_remainder(ctx, a, b, dtype):
    """a % b with the sign of the divisor (Python/MLX semantics) for any real dtype."""
    if not dtypes.is_float(dtype):
        return ctx.run("Mod", [a, b], dtype, fmod=0)
    work = ctx.work_dtype("Mod", dtype)
    a, b = ctx.cast(a, work), ctx.cast(b, work)
    r = ctx.op.Mod(a, b, fmod=1)
    zero = ctx.scalar(0, work)
    fix = ctx.op.And(ctx.op.Not(ctx.op.Equal(r, zero)), ctx.op.Xor(ctx.op.Less(r, zero), ctx.op.Less(b, zero)))
    # ctx.run: onnxruntime's CPU has no float16 Add or Where; the casts it would insert itself
    # merge with a following op's and drop MLX's rounding of r + b (tan of a float16
    # remainder near pi/2 was 152.5 against MLX's 157.6: fuzz seed 20261214 program 1560)
    return ctx.cast(ctx.run("Where", [fix, ctx.run("Add", [r, b], work), r], work, fixed=(0,)), dtype)


def floor_divide_value(ctx, a, b, dtype):
    """floor(a / b): Floor(Div) for floats; truncating Div corrected by the sign rule for ints."""
    if dtypes.is_float(dtype):
        work = ctx.work_dtype("Div", dtype)
        quotient = ctx.op.Div(ctx.cast(a, work), ctx.cast(b, work))
        quotient = narrowed(ctx, quotient, dtype, work)  # MLX floors the quotient rounded to its own dtype
        return ctx.cast(ctx.op.Floor(quotient), dtype)
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


def integer_power(ctx, base, exponent, dtype):
    """base ** exponent for an integer dtype as MLX computes it: square-and-multiply that
    wraps, and 0 for any negative exponent (onnxruntime's integer Pow goes through double
    and saturates). The loop runs over exponent bits 0 .. n-3 of an n-bit type: an odd
    base has base ** (2 ** (n - 2)) == 1 (mod 2 ** n), and an even base is 0 by then, so a
    higher exponent bit only zeroes an even base."""
    from .bits import UNSIGNED_OF, bit_planes

    udtype, bits = UNSIGNED_OF[dtype], dtype.size * 8
    steps = bits - 2
    b = ctx.cast(base, udtype)
    e = ctx.cast(exponent, udtype)
    planes = bit_planes(ctx, e, udtype, steps)
    one = ctx.scalar(1, udtype)
    result = None
    for k in range(steps):
        bit = ctx.squeeze(ctx.slice(planes, [k], [k + 1], axes=[-1]), [-1])
        factor = ctx.op.Add(one, ctx.op.Mul(bit, ctx.op.Sub(b, one)))  # bit ? b : 1 (wraps)
        result = factor if result is None else ctx.op.Mul(result, factor)
        if k + 1 < steps:
            b = ctx.op.Mul(b, b)
    high = ctx.run("GreaterOrEqual", [e, ctx.scalar(2**steps, udtype)], udtype, out_dtype=mx.bool_)
    even = ctx.op.Equal(ctx.run("Mod", [ctx.cast(base, udtype), ctx.scalar(2, udtype)], udtype), ctx.scalar(0, udtype))
    zero = ctx.op.And(high, even)
    if not dtypes.is_unsigned(dtype):
        zero = ctx.op.Or(zero, ctx.run("Less", [exponent, ctx.scalar(0, dtype)], dtype, out_dtype=mx.bool_))
    result = ctx.run("Where", [zero, ctx.scalar(0, udtype), result], udtype, fixed=(0,))
    return ctx.cast(result, dtype)


@handles("Power")
def power(ctx, rec):
    """inputs (base, exponent); arguments []: Pow for floats; integers wrap as in MLX."""
    a, b = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    if dtypes.is_integer(dtype):
        return [integer_power(ctx, a, b, dtype)]
    return [ctx.run("Pow", [a, b], dtype)]
