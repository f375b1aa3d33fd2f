"""Parity cases: elementwise unary, binary and ternary primitives."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from tests.support.harness import FLOATS, INTS, SIGNED, UNSIGNED, Case, positive, rand

S = (3, 5)


def one(lo=-3.0, hi=3.0):
    return lambda rng, dt: (rand(rng, S, dt, lo, hi),)


def two(lo=-3.0, hi=3.0):
    return lambda rng, dt: (rand(rng, S, dt, lo, hi), rand(rng, S, dt, lo, hi))


def nonzero_pair(rng, dt):
    a = rand(rng, S, dt, -20, 20)
    b = rand(rng, S, dt, 1, 7) * mx.where(rand(rng, S, mx.bool_), 1, -1).astype(dt)
    return a, b


UNARY_FLOAT = [
    ("abs", mx.abs, "Abs", one()),
    ("sin", mx.sin, "Sin", one()),
    ("cos", mx.cos, "Cos", one()),
    ("tan", mx.tan, "Tan", one(-1.2, 1.2)),
    ("sinh", mx.sinh, "Sinh", one()),
    ("cosh", mx.cosh, "Cosh", one()),
    ("tanh", mx.tanh, "Tanh", one()),
    ("arcsin", mx.arcsin, "ArcSin", one(-1, 1)),
    ("arccos", mx.arccos, "ArcCos", one(-1, 1)),
    ("arctan", mx.arctan, "ArcTan", one()),
    ("arcsinh", mx.arcsinh, "ArcSinh", one()),
    ("arccosh", mx.arccosh, "ArcCosh", one(1, 5)),
    ("arctanh", mx.arctanh, "ArcTanh", one(-0.9, 0.9)),
    ("sigmoid", mx.sigmoid, "Sigmoid", one()),
    ("erf", mx.erf, "Erf", one()),
    ("exp", mx.exp, "Exp", one()),
    ("negative", mx.negative, "Negative", one()),
    ("sign", mx.sign, "Sign", one()),
    ("floor", mx.floor, "Floor", one()),
    ("ceil", mx.ceil, "Ceil", one()),
    ("round", mx.round, "Round", lambda rng, dt: (rand(rng, S, dt, -4, 4) * 2,)),
    ("sqrt", mx.sqrt, "Sqrt", lambda rng, dt: (positive(rng, S, dt),)),
    ("rsqrt", mx.rsqrt, "Sqrt", lambda rng, dt: (positive(rng, S, dt),)),
    ("square", mx.square, "Square", one()),
    ("log", mx.log, "Log", lambda rng, dt: (positive(rng, S, dt),)),
    ("log2", mx.log2, "Log", lambda rng, dt: (positive(rng, S, dt),)),
    ("log10", mx.log10, "Log", lambda rng, dt: (positive(rng, S, dt),)),
    ("log1p", mx.log1p, "Log1p", lambda rng, dt: (rand(rng, S, dt, -0.9, 3),)),
    ("expm1", mx.expm1, "Expm1", one()),
]

CASES = [
    Case(f"elementwise.{name}", fn, inputs, dtypes=FLOATS, primitives=(prim,)) for name, fn, prim, inputs in UNARY_FLOAT
]

CASES += [
    Case("elementwise.log1p_tiny", mx.log1p, one(-1e-6, 1e-6), primitives=("Log1p",), tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.expm1_tiny", mx.expm1, one(-1e-6, 1e-6), primitives=("Expm1",), tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.sign_edges", mx.sign, one(), primitives=("Sign",), edges=True),
    Case("elementwise.abs_int", mx.abs, one(-100, 100), dtypes=SIGNED, primitives=("Abs",)),
    Case("elementwise.negative_int", mx.negative, one(-100, 100), dtypes=INTS, primitives=("Negative",)),
    Case("elementwise.sign_int", mx.sign, one(-5, 5), dtypes=SIGNED, primitives=("Sign",)),
    Case("elementwise.floor_int", mx.floor, one(-5, 5), dtypes=(mx.int32,), primitives=("Floor",)),
    Case("elementwise.logical_not", mx.logical_not, lambda rng, dt: (rand(rng, S, mx.bool_),), primitives=("LogicalNot",)),
]

BINARY = [
    ("add", mx.add, "Add"),
    ("subtract", mx.subtract, "Subtract"),
    ("multiply", mx.multiply, "Multiply"),
    ("maximum", mx.maximum, "Maximum"),
    ("minimum", mx.minimum, "Minimum"),
    ("less", mx.less, "Less"),
    ("less_equal", mx.less_equal, "LessEqual"),
    ("greater", mx.greater, "Greater"),
    ("greater_equal", mx.greater_equal, "GreaterEqual"),
    ("equal", mx.equal, "Equal"),
    ("not_equal", mx.not_equal, "NotEqual"),
]

CASES += [
    Case(f"elementwise.{name}", fn, two(), dtypes=FLOATS, primitives=(prim,)) for name, fn, prim in BINARY
]
CASES += [
    Case(f"elementwise.{name}_int", fn, two(-50, 50), dtypes=INTS, primitives=(prim,)) for name, fn, prim in BINARY
]
CASES += [
    Case("elementwise.add_wraps", mx.add, two(), dtypes=INTS, primitives=("Add",), edges=True),
    Case("elementwise.maximum_nan", mx.maximum, two(), primitives=("Maximum",), edges=True),
    Case("elementwise.minimum_nan", mx.minimum, two(), primitives=("Minimum",), edges=True),
    Case("elementwise.divide", mx.divide, nonzero_pair, dtypes=FLOATS, primitives=("Divide",)),
    Case("elementwise.power", mx.power, lambda rng, dt: (positive(rng, S, dt), rand(rng, S, dt, -2, 2)), dtypes=FLOATS, primitives=("Power",)),
    Case("elementwise.power_int", mx.power, lambda rng, dt: (rand(rng, S, dt, 0, 5), rand(rng, S, dt, 0, 3)), dtypes=(mx.int32, mx.int8, mx.uint8), primitives=("Power",)),
    Case("elementwise.equal_nan", lambda a, b: mx.array_equal(a, b, equal_nan=True), two(), primitives=("Equal",), edges=True),
    Case("elementwise.isnan", mx.isnan, one(), primitives=("NotEqual",), edges=True),
    Case("elementwise.logical_and", mx.logical_and, lambda rng, dt: (rand(rng, S, mx.bool_), rand(rng, S, mx.bool_)), primitives=("LogicalAnd",)),
    Case("elementwise.logical_or", mx.logical_or, lambda rng, dt: (rand(rng, S, mx.bool_), rand(rng, S, mx.bool_)), primitives=("LogicalOr",)),
    Case("elementwise.where", mx.where, lambda rng, dt: (rand(rng, S, mx.bool_), rand(rng, S, dt), rand(rng, S, dt)), dtypes=FLOATS + INTS + (mx.bool_,), primitives=("Select",)),
    Case("elementwise.remainder", mx.remainder, nonzero_pair, dtypes=FLOATS + SIGNED + UNSIGNED[:2], primitives=("Remainder",)),
    Case("elementwise.floor_divide", mx.floor_divide, nonzero_pair, dtypes=FLOATS + SIGNED + UNSIGNED[:2], primitives=("FloorDivide",)),
    Case("elementwise.divmod", lambda a, b: mx.divmod(a, b), nonzero_pair, dtypes=(mx.float32, mx.int32), primitives=("DivMod",)),
    Case("elementwise.logaddexp", mx.logaddexp, two(-30, 30), dtypes=FLOATS, primitives=("LogAddExp",)),
    Case("elementwise.logaddexp_edges", mx.logaddexp, two(), primitives=("LogAddExp",), edges=True),
]

CAST_TARGETS = (mx.float32, mx.float16, mx.bfloat16, mx.int32, mx.int8, mx.uint8, mx.int64, mx.bool_)
CASES += [
    Case(
        f"elementwise.astype_{str(target).rsplit('.', 1)[-1]}",
        (lambda t: lambda x: x.astype(t))(target),
        one(-100, 100),
        dtypes=tuple(d for d in (mx.float32, mx.int32, mx.float16) if d != target),
        primitives=("AsType",),
    )
    for target in CAST_TARGETS
]
CASES += [
    Case("elementwise.astype_nan_to_bool", lambda x: x.astype(mx.bool_), one(), primitives=("AsType",), edges=True),
]

# -- ArcTan2, ErfInv, exp overflow ---------------------------------------------------
SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan)


def special_grid(rng, dt):
    """Every (y, x) pair of signed zeros, infinities, NaN and random finite values of both signs."""
    finite = tuple(rng.uniform(0.1, 5, 2)) + tuple(-rng.uniform(0.1, 5, 2))
    values = np.array(SPECIALS + finite, dtype=np.float32)
    y, x = np.meshgrid(values, values, indexing="ij")
    return mx.array(y).astype(dt), mx.array(x).astype(dt)


def near_one(rng, dt):
    """erfinv inputs: uniform in (-1, 1), within 1e-3 of +-1, exactly +-1 and beyond."""
    body = rng.uniform(-1, 1, 14)
    edge = (1 - rng.uniform(0, 1e-3, 8)) * rng.choice([-1, 1], 8)
    outside = rng.uniform(1.0001, 3, 4) * rng.choice([-1, 1], 4)
    values = np.concatenate([body, edge, outside, [1.0, -1.0, 0.0, -0.0, np.nan, np.inf]]).astype(np.float32)
    return (mx.array(rng.permutation(values).reshape(4, 8)).astype(dt),)


def around_exp_limits(rng, dt):
    """Values near MLX's exp cut-offs (+-88; float32 exp overflows only at 88.72) and wide."""
    parts = [rng.uniform(88.01, 88.7, 4), rng.uniform(87, 89.5, 4), rng.uniform(-89.5, -87, 6), rng.uniform(-100, 100, 6)]
    return (mx.array(rng.permutation(np.concatenate(parts)).reshape(4, 5).astype(np.float32)).astype(dt),)


