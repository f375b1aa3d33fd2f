"""bfloat16 carried as float32 (the portable default): every value rounded where MLX rounds
it, in every runtime, bit for bit.

The float32-only rounding (translate.rounding.bfloat16_in_float32) is what tract, which has
no bfloat16 type, reads; its inputs here are random bit patterns, ties (the low 16 bits
exactly 0x8000), their neighbours, products of bfloat16 values, subnormals, signed zeros,
infinities, NaN and values next to bfloat16's largest finite one.
"""

from __future__ import annotations

import ml_dtypes
import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx import dtypes
from mlx2onnx.verify import runtimes

RUNTIMES = ("onnxruntime", "onnxruntime-web", "onnxruntime-node", "openvino", "tract")
SPECIAL = [
    0,
    0x80000000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    1,
    0x80000001,
    0x00008000,
    0x80008000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x7F7F8000,
    0x7F7F7FFF,
    0x7F7E8000,
    0x00800000,
    0x007F8000,
    0x807FFFFF,
]


def hard_floats(seed: int, n: int = 1 << 16) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
    high = bits & np.uint32(0xFFFF0000)
    ties = high | np.uint32(0x8000)
    near = high | rng.choice(np.array([0x7FFF, 0x8001, 0x0000, 0xFFFF, 0x4000], np.uint32), size=n)
    halves = rng.standard_normal(n).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    products = (halves * rng.permutation(halves)).view(np.uint32)  # 16 significant bits: ties are common
    return np.concatenate([bits, ties, near, products, np.array(SPECIAL, np.uint32)]).view(np.float32)


def _run(runtime: str, proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    if not runtimes.available(runtime):
        pytest.skip(f"{runtime} is not installed: {runtimes.install_hint(runtime)}")
    with runtimes.open_runtime(runtime, proto.SerializeToString()) as runner:
        return runner.run(feeds, [o.name for o in proto.graph.output])


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where the float32 bits differ (any NaN matches any NaN)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return ~((got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want)))


def _assert_bits(got, want, x):
    bad = _same_bits(got, want)
    assert not bad.any(), f"{bad.sum()} differ, e.g. x={x[bad][:4]} got {np.asarray(got)[bad][:4]} MLX {want[bad][:4]}"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_the_float32_rounding_to_bfloat16_is_mlx_cast_in_every_runtime(runtime):
    x = hard_floats(seed=1)
    proto = mlx2onnx.Exporter().export(lambda v: v.astype(mx.bfloat16), mx.array(x))
    assert not any(n.op_type == "Cast" for n in proto.graph.node), "the portable rounding spells no bfloat16 Cast"
    (got,) = _run(runtime, proto, {proto.graph.input[0].name: x})
    want = dtypes.array_to_numpy(mx.array(x).astype(mx.bfloat16)).astype(np.float32)
    _assert_bits(got, want, x)


ALL_BFLOAT16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)


def _every_bfloat16() -> mx.array:
    return dtypes.numpy_to_array(ALL_BFLOAT16)


UNARY = {
    "sigmoid": mx.sigmoid,  # MLX: y = 1 / (1 + exp(|x|)) with exp rounded; y below 0, 1 - y above
    "rsqrt": mx.rsqrt,  # MLX: 1 / sqrt(x) with the root rounded
    "silu": lambda v: v * mx.sigmoid(v),
    "sqrt": mx.sqrt,
    "log1p": mx.log1p,
    "tanh": mx.tanh,
}
# MLX's CPU exp is a polynomial (not correctly rounded): where its exp(|x|) lands on the
# other side of a bfloat16 rounding boundary, sigmoid differs by one bfloat16 unit (and
# x * sigmoid(x) by up to two): (how many values may differ, by at most how many units)
EXP_BOUNDARY_FLIPS = {"sigmoid": (1, 1), "silu": (1, 2)}


@pytest.mark.parametrize("bfloat16", ["emulate", "keep"])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_bfloat16_unary_ops_round_like_mlx_on_every_value(name, bfloat16):
    """Every bfloat16 value through the op, exported with bfloat16 emulated in float32 and
    kept, against MLX's own results bit for bit."""
    fn = UNARY[name]
    x = _every_bfloat16()
    proto = mlx2onnx.Exporter(bfloat16=bfloat16).export(fn, x)
    feed = ALL_BFLOAT16 if bfloat16 == "keep" else ALL_BFLOAT16.astype(np.float32)
    (got,) = _run("onnxruntime", proto, {proto.graph.input[0].name: feed})
    want = dtypes.array_to_numpy(fn(x)).astype(np.float32)
    got = np.asarray(got).astype(np.float32)
    if name in EXP_BOUNDARY_FLIPS:
        count, most = EXP_BOUNDARY_FLIPS[name]
        bad = _same_bits(got, want)
        units = np.abs(got.view(np.int32)[bad].astype(np.int64) - want.view(np.int32)[bad]) >> 16
        assert bad.sum() <= count and np.all(units <= most), f"{bad.sum()} differ by {units} bfloat16 units"
        got = np.where(bad, want, got)
    _assert_bits(got, want, ALL_BFLOAT16.astype(np.float32))


