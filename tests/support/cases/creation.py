"""Parity cases: creation primitives (Arange in every dtype MLX allows, Full) and the
tri/tril/triu/eye patterns that trace into Arange, comparisons, Select and Scatter."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx.translate import registry
from tests.support.harness import FLOATS, INTS, Case, rand

ARANGE_DTYPES = FLOATS + INTS  # MLX refuses bool arange
DATA = FLOATS + (mx.int32, mx.int8, mx.uint8, mx.int64, mx.uint32, mx.bool_)
S = (3, 4)


def one(*shape, lo=0, hi=9):
    return lambda rng, dt: (rand(rng, shape, dt, lo, hi),)


def key(rng):
    """A random threefry key: uint32[2] with bits over the whole range."""
    return mx.array(rng.integers(0, 2**32, size=(2,), dtype=np.uint64).astype(np.uint32))


FIXED_KEY = mx.random.key(20261202)

_SCATTER = None if registry.lookup("Scatter") else "mx.eye traces into Scatter (indexing family), no handler yet"

CASES = [
    # Arange: a constant filled by MLX itself, in every dtype
    Case("creation.arange_fractional", lambda x: x + mx.arange(0.5, 5.0, 1.25, dtype=x.dtype), one(4),
         dtypes=ARANGE_DTYPES, primitives=("Arange",)),
    Case("creation.arange_negative_step", lambda x: x + mx.arange(10, 2, -2, dtype=x.dtype), one(4),
         dtypes=ARANGE_DTYPES, primitives=("Arange",)),
    Case("creation.arange_long_float", lambda x: x + mx.arange(-3.0, 7.0, 0.1, dtype=x.dtype), one(100, lo=-1, hi=1),
         dtypes=FLOATS, primitives=("Arange",)),
    Case("creation.arange_default_int", lambda x: x * mx.arange(x.shape[0]), one(6, lo=-9, hi=9),
         dtypes=(mx.int32,), primitives=("Arange",)),
    Case("creation.arange_uint32_index", lambda x: x[:, mx.arange(1, 4, dtype=mx.uint32)], one(2, 5),
         primitives=("Arange",)),
    Case("creation.arange_empty", lambda x: mx.concatenate([x, mx.arange(5, 2, dtype=x.dtype)]), one(3),
         dtypes=(mx.float32, mx.int32), primitives=("Arange",)),
    Case("creation.arange_only_output", lambda x: (x, mx.arange(3.0, 9.0, 1.5)), one(2), primitives=("Arange",)),
    # Full
    Case("creation.full_from_element", lambda x: mx.full((2, 3), x[0, 1]), one(*S, lo=-9), dtypes=DATA,
         primitives=("Full",)),
    Case("creation.zeros_ones_like", lambda x: (mx.zeros_like(x) + x, mx.ones_like(x) * x), one(*S, lo=-9),
         dtypes=DATA, primitives=("Full",)),
    Case("creation.full_value", lambda x: x + mx.full(x.shape, 2.5, dtype=x.dtype), one(*S, lo=-9),
         dtypes=FLOATS + (mx.int32, mx.int8, mx.uint8), primitives=("Full",)),
    Case("creation.full_cast", lambda x: mx.full((3,), x[0], dtype=mx.int32) + 1, one(2, lo=-9), dtypes=FLOATS,
         primitives=("Full",)),
    Case("creation.full_zero_size", lambda x: mx.concatenate([x, mx.zeros((0, 4), dtype=x.dtype)]), one(*S),
         dtypes=(mx.float32, mx.bool_), primitives=("Full",)),
    # tri / tril / triu: Arange + ExpandDims + Broadcast + comparison (+ Select)
    Case("creation.tri", lambda x: x * mx.tri(3, 4, k=1, dtype=x.dtype), one(*S, lo=-9), dtypes=DATA,
         primitives=("Arange", "GreaterEqual")),
    Case("creation.tril", lambda x: mx.tril(x, -1), one(*S, lo=-9), dtypes=DATA, primitives=("Arange", "Select")),
    Case("creation.triu", lambda x: mx.triu(x, 1), one(4, 3, lo=-9), dtypes=DATA, primitives=("Arange", "Select")),
    Case("creation.causal_mask", lambda x: mx.where(mx.tril(mx.ones((4, 4), dtype=mx.bool_)), x, -mx.inf),
         one(4, 4, lo=-3, hi=3), dtypes=FLOATS, primitives=("Arange", "Select")),
    Case("creation.eye", lambda x: x + mx.eye(3, 4, k=1, dtype=x.dtype), one(*S, lo=-9), dtypes=DATA,
         primitives=("Full",), xfail=_SCATTER),
    # RandomBits: MLX's threefry2x32, bit-exact, from a key input. Opset 17 (XOR through
    # bit planes, ~800 nodes per draw) is checked once: random_uniform_odd.
    Case("creation.random_split", lambda k: mx.random.split(k, 3), lambda rng, dt: (key(rng),),
         dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits",)),
    Case("creation.random_uniform_odd", lambda k: mx.random.uniform(-2, 3, shape=(3, 5), key=k), lambda rng, dt: (key(rng),),
         dtypes=(mx.uint32,), primitives=("RandomBits",), tolerances={"float32": (0, 0)}),
    Case("creation.random_uniform_one", lambda k: mx.random.uniform(shape=(1,), key=k), lambda rng, dt: (key(rng),),
         dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits",), tolerances={"float32": (0, 0)}),
    Case("creation.random_uniform_dtypes", lambda k: mx.random.uniform(shape=(2, 4), key=k, dtype=mx.bfloat16),
         lambda rng, dt: (key(rng),), dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits",)),
    Case("creation.random_split_then_draw",
         lambda k: tuple(mx.random.uniform(shape=(4,), key=s) for s in mx.random.split(k, 2)),
         lambda rng, dt: (key(rng),), dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits", "Split")),
    Case("creation.random_bernoulli_randint",
         lambda k: (mx.random.bernoulli(0.3, (6,), key=k), mx.random.randint(-5, 9, (2, 3), key=k)),
         lambda rng, dt: (key(rng),), dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits",)),
    Case("creation.random_gumbel", lambda k: mx.random.gumbel((7,), key=k), lambda rng, dt: (key(rng),),
         dtypes=(mx.uint32,), opsets=(28,), primitives=("RandomBits", "Log")),
    Case("creation.random_closed_over_key", lambda x: x + mx.random.uniform(shape=x.shape, key=FIXED_KEY), one(2, 3),
         opsets=(28,), primitives=("RandomBits",)),
]
