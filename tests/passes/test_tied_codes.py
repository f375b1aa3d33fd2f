"""A tied quantized embedding stored once (mlx2onnx/passes/tied_codes.py): the lookup reads
the head's blocks, the same numbers bit for bit, and MLX's outputs."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import onnxruntime as ort
import pytest

import mlx2onnx
from mlx2onnx import passes
from tests.support.harness import rng_for

VOCABULARY, WIDTH = 96, 64


class Tied(nn.Module):
    """An embedding whose transpose is the head (mlx-lm's ``tie_word_embeddings``)."""

    def __init__(self, bits: int, group_size: int):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, WIDTH)
        self.norm = nn.RMSNorm(WIDTH)
        nn.quantize(self, group_size=group_size, bits=bits, class_predicate=lambda _, m: isinstance(m, nn.Embedding))

    def __call__(self, ids):
        return self.embed.as_linear(self.norm(self.embed(ids)))


def _stored(model: onnx.ModelProto) -> int:
    return sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def _logits(model: onnx.ModelProto, ids: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: ids})[0]


@pytest.mark.parametrize("bits, group_size", [(4, 32), (8, 32), (4, 64), (8, 64)])
def test_a_tied_table_is_read_from_the_head(bits, group_size, monkeypatch):
    rng = rng_for(f"passes.tied.{bits}.{group_size}")
    mx.random.seed(int(rng.integers(1 << 31)))
    model = Tied(bits, group_size)
    mx.eval(model.parameters())
    ids = mx.array(rng.integers(0, VOCABULARY, (2, 5)).astype(np.int32))
    once = mlx2onnx.export(model, ids)
    onnx.checker.check_model(once, full_check=True)
    with monkeypatch.context() as patch:
        patch.setattr(passes, "PIPELINE", [p for p in passes.PIPELINE if p.name != "read_tied_tables_from_the_head"])
        twice = mlx2onnx.export(model, ids)
    codes = VOCABULARY * WIDTH * bits // 8
    scales = VOCABULARY * WIDTH // group_size * 4
    saved = _stored(twice) - _stored(once)  # the lookup's codes and scales, less a few index constants
    assert codes + scales - 64 <= saved <= codes + scales, (saved, codes, scales)
    for _ in range(3):  # fresh ids, every row reachable
        fresh = rng.integers(0, VOCABULARY, (2, 5)).astype(np.int32)
        np.testing.assert_array_equal(_logits(once, fresh), _logits(twice, fresh))
    report = mlx2onnx.verify(once, model, ids)
    assert report.passed, str(report)


def test_a_table_that_is_not_the_heads_stays():
    rng = rng_for("passes.tied.untied")
    mx.random.seed(int(rng.integers(1 << 31)))
    model = Tied(4, 32)
    head = nn.QuantizedEmbedding(VOCABULARY, WIDTH, group_size=32, bits=4)  # same shape, other codes
    mx.eval(model.parameters(), head.parameters())

    def untied(ids):
        return head.as_linear(model.norm(model.embed(ids)))

    ids = mx.array(rng.integers(0, VOCABULARY, (2, 5)).astype(np.int32))
    exported = mlx2onnx.export(untied, ids)
    report = {p.key: p.value for p in exported.metadata_props}
    assert '"read_tied_tables_from_the_head": 0' in report["mlx2onnx.passes"]
    assert mlx2onnx.verify(exported, untied, ids)