def _chain(a, b, c):
    h = a * b + c
    h = h / (mx.abs(c) + 1)
    h = mx.exp(-mx.abs(h)) - a
    return mx.sum(h * b, axis=-1, keepdims=True) * h


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_emulated_bfloat16_rounds_after_every_op_in_every_runtime(runtime):
    """MLX rounds the result of each bfloat16 op; the "emulate" policy rounds each the same
    way in float32, so a chain of ops ends bit for bit where MLX does."""
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((8, 64)).astype(np.float32) for _ in range(3)]
    bf = [mx.array(a).astype(mx.bfloat16) for a in arrays]
    proto = mlx2onnx.Exporter(bfloat16="emulate").export(_chain, *bf)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    feeds = {i.name: dtypes.array_to_numpy(v).astype(np.float32) for i, v in zip(proto.graph.input, bf)}
    (got,) = _run(runtime, proto, feeds)
    want = dtypes.array_to_numpy(_chain(*bf)).astype(np.float32)
    _assert_bits(got, want, feeds[proto.graph.input[0].name])


def test_float32_carriage_rounds_only_where_mlx_casts():
    """The default float32 carriage computes in float32 between casts: closer to the exact
    values than MLX's bfloat16 arithmetic, within bfloat16's tolerance of it, and a cast
    out of bfloat16 still reads the rounded value."""
    rng = np.random.default_rng(4)
    bf = [mx.array(rng.standard_normal((8, 64)).astype(np.float32)).astype(mx.bfloat16) for _ in range(3)]
    plain = mlx2onnx.Exporter().export(_chain, *bf)
    emulated = mlx2onnx.Exporter(bfloat16="emulate").export(_chain, *bf)
    assert len(plain.graph.node) * 3 < len(emulated.graph.node)
    report = mlx2onnx.verify(plain, _chain, *bf)
    assert report.passed and report.outputs[0].max_abs_error > 0, str(report)
    to_int = lambda v: (v * 3).astype(mx.int32)  # noqa: E731  (bf16 product, then truncation)
    x = mx.array(rng.standard_normal(4096).astype(np.float32) * 50).astype(mx.bfloat16)
    proto = mlx2onnx.Exporter().export(to_int, x)
    assert mlx2onnx.Verifier(random_inputs=False).verify(proto, to_int, x).passed


def test_float32_outputs_computed_through_bfloat16_are_checked_at_bfloat16_precision():
    """A float32 output computed from bfloat16 activations inherits their rounding: the
    export records it, and the check compares that output under bfloat16's tolerance."""
    from mlx2onnx.io import metadata

    w = mx.array(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))

    def mixed(x):
        through = (x.astype(mx.bfloat16) @ w.astype(mx.bfloat16)).astype(mx.float32) @ w
        weights_only = x @ w.astype(mx.bfloat16).astype(mx.float32)  # bfloat16 weights, float32 compute
        return through, weights_only

    x = mx.random.normal((4, 16))
    proto = mlx2onnx.Exporter().export(mixed, x)
    outputs = metadata.read(proto).outputs
    assert outputs[0].precision == "bfloat16" and outputs[1].precision is None
    report = mlx2onnx.verify(proto, mixed, x)
    assert report.passed, str(report)
    assert [o.dtype for o in report.outputs] == ["float32(bfloat16)", "float32"]
    assert (report.outputs[0].atol, report.outputs[0].rtol) == (1e-1, 5e-2)


def test_emulated_float16_rounds_after_every_op():
    """float16="emulate": float16 carried as float32 and rounded (Cast pairs) after every
    op ends bit for bit where MLX's float16 arithmetic does."""
    rng = np.random.default_rng(5)
    halves = [mx.array(rng.standard_normal((8, 64)).astype(np.float32)).astype(mx.float16) for _ in range(3)]
    proto = mlx2onnx.Exporter(float16="emulate").export(_chain, *halves)
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    feeds = {i.name: np.array(v).astype(np.float32) for i, v in zip(proto.graph.input, halves)}
    (got,) = _run("onnxruntime", proto, feeds)
    _assert_bits(got, np.array(_chain(*halves)).astype(np.float32), feeds[proto.graph.input[0].name])