CASES += [
    Case("elementwise.arctan2", mx.arctan2, two(-4, 4), dtypes=FLOATS, primitives=("ArcTan2",), onnx_ops=("Atan",)),
    Case("elementwise.arctan2_specials", mx.arctan2, special_grid, dtypes=FLOATS, primitives=("ArcTan2",)),
    Case("elementwise.arctan2_edges", mx.arctan2, two(), primitives=("ArcTan2",), edges=True),
    Case("elementwise.arctan2_tiny_huge", mx.arctan2, lambda rng, dt: (rand(rng, S, dt, -1e-30, 1e-30), rand(rng, S, dt, -1e30, 1e30)),
         primitives=("ArcTan2",)),
    Case("elementwise.erfinv", mx.erfinv, one(-0.999, 0.999), dtypes=FLOATS, primitives=("ErfInv",),
         tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.erfinv_near_one", mx.erfinv, near_one, dtypes=FLOATS, primitives=("ErfInv",),
         tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.erfinv_edges", mx.erfinv, one(-1, 1), primitives=("ErfInv",), edges=True,
         tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.exp_overflow", mx.exp, around_exp_limits, dtypes=FLOATS, primitives=("Exp",)),
    Case("elementwise.exp_edges", mx.exp, one(-100, 100), primitives=("Exp",), edges=True),
    Case("elementwise.sigmoid_overflow", mx.sigmoid, around_exp_limits, dtypes=FLOATS, primitives=("Sigmoid",)),
    Case("elementwise.sigmoid_edges", mx.sigmoid, one(-100, 100), primitives=("Sigmoid",), edges=True),
]


# -- integer Power: wraps like MLX's square-and-multiply ------------------------------
def int_power_inputs(rng, dt):
    """Bases over the whole range, exponents small to huge (and negative when signed)."""
    npd = np.dtype(str(dt).rsplit(".", 1)[-1])
    info = np.iinfo(npd)
    base = np.concatenate([rng.integers(-5 if info.min else 0, 6, 12), rng.integers(info.min, info.max, 12, endpoint=True, dtype=npd)])
    exp = np.concatenate([rng.integers(0, 70, 12), rng.integers(max(info.min, -3), info.max, 12, endpoint=True, dtype=npd)])
    exp[:2] = (0, 2 ** (npd.itemsize * 8 - 2)) if not info.min else (0, -1)
    return mx.array(base.astype(npd).reshape(4, 6)), mx.array(rng.permutation(exp).astype(npd).reshape(4, 6))


CASES += [
    Case("elementwise.power_int_wraps", mx.power, int_power_inputs, dtypes=INTS, primitives=("Power",)),
    Case("elementwise.power_edges", mx.power, lambda rng, dt: (rand(rng, S, dt, -3, 3), rand(rng, S, dt, -3, 3)),
         primitives=("Power",), edges=True),
]


# -- every unary float op on NaN, +-inf, -0.0, tiny and large values -----------------
CASES += [
    Case(f"elementwise.{name}_edges", fn, inputs, dtypes=FLOATS, primitives=(prim,), edges=True)
    for name, fn, prim, inputs in UNARY_FLOAT
    if name not in ("sign", "exp", "sigmoid")  # own edge cases above
]


# -- integer division family over whole ranges; float sign rules on edges ----------
def int_division_pair(rng, dt):
    """Dividends and divisors over the whole range with the extremes planted. Zero
    divisors and min // -1 are left out: MLX crashes (SIGFPE) or is undefined there."""
    npd = np.dtype(str(dt).rsplit(".", 1)[-1])
    info = np.iinfo(npd)
    specials = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=npd)
    a = rng.integers(info.min, info.max, size=S, endpoint=True, dtype=npd)
    b = rng.integers(info.min, info.max, size=S, endpoint=True, dtype=npd)
    small = rng.integers(1, 9, size=S).astype(npd)
    b = np.where(rng.random(S) < 0.5, b, small if not info.min else small * rng.choice(np.array([1, -1], dtype=npd), S))
    a = np.where(rng.random(S) < 0.25, specials[rng.integers(0, 5, S)], a)
    b = np.where(rng.random(S) < 0.25, specials[rng.integers(0, 5, S)], b)
    b = np.where(b == 0, npd.type(3), b)
    if info.min:
        b = np.where((a == info.min) & (b == -1), npd.type(-2), b)
    return mx.array(a), mx.array(b)


