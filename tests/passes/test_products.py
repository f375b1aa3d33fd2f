"""Low-bit products of one input stacked into one (mlx2onnx/passes/products.py): the same
numbers bit for bit, fewer nodes, MLX's outputs."""

from __future__ import annotations

import collections

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import mlx2onnx
from mlx2onnx import passes
from tests.support.harness import rand, rng_for


class Block(nn.Module):
    """A layer's siblings: query/key/value of one input, gate/up of another, and a lone
    product (nothing to stack it with)."""

    def __init__(self, bits: int):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(64, 64), nn.Linear(64, 32), nn.Linear(64, 32)
        self.gate, self.up, self.down = nn.Linear(64, 96), nn.Linear(64, 96), nn.Linear(96, 64)
        nn.quantize(self, group_size=32, bits=bits)

    def __call__(self, x):
        h = self.q(x) * mx.concatenate([self.k(x), self.v(x)], axis=-1)
        return self.down(nn.silu(self.gate(h)) * self.up(h))


def _without_the_pass(monkeypatch):
    kept = [p for p in passes.PIPELINE if p.name != "stack_sibling_products"]
    monkeypatch.setattr(passes, "PIPELINE", kept)


def _outputs(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("bits, int8_activations", [(4, False), (8, False), (4, True)])  # int8: 4-bit blocks only
def test_sibling_products_are_stacked_bit_for_bit(bits, int8_activations, monkeypatch):
    rng = rng_for(f"passes.products.{bits}.{int8_activations}")
    mx.random.seed(int(rng.integers(1 << 31)))
    block = Block(bits)
    mx.eval(block.parameters())
    exporter = mlx2onnx.Exporter(int8_activations=int8_activations)
    terms = 1 if bits == 4 else 2  # an 8-bit product is two 4-bit ones (its nibbles)

    def count(model, op_type):
        return collections.Counter(n.op_type for n in model.graph.node)[op_type]

    for shape in [(1, 1, 64), (3, 7, 64)]:  # a decode step and a prompt
        x = rand(rng, shape)
        stacked = exporter.export(block, x)
        onnx.checker.check_model(stacked, full_check=True)
        with monkeypatch.context() as patch:
            _without_the_pass(patch)
            separate = exporter.export(block, x)
        assert count(separate, "MatMulNBits") == 6 * terms and count(stacked, "MatMulNBits") == 3 * terms
        if bits == 4:  # each product's affine centre term (a MatMul of the group sums) stacked with it
            assert count(separate, "MatMul") == 6 and count(stacked, "MatMul") == 3
        assert len(stacked.graph.node) < len(separate.graph.node)
        fresh = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(_outputs(stacked, fresh), _outputs(separate, fresh))
        if not int8_activations:  # (int8 activations are ~1e-2 off MLX, by design: docs/options.md)
            report = mlx2onnx.verify(stacked, block, x)
            assert report.passed, str(report)


def test_products_of_different_inputs_or_blocks_stay_apart():
    rng = rng_for("passes.products.apart")
    mx.random.seed(int(rng.integers(1 << 31)))
    first = nn.QuantizedLinear(64, 32, group_size=32, bits=4)
    second = nn.QuantizedLinear(64, 32, group_size=64, bits=4)
    mx.eval(first.parameters(), second.parameters())

    def fun(x, y):
        return first(x) + second(x) + first(y)  # two block sizes on x; y its own input

    x, y = rand(rng, (2, 64)), rand(rng, (2, 64))
    model = mlx2onnx.export(fun, x, y)
    assert collections.Counter(n.op_type for n in model.graph.node)["MatMulNBits"] == 3
    assert "Split" not in {n.op_type for n in model.graph.node}
    assert mlx2onnx.verify(model, fun, x, y)
