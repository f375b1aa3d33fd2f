"""Quantized export beyond the parity table: on-disk size of a 4-bit LM against its
float16 export, the export-time dequantize option, Quantize(dequantize=True) records
(traced only on a GPU stream) and the refusals."""

from __future__ import annotations

import os

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest
from mlx.utils import tree_flatten

import mlx2onnx
from mlx2onnx.errors import ConversionError
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from tests.support.harness import Arg, export_and_run, record_trace, rng_for

OPSETS = sorted({default_opset(), MIN_OPSET})
TINY_LM = dict(vocab_size=512, hidden_size=256, layers=2, heads=4, kv_heads=2, intermediate_size=512)


def tiny_lm(quantize: bool):
    from models import llama

    model = llama.build(0, **TINY_LM)
    model.set_dtype(mx.float16)
    if quantize:
        nn.quantize(model, group_size=64, bits=4)
    mx.eval(model.parameters())
    return model


def token_ids(seed=0):
    rng = rng_for("quantized.tiny_lm", seed)
    return mx.array(rng.integers(0, TINY_LM["vocab_size"], size=(1, 8)).astype(np.int32))


@pytest.mark.slow
def test_4bit_lm_stays_packed_on_disk(tmp_path):
    """A 4-bit (group 64, float16 scales and biases) llama-style LM: every quantized Linear
    is stored as 4-bit blocks (MatMulNBits, two codes a byte; a layer's products of one input
    stacked into one), the tied embedding once (its rows gathered from the head's blocks),
    the file is about a third of the float16 export
    (4 bits per weight, float32 scales and biases, graph and norms), and it matches MLX in a
    default session."""
    ids = token_ids()
    model = tiny_lm(quantize=True)
    packed = mlx2onnx.Exporter(path=tmp_path / "q4.onnx").export(model, ids)
    mlx2onnx.Exporter(path=tmp_path / "f16.onnx").export(tiny_lm(quantize=False), ids)
    q4_size, f16_size = os.path.getsize(tmp_path / "q4.onnx"), os.path.getsize(tmp_path / "f16.onnx")
    ratio = q4_size / f16_size
    print(f"4-bit LM: {q4_size} bytes, float16 LM: {f16_size} bytes, ratio {ratio:.3f}")
    assert ratio < 0.4, ratio
    blocks = [t for t in packed.graph.initializer if t.data_type == onnx.TensorProto.UINT8 and len(t.dims) == 3]
    # per block q/k/v, o, gate/up, down: 4 products x 2 blocks + the tied head
    assert len(blocks) == 9, [t.name for t in blocks]
    assert sum(n.op_type == "MatMulNBits" for n in packed.graph.node) == 9
    words = [
        t
        for t in packed.graph.initializer
        if t.data_type in (onnx.TensorProto.UINT32, onnx.TensorProto.UINT8) and len(t.dims) == 2
    ]
    assert words == []  # no second table of the embedding's codes
    head = [n for n in packed.graph.node if n.op_type == "MatMulNBits"][-1]  # the last product
    assert any(n.op_type == "Gather" and n.input[0] == head.input[1] for n in packed.graph.node)
    report = mlx2onnx.Verifier(random_inputs=False).verify(tmp_path / "q4.onnx", model, ids)
    assert report.passed and not report.arithmetic, str(report)


def qmlp(dtype):
    mx.random.seed(11)
    model = nn.Sequential(nn.Linear(64, 96), nn.GELU(), nn.Linear(96, 32))
    model.set_dtype(dtype)
    nn.quantize(model, group_size=32, bits=4)
    mx.eval(model.parameters())
    return model