CASES += [
    Case("elementwise.remainder_int_full_range", mx.remainder, int_division_pair, dtypes=INTS, primitives=("Remainder",)),
    Case("elementwise.floor_divide_int_full_range", mx.floor_divide, int_division_pair, dtypes=INTS, primitives=("FloorDivide",)),
    Case("elementwise.divmod_int_full_range", lambda a, b: mx.divmod(a, b), int_division_pair, dtypes=INTS, primitives=("DivMod",)),
    Case("elementwise.remainder_small_unsigned", mx.remainder, nonzero_pair, dtypes=UNSIGNED, primitives=("Remainder",)),
    Case("elementwise.floor_divide_small_unsigned", mx.floor_divide, nonzero_pair, dtypes=UNSIGNED, primitives=("FloorDivide",)),
    Case("elementwise.remainder_edges", mx.remainder, nonzero_pair, dtypes=FLOATS, primitives=("Remainder",), edges=True),
    Case("elementwise.floor_divide_edges", mx.floor_divide, nonzero_pair, dtypes=FLOATS, primitives=("FloorDivide",), edges=True),
    Case("elementwise.divmod_edges", lambda a, b: mx.divmod(a, b), nonzero_pair, dtypes=FLOATS, primitives=("DivMod",), edges=True),
    # MLX 0.32.4 promotes integer divide to float: AsType then a float Divide
    Case("elementwise.divide_int", mx.divide, int_division_pair, dtypes=INTS, primitives=("AsType", "Divide")),
    Case("elementwise.divide_edges", mx.divide, two(), dtypes=FLOATS, primitives=("Divide",), edges=True),
    Case("elementwise.maximum_nan_all_floats", mx.maximum, two(), dtypes=FLOATS, primitives=("Maximum",), edges=True),
    Case("elementwise.minimum_nan_all_floats", mx.minimum, two(), dtypes=FLOATS, primitives=("Minimum",), edges=True),
    Case("elementwise.maximum_int_extremes", mx.maximum, two(-50, 50), dtypes=INTS, primitives=("Maximum",), edges=True),
    Case("elementwise.minimum_int_extremes", mx.minimum, two(-50, 50), dtypes=INTS, primitives=("Minimum",), edges=True),
]


