"""Parity cases: Reduce (all types), ArgReduce, Softmax, LogSumExp, Scan and the Reduce
chains of mean/var/std/norms."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from tests.support.harness import FLOATS, INTS, Case, positive, rand

S = (2, 3, 4)
BOOL = (mx.bool_,)
ALL = FLOATS + INTS + BOOL
EXACT_FLOATS = {"float32": (0.0, 0.0), "float16": (0.0, 0.0), "bfloat16": (0.0, 0.0)}


def one(shape=S, lo=-3.0, hi=3.0):
    return lambda rng, dt: (rand(rng, shape, dt, lo, hi),)


def ties(shape=S):
    """Few distinct values (many ties), with +0.0 and -0.0 among them for floats."""
    def make(rng, dt):
        x = rand(rng, shape, dt, 0, 2) if dt != mx.bool_ else rand(rng, shape, dt)
        if dtypes_is_float(dt):
            x = mx.where(x == 0, mx.array(-0.0, dt) if rng.random() < 0.5 else mx.array(0.0, dt), x)
        return (x,)
    return make


def dtypes_is_float(dt):
    return dt in (mx.float32, mx.float16, mx.bfloat16)


def rows_of(value):
    """Random floats with one random row all ``value`` and one row holding ``value`` once."""
    def make(rng, dt):
        x = np.array(rand(rng, (4, 6), mx.float32), dtype=np.float32)
        r = rng.permutation(4)
        x[r[0]] = value
        x[r[1], rng.integers(0, 6)] = value
        return (mx.array(x).astype(dt),)
    return make


def signed_prod(rng, dt):
    x = positive(rng, S, dt, 0.5, 1.5)
    return (x * mx.where(rand(rng, S, mx.bool_), 1, -1).astype(dt),)


REDUCTIONS = [
    ("sum", mx.sum), ("prod", mx.prod), ("max", mx.max), ("min", mx.min), ("all", mx.all), ("any", mx.any),
]
AXES = [("all", None), ("ax0", 0), ("ax1", 1), ("ax02", (0, 2)), ("axm1", -1)]

CASES = []
for name, fn in REDUCTIONS:
    for axname, axis in AXES:
        CASES.append(Case(
            f"reduce.{name}_{axname}", (lambda f, a: lambda x: f(x, axis=a))(fn, axis),
            signed_prod if name == "prod" else one(), dtypes=FLOATS, primitives=("Reduce",)))
    CASES += [
        Case(f"reduce.{name}_int", (lambda f: lambda x: f(x, axis=(0, 2)))(fn), one(lo=-3, hi=3), dtypes=INTS + BOOL,
             primitives=("Reduce",)),
        # integer extremes: sums and products wrap, uint64 min/max keep their order
        Case(f"reduce.{name}_int_edges", (lambda f: lambda x: f(x, axis=1))(fn), one(lo=-100, hi=100),
             dtypes=INTS, primitives=("Reduce",), edges=True),
        # NaN propagates through min/max, NaN counts as true for all/any, inf - inf is NaN
        Case(f"reduce.{name}_edges", (lambda f: lambda x: f(x, axis=-1))(fn), one(), dtypes=FLOATS,
             primitives=("Reduce",), edges=True),
    ]
    # No parity case reduces over an empty axis: MLX 0.32's CPU reductions of empty arrays
    # read uninitialised memory (and can spin for minutes); the export's identity results
    # are checked without MLX in tests/translate/test_fuzz.py.

CASES += [
    Case("reduce.sum_int8_wide", lambda x: mx.sum(x, axis=0), one(shape=(40, 3), lo=100, hi=127),
         dtypes=(mx.int8, mx.uint8, mx.int16), primitives=("Reduce",)),
    Case("reduce.prod_uint8", lambda x: mx.prod(x, axis=1), one(shape=(3, 6), lo=100, hi=255), dtypes=(mx.uint8, mx.int8),
         primitives=("Reduce",)),
    Case("reduce.mean", lambda x: mx.mean(x, axis=1), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.mean_int", lambda x: mx.mean(x, axis=(0, 1)), one(lo=-50, hi=50), dtypes=(mx.int32, mx.uint8, mx.int8),
         primitives=("Reduce",)),
    Case("reduce.var", lambda x: mx.var(x, axis=-1), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.var_ddof", lambda x: mx.var(x, axis=(0, 2), ddof=1), one(), primitives=("Reduce",)),
    Case("reduce.std", lambda x: mx.std(x), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.norm", lambda x: mx.linalg.norm(x), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.norm_l1", lambda x: mx.linalg.norm(x, ord=1, axis=1), one(), primitives=("Reduce",)),
    Case("reduce.norm_inf", lambda x: mx.linalg.norm(x, ord=float("inf"), axis=-1), one(), primitives=("Reduce",)),
    Case("reduce.norm_fro", lambda x: mx.linalg.norm(x[0], ord="fro"), one(), primitives=("Reduce",)),
    Case("reduce.mean_edges", lambda x: mx.mean(x, axis=0), one(), primitives=("Reduce",), edges=True),
]

# -- Softmax, LogSumExp -------------------------------------------------------------------
CASES += [
    Case("reduce.softmax", lambda x: mx.softmax(x, axis=-1), one(lo=-8, hi=8), dtypes=FLOATS, primitives=("Softmax",),
         onnx_ops=("Softmax",)),
    Case("reduce.softmax_precise", lambda x: mx.softmax(x, axis=-1, precise=True), one(lo=-8, hi=8), dtypes=FLOATS,
         primitives=("Softmax",)),
    Case("reduce.softmax_large", lambda x: mx.softmax(x, axis=-1), one(shape=(3, 7), lo=-200, hi=200), dtypes=FLOATS,
         primitives=("Softmax",)),
    Case("reduce.softmax_edges", lambda x: mx.softmax(x, axis=-1), one(), dtypes=FLOATS, primitives=("Softmax",), edges=True),
    Case("reduce.softmax_neg_inf_rows", lambda x: mx.softmax(x, axis=-1), rows_of(-np.inf), dtypes=FLOATS,
         primitives=("Softmax",)),
    Case("reduce.softmax_axis0", lambda x: mx.softmax(x, axis=0), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.logsumexp", lambda x: mx.logsumexp(x, axis=-1), one(lo=-8, hi=8), dtypes=FLOATS,
         primitives=("LogSumExp",)),
    Case("reduce.logsumexp_large", lambda x: mx.logsumexp(x, axis=-1, keepdims=True), one(lo=900, hi=1000),
         primitives=("LogSumExp",), tolerances={"float32": (0, 1e-6)}),
    Case("reduce.logsumexp_edges", lambda x: mx.logsumexp(x, axis=-1), one(), dtypes=FLOATS, primitives=("LogSumExp",),
         edges=True),
    Case("reduce.logsumexp_neg_inf_rows", lambda x: mx.logsumexp(x, axis=-1), rows_of(-np.inf), dtypes=FLOATS,
         primitives=("LogSumExp",)),
    Case("reduce.logsumexp_pos_inf_rows", lambda x: mx.logsumexp(x, axis=-1), rows_of(np.inf), dtypes=FLOATS,
         primitives=("LogSumExp",)),
    Case("reduce.logsumexp_nan_rows", lambda x: mx.logsumexp(x, axis=-1), rows_of(np.nan), primitives=("LogSumExp",)),
    Case("reduce.logsumexp_axis0", lambda x: mx.logsumexp(x, axis=0), one(), dtypes=FLOATS, primitives=("Reduce",)),
    Case("reduce.logsumexp_all", lambda x: mx.logsumexp(x), one(), primitives=("Reduce",)),
    Case("reduce.log_softmax", lambda x: x - mx.logsumexp(x, axis=-1, keepdims=True), one(), dtypes=FLOATS,
         primitives=("LogSumExp",)),
]

# -- ArgReduce ------------------------------------------------------------------------------
CASES += [
    Case(f"reduce.{name}_{axname}", (lambda f, a: lambda x: f(x, axis=a))(fn, axis), one(), dtypes=FLOATS + INTS,
         primitives=("ArgReduce",), onnx_ops=(op,))
    for name, fn, op in (("argmax", mx.argmax, "ArgMax"), ("argmin", mx.argmin, "ArgMin"))
    for axname, axis in (("all", None), ("ax0", 0), ("ax2", 2))
]
CASES += [
    Case(f"reduce.{name}_{kind}", (lambda f: lambda x: f(x, axis=1, keepdims=True))(fn), make, dtypes=dts,
         primitives=("ArgReduce",), edges=edge)
    for name, fn in (("argmax", mx.argmax), ("argmin", mx.argmin))
    for kind, make, dts, edge in (
        ("ties", ties(), ALL, False),  # first index of the extreme; -0.0 ties +0.0
        ("edges", one(shape=(4, 9)), FLOATS + INTS, True),  # first NaN wins; integer extremes
        ("nan_rows", rows_of(np.nan), FLOATS, False),
    )
]

# -- Scan -----------------------------------------------------------------------------------
SCANS = [("cumsum", mx.cumsum), ("cumprod", mx.cumprod), ("cummax", mx.cummax), ("cummin", mx.cummin)]
VARIANTS = [("", {}), ("_rev", {"reverse": True}), ("_excl", {"inclusive": False}),
            ("_rev_excl", {"reverse": True, "inclusive": False})]
ONNX_SCAN = {"cumsum": "CumSum", "cumprod": "CumProd"}


def scan_inputs(name, shape=(3, 6)):
    if name == "cumprod":
        return lambda rng, dt: signed_prod_shape(rng, dt, shape)
    return one(shape=shape, lo=-20, hi=20)


def signed_prod_shape(rng, dt, shape):
    if not dtypes_is_float(dt):
        return (rand(rng, shape, dt, -3, 3),)
    x = positive(rng, shape, dt, 0.5, 2)
    return (x * mx.where(rand(rng, shape, mx.bool_), 1, -1).astype(dt),)


for name, fn in SCANS:
    for suffix, kw in VARIANTS:
        for axis in (0, 1):
            CASES.append(Case(
                f"reduce.{name}{suffix}_ax{axis}", (lambda f, a, k: lambda x: f(x, axis=a, **k))(fn, axis, kw),
                scan_inputs(name), dtypes=FLOATS, primitives=("Scan",), tolerances=EXACT_FLOATS))
    CASES += [
        # integer sums and products wrap in the input dtype (bool sums count in int32)
        Case(f"reduce.{name}_int", (lambda f: lambda x: f(x, axis=1))(fn), scan_inputs(name), dtypes=INTS + BOOL,
             primitives=("Scan",)),
        Case(f"reduce.{name}_int_edges", (lambda f: lambda x: f(x, axis=0, reverse=True, inclusive=False))(fn),
             scan_inputs(name, (5, 3)), dtypes=INTS, primitives=("Scan",), edges=True),
        # NaN propagates forward from where it appears; inf + -inf is NaN
        Case(f"reduce.{name}_edges", (lambda f: lambda x: f(x, axis=-1))(fn), one(shape=(4, 7)), dtypes=FLOATS,
             primitives=("Scan",), edges=True, tolerances=EXACT_FLOATS),
        Case(f"reduce.{name}_flat", (lambda f: lambda x: f(x))(fn), scan_inputs(name, (2, 3, 2)), dtypes=FLOATS,
             primitives=("Scan",), tolerances=EXACT_FLOATS),
        Case(f"reduce.{name}_3d", (lambda f: lambda x: f(x, axis=1, reverse=True))(fn), scan_inputs(name, (2, 5, 3)),
             dtypes=(mx.float32, mx.int32), primitives=("Scan",), tolerances=EXACT_FLOATS),
        Case(f"reduce.{name}_empty", (lambda f: lambda x: f(x, axis=1))(fn), one(shape=(3, 0)), primitives=("Scan",)),
    ]

CASES += [
    Case("reduce.cumsum_float16_rounding", lambda x: mx.cumsum(x, axis=0), one(shape=(64, 2), lo=0, hi=200),
         dtypes=(mx.float16, mx.bfloat16), primitives=("Scan",), onnx_ops=("Scan",), tolerances=EXACT_FLOATS),
    Case("reduce.cumsum_native", lambda x: mx.cumsum(x, axis=1), one(shape=(2, 300), lo=-100, hi=100),
         dtypes=(mx.float32, mx.int8, mx.uint32), primitives=("Scan",), onnx_ops=("CumSum",), tolerances=EXACT_FLOATS),
    Case("reduce.cumprod_native", lambda x: mx.cumprod(x, axis=1), scan_inputs("cumprod", (2, 40)),
         dtypes=(mx.float32, mx.int16), primitives=("Scan",), onnx_ops=("CumProd",), opsets=(28,),
         tolerances=EXACT_FLOATS),
    Case("reduce.cummax_loop", lambda x: mx.cummax(x, axis=0), one(shape=(9, 2)), dtypes=(mx.float32,),
         primitives=("Scan",), onnx_ops=("Scan",), tolerances=EXACT_FLOATS),
]

# NumberOfElements only appears in shapeless exports: tested in tests/capture/test_number_of_elements.py
COVERS = {"NumberOfElements"}