def ops_of(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_dequantize_at_export(opset, dtype):
    model = qmlp(dtype)
    x = mx.array(rng_for("dequantize", opset).standard_normal((3, 64)).astype(np.float32)).astype(dtype)
    proto = mlx2onnx.Exporter(opset=opset, quantized_weights="dequantize").export(model, x)
    assert "BitShift" not in ops_of(proto) and "QuantizedMatmul" in mlx2onnx.capture(model, (x,), {}).primitive_counts()
    report = mlx2onnx.Verifier(random_inputs=False).verify(proto, model, x)
    assert report.passed, str(report)


def test_packed_is_the_default():
    model = qmlp(mx.float32)
    proto = mlx2onnx.export(model, mx.zeros((1, 64)))
    packed = sum(v.nbytes for k, v in tree_flatten(model.parameters()) if k.endswith(".weight"))
    stored = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer}
    assert sum(a.size for a in stored.values() if a.dtype == np.uint8 and a.ndim == 3) == packed  # 4-bit blocks
    assert max(a.size for a in stored.values() if a.dtype == np.float32) < packed // 4  # no unpacked copy
    levels = [
        next(a.i for a in n.attribute if a.name == "accuracy_level")
        for n in proto.graph.node
        if n.op_type == "MatMulNBits"
    ]
    assert levels == [0, 0]  # float32 arithmetic, whatever the session's settings


def test_unknown_option_is_refused():
    with pytest.raises(mlx2onnx.ExportOptionError, match="quantized_weights='int4'"):
        mlx2onnx.Exporter(quantized_weights="int4").export(qmlp(mx.float32), mx.zeros((1, 64)))


def _experts(rng):
    """A 4-bit mixture of 4 experts ``moe(x, experts)`` and its example: 5 tokens, each routed to one."""
    wq, scales, biases = mx.quantize(
        mx.array(rng.standard_normal((4, 32, 64)).astype(np.float32)), group_size=32, bits=4
    )
    mx.eval(wq, scales, biases)

    def moe(x, experts):
        return mx.gather_qmm(x, wq, scales, biases, rhs_indices=experts, transpose=True, group_size=32, bits=4)

    x = mx.array(rng.standard_normal((5, 1, 64)).astype(np.float32))
    return moe, x, mx.array(rng.integers(0, 4, size=(5,)).astype(np.uint32))


@pytest.mark.parametrize("opset", OPSETS)
def test_gather_qmm_dequantized_experts(opset):
    moe, x, experts = _experts(rng_for("moe", opset))
    proto = mlx2onnx.Exporter(opset=opset, quantized_weights="dequantize").export(moe, x, experts)
    assert "BitShift" not in ops_of(proto)
    report = mlx2onnx.Verifier(random_inputs=False).verify(proto, moe, x, experts)
    assert report.passed, str(report)


@pytest.mark.parametrize("weights", ["packed", "dequantizelinear"])
def test_gather_qmm_of_a_dynamic_token_count(weights):
    """Packed experts picked per token of a dynamic count (an MoE layer's routed rows at
    any batch and sequence), the codes unpacked in the graph: one graph for every count,
    equal to MLX at sizes no trace used."""
    moe, x, experts = _experts(rng_for("moe.dynamic"))
    exporter = mlx2onnx.Exporter(quantized_weights=weights, dynamic={"x": {0: "tokens"}, "experts": {0: "tokens"}})
    proto = exporter.export(moe, x, experts)
    report = mlx2onnx.Verifier(sizes={"tokens": [1, 3, 17]}).verify(proto, moe, x, experts)
    assert report.passed, str(report)


# -- hand-built records ---------------------------------------------------------------
def hand_built(name, arguments, operands, outputs):
    """The trace of record ``name`` on NumPy ``operands`` (graph inputs x0, x1, ...) and its feeds."""
    return record_trace(name, arguments, [Arg(f"x{k}", mx.array(a)) for k, a in enumerate(operands)], outputs)