# -- Round half to even ----------------------------------------------------------------
def halves(rng, dt):
    """k + 0.5 for random integers k of both signs (ties), with +-0.5 and +-1.5 planted."""
    values = rng.integers(-50, 50, size=S) + 0.5
    values.flat[:4] = (0.5, -0.5, 1.5, -1.5)
    return (mx.array(values.astype(np.float32)).astype(dt),)


CASES += [
    Case("elementwise.round_half_to_even", mx.round, halves, dtypes=FLOATS, primitives=("Round",), tolerances={"float32": (0, 0)}),
    Case("elementwise.round_int", mx.round, one(-100, 100), dtypes=INTS, primitives=("Round",)),
]


# -- AsType corners --------------------------------------------------------------------
def short(dt):
    return str(dt).rsplit(".", 1)[-1]


def ints_full(rng, dt):
    npd = np.dtype(short(dt))
    info = np.iinfo(npd)
    return (mx.array(rng.integers(info.min, info.max, size=S, endpoint=True, dtype=npd)),)


def bools(rng, dt):
    return (mx.array(rng.random(S) < 0.5),)


def fractions(lo, hi):
    """Floats with fractional parts, in a range that every target type holds."""
    return lambda rng, dt: (rand(rng, S, dt, lo, hi),)


CASES += [
    Case(f"elementwise.astype_{short(src)}_to_{short(dst)}_wraps", (lambda t: lambda x: x.astype(t))(dst), ints_full,
         dtypes=(src,), primitives=("AsType",), edges=True)
    for src in INTS for dst in INTS + (mx.float32,) if src != dst
]
CASES += [
    Case(f"elementwise.astype_float_to_{short(dst)}_truncates", (lambda t: lambda x: x.astype(t))(dst),
         fractions(0, 200) if dst in UNSIGNED else fractions(-100, 100), dtypes=FLOATS, primitives=("AsType",))
    for dst in INTS
]
CASES += [
    Case(f"elementwise.astype_bool_to_{short(dst)}", (lambda t: lambda x: x.astype(t))(dst), bools,
         dtypes=(mx.bool_,), primitives=("AsType",))
    for dst in FLOATS + INTS
]
CASES += [
    Case("elementwise.astype_nan_to_bool_all_floats", lambda x: x.astype(mx.bool_), one(), dtypes=FLOATS, primitives=("AsType",), edges=True),
    Case("elementwise.astype_int_to_bool", lambda x: x.astype(mx.bool_), one(-2, 2), dtypes=INTS, primitives=("AsType",), edges=True),
    Case("elementwise.astype_f32_to_f16_overflow", lambda x: x.astype(mx.float16), one(-1e5, 1e5), primitives=("AsType",), edges=True),
    Case("elementwise.astype_f32_to_bf16_edges", lambda x: x.astype(mx.bfloat16), one(-1e5, 1e5), primitives=("AsType",), edges=True),
    Case("elementwise.astype_f16_bf16_edges", lambda x: x.astype(mx.bfloat16), one(-100, 100), dtypes=(mx.float16,), primitives=("AsType",), edges=True),
    Case("elementwise.astype_bf16_to_f16_edges", lambda x: x.astype(mx.float16), one(-100, 100), dtypes=(mx.bfloat16,), primitives=("AsType",), edges=True),
]
CASES += [
    Case("elementwise.negative_int_extremes", mx.negative, one(-100, 100), dtypes=INTS, primitives=("Negative",), edges=True),
    Case("elementwise.abs_int_extremes", mx.abs, one(-100, 100), dtypes=SIGNED, primitives=("Abs",), edges=True),
    Case("elementwise.square_int_wraps", mx.square, one(-100, 100), dtypes=INTS, primitives=("Square",), edges=True),
    Case("elementwise.multiply_int_wraps", mx.multiply, two(-100, 100), dtypes=INTS, primitives=("Multiply",), edges=True),
    Case("elementwise.subtract_int_wraps", mx.subtract, two(-100, 100), dtypes=INTS, primitives=("Subtract",), edges=True),
    Case("elementwise.sign_unsigned", mx.sign, one(0, 5), dtypes=UNSIGNED, primitives=("Sign",), edges=True),
]
CASES += [
    Case("elementwise.log1p_near_zero", mx.log1p, one(-1e-3, 1e-3), dtypes=FLOATS, primitives=("Log1p",),
         tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.expm1_near_zero", mx.expm1, one(-1e-3, 1e-3), dtypes=FLOATS, primitives=("Expm1",),
         tolerances={"float32": (0, 1e-6)}),
    Case("elementwise.expm1_large", mx.expm1, one(-100, 100), dtypes=FLOATS, primitives=("Expm1",)),
]
