"""Parity cases: BitwiseBinary (and, or, xor, left and right shifts) on every integer
width, signed and unsigned, and bool.

Values span each dtype's whole range and the integer extremes are planted; shift amounts
stay in ``[0, bits)`` because MLX leaves larger (and negative) amounts undefined.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from harness import INTS, SIGNED, UNSIGNED, Case, with_edges
from mlx2onnx import dtypes

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