def run(trace, feeds, opset):
    return export_and_run(trace, feeds, mlx2onnx.Exporter(opset=opset, bfloat16="keep"))[1]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize(
    "mode, bits, group_size",
    [
        ("affine", 2, 32),
        ("affine", 3, 64),
        ("affine", 4, 32),
        ("affine", 5, 32),
        ("affine", 6, 128),
        ("affine", 8, 64),
        ("mxfp4", 4, 32),
        ("mxfp8", 8, 32),
        ("nvfp4", 4, 16),
    ],
)
def test_dequantize_record(opset, mode, bits, group_size):
    """Quantize(dequantize=True), which MLX traces only on a GPU stream, against
    mx.dequantize on the CPU for random packed words."""
    rng = rng_for("dequantize_record", mode, bits, group_size, opset)
    rows, cols = 4, 2 * group_size
    words = rng.integers(0, 2**32, size=(rows, cols * bits // 32), dtype=np.uint64).astype(np.uint32)
    code = {"affine": 0, "mxfp4": 1, "mxfp8": 2, "nvfp4": 3}[mode]
    if mode == "affine":
        scales = (rng.standard_normal((rows, cols // group_size)) / (1 << bits)).astype(np.float32)
        biases = rng.standard_normal(scales.shape).astype(np.float32)
        operands = [words, scales, biases]
        expected = mx.dequantize(mx.array(words), mx.array(scales), mx.array(biases), group_size=group_size, bits=bits)
    else:
        low, high = (100, 140) if mode != "nvfp4" else (0, 127)  # E8M0 near 1 / finite E4M3
        scales = rng.integers(low, high, size=(rows, cols // group_size)).astype(np.uint8)
        operands = [words, scales]
        expected = mx.dequantize(
            mx.array(words), mx.array(scales), group_size=group_size, bits=bits, mode=mode, dtype=mx.float32
        )
    (got,) = run(*hand_built("Quantize", [group_size, bits, code, True], operands, [((rows, cols), mx.float32)]), opset)
    np.testing.assert_allclose(got, np.array(expected), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("bits", [3, 4, 8])
def test_quantize_record_matches_mlx_bits(opset, bits):
    """The runtime affine Quantize graph gives MLX's words, scales and biases bit for bit."""
    rng = rng_for("quantize_record", bits, opset)
    w = (rng.standard_normal((6, 128)) * 3).astype(np.float32)
    words, scales, biases = (np.array(a) for a in mx.quantize(mx.array(w), group_size=64, bits=bits))
    trace, feeds = hand_built(
        "Quantize",
        [64, bits, 0, False],
        [w],
        [(words.shape, mx.uint32), (scales.shape, mx.float32), (biases.shape, mx.float32)],
    )
    got = run(trace, feeds, opset)
    for a, b in zip(got, (words, scales, biases)):
        np.testing.assert_array_equal(a, b)


def test_runtime_fp_quantize_is_refused():
    rng = rng_for("fp_quantize")
    trace, _ = hand_built(
        "Quantize",
        [32, 4, 1, False],
        [rng.standard_normal((4, 64)).astype(np.float32)],
        [((4, 8), mx.uint32), ((4, 2), mx.uint8)],
    )
    with pytest.raises(ConversionError, match=r"mode=1 \(mxfp4\)"):
        mlx2onnx.Exporter().trace_to_ir(trace)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ([64, 7, 0, True], "bits=7"),
        ([64, 4, 5, True], "mode=5"),
        ([64, 8, 1, True], "bits=8 is not supported for mxfp4"),
    ],
)
def test_bad_quantized_matmul_arguments(arguments, message):
    rng = rng_for("bad_qmm", *arguments)
    operands = [
        rng.standard_normal((2, 64)).astype(np.float32),
        rng.integers(0, 2**32, (8, 8), dtype=np.uint64).astype(np.uint32),
        rng.standard_normal((8, 1)).astype(np.float32),
        rng.standard_normal((8, 1)).astype(np.float32),
    ]
    trace, _ = hand_built("QuantizedMatmul", arguments, operands, [((2, 8), mx.float32)])
    with pytest.raises(ConversionError, match=message):
        mlx2onnx.Exporter().trace_to_ir(trace)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.bfloat16])
def test_packed_blocks_at_every_opset_and_width(opset, bits, dtype):
    """The default 4-bit blocks: onnxruntime's contrib MatMulNBits (4-bit nibbles, zero
    points 0, float32 compute, MLX's bias as a group-sum product) at every opset and bit
    width; parity at the default tolerances."""
    mx.random.seed(5)
    model = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32))
    model.set_dtype(dtype)
    nn.quantize(model, group_size=64, bits=bits)
    mx.eval(model.parameters())
    x = mx.array(rng_for("nbits", bits, opset).standard_normal((3, 128)).astype(np.float32)).astype(dtype)
    proto = mlx2onnx.Exporter(opset=opset).export(model, x)
    assert "MatMulNBits" in ops_of(proto)
    report = mlx2onnx.Verifier(random_inputs=False).verify(proto, model, x)
    assert report.passed, str(report)
