"""Parity cases: BitwiseBinary (and, or, xor, left and right shifts) on every integer
width, signed and unsigned, and bool.

Values span each dtype's whole range and the integer extremes are planted; shift amounts
stay in ``[0, bits)`` because MLX leaves larger (and negative) amounts undefined.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from tests.support.harness import INTS, SIGNED, UNSIGNED, Case, with_edges

S = (4, 6)


def full_range(rng, dt, shape=S):
    """Uniform over the whole range of integer dtype ``dt``, extremes planted."""
    npd = dtypes.to_numpy(dt)
    info = np.iinfo(npd)
    values = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=npd)
    return with_edges(rng, mx.array(values))


def pair(rng, dt):
    if dt == mx.bool_:
        return mx.array(rng.random(S) < 0.5), mx.array(rng.random(S) < 0.5)
    return full_range(rng, dt), full_range(rng, dt)


def shift_pair(rng, dt):
    """Full-range values and amounts in [0, bits), including 0 and bits - 1."""
    bits = dt.size * 8
    amounts = rng.integers(0, bits, size=S)
    amounts.flat[:2] = (0, bits - 1)
    return full_range(rng, dt), mx.array(amounts.astype(dtypes.to_numpy(dt)))


def shift_by_scalar(rng, dt):
    """A scalar amount broadcast over the values (the dequantize pattern)."""
    x, _ = shift_pair(rng, dt)
    return x, int(rng.integers(1, dt.size * 8))


OPS = [
    ("and", mx.bitwise_and, pair),
    ("or", mx.bitwise_or, pair),
    ("xor", mx.bitwise_xor, pair),
    ("left_shift", mx.left_shift, shift_pair),
    ("right_shift", mx.right_shift, shift_pair),
]

CASES = [
    Case(f"bitwise.{name}", fn, inputs, dtypes=INTS, primitives=("BitwiseBinary",))
    for name, fn, inputs in OPS
]
CASES += [
    Case(f"bitwise.{name}_at_opset18", fn, pair, dtypes=INTS, primitives=("BitwiseBinary",),
         onnx_ops=(f"Bitwise{name.capitalize()}",), opsets=(18,))
    for name, fn, _ in OPS[:3]
]
CASES += [
    Case(f"bitwise.{name}_bool", fn, pair, dtypes=(mx.bool_,), primitives=("BitwiseBinary",),
         onnx_ops=(name.capitalize(),))
    for name, fn, _ in OPS[:3]
]
CASES += [
    Case("bitwise.left_shift_scalar", lambda x, s: x << s, shift_by_scalar, dtypes=INTS, primitives=("BitwiseBinary",)),
    Case("bitwise.right_shift_scalar", lambda x, s: x >> s, shift_by_scalar, dtypes=INTS, primitives=("BitwiseBinary",)),
    # signed shifts through the unsigned and complement composites, below opset 28
    Case("bitwise.right_shift_at_opset27", mx.right_shift, shift_pair, dtypes=SIGNED, primitives=("BitwiseBinary",),
         opsets=(27, 18)),
    Case("bitwise.left_shift_at_opset27", mx.left_shift, shift_pair, dtypes=SIGNED, primitives=("BitwiseBinary",),
         opsets=(27,)),
    # the CPU affine-dequantize unpacking pattern: (w << s) >> k on uint32
    Case("bitwise.unpack_nibbles", lambda w: (w << 24) >> 28, lambda rng, dt: (full_range(rng, dt),),
         dtypes=(mx.uint32,) + UNSIGNED[:1], primitives=("BitwiseBinary",)),
    Case("bitwise.xor_minus_one_is_invert", lambda x: mx.bitwise_xor(x, -1), lambda rng, dt: (full_range(rng, dt),),
         dtypes=SIGNED, primitives=("BitwiseBinary",)),
]


# -- View ------------------------------------------------------------------------------
def float_bits(rng, dt):
    """Random floats with NaN, +-inf and -0.0 planted (their bits differ from +0.0's)."""
    values = rng.standard_normal((3, 8)).astype(np.float32) * 10
    return with_edges(rng, mx.array(values).astype(dt))


def any_bits(rng, dt):
    if dt == mx.bool_:
        return mx.array(rng.random((3, 8)) < 0.5)
    if dtypes.is_float(dt):
        return float_bits(rng, dt)
    return full_range(rng, dt, (3, 8))


def view_case(source, target, opsets=None, xfail=None, transposed=False):
    src, dst = dtypes.name(source), dtypes.name(target)
    fn = (lambda x: x.T.view(target)) if transposed else (lambda x: x.view(target))
    return Case(f"bitwise.view_{src}_as_{dst}" + ("_transposed" if transposed else "") + ("_refused" if xfail else ""),
                fn, lambda rng, dt: (any_bits(rng, source),), primitives=("View",),
                onnx_ops=("BitCast",) if (dtypes.is_float(source) or dtypes.is_float(target)) and not xfail else (),
                opsets=opsets, xfail=xfail)


FLOAT_OPSETS = (28, 26)
FLOAT_VIEWS = [
    (mx.float32, mx.int32), (mx.float32, mx.uint32), (mx.int32, mx.float32), (mx.float16, mx.int16),
    (mx.bfloat16, mx.uint16), (mx.uint16, mx.bfloat16), (mx.float16, mx.bfloat16), (mx.float32, mx.uint8),
    (mx.float32, mx.float16), (mx.uint8, mx.float32), (mx.float16, mx.float32), (mx.float32, mx.int64),
    (mx.int8, mx.bfloat16), (mx.float64, mx.int32), (mx.uint16, mx.float64),
]
INT_VIEWS = [
    (mx.int32, mx.uint32), (mx.uint64, mx.int64), (mx.int8, mx.uint8), (mx.int32, mx.uint8), (mx.int64, mx.int8),
    (mx.uint16, mx.int64), (mx.int8, mx.int32), (mx.uint8, mx.uint16), (mx.int16, mx.uint32), (mx.bool_, mx.uint8),
    (mx.bool_, mx.int32), (mx.int64, mx.uint16),
]
CASES += [view_case(s, t, FLOAT_OPSETS) for s, t in FLOAT_VIEWS]
CASES += [view_case(s, t) for s, t in INT_VIEWS]
CASES += [
    view_case(mx.float32, mx.uint8, FLOAT_OPSETS, transposed=True),
    view_case(mx.int32, mx.int8, transposed=True),
    # below opset 26 float bits cannot be reached: the export refuses with that reason
    view_case(mx.float32, mx.int32, (25, 17), xfail="View of float bits needs BitCast (opset 26)"),
    view_case(mx.uint8, mx.float16, (17,), xfail="View of float bits needs BitCast (opset 26)"),
]
