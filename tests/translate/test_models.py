"""End-to-end parity of the reference models in models/ (float32 and float16)."""

from __future__ import annotations

import mlx.core as mx
import onnx
import pytest

import mlx2onnx
from mlx2onnx.models import REFERENCE_MODELS, example
from mlx2onnx.translate.opset import MIN_OPSET, default_opset

OPSETS = sorted({default_opset(), MIN_OPSET}, reverse=True)


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_model_float32(name, opset):
    model, args, kwargs = example(name)
    proto = mlx2onnx.Exporter(opset=opset).export(model, *args, **kwargs)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.opset_import[0].version == opset
    for seed in (0, 1):
        report = mlx2onnx.Verifier(seed=seed).verify(proto, model, *args, **kwargs)
        assert report.passed, str(report)
        assert all(o.max_abs_error < 1e-4 for o in report.outputs), str(report)


@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_model_float16(name):
    model, args, kwargs = example(name)
    model.set_dtype(mx.float16)
    args = tuple(a.astype(mx.float16) if mx.issubdtype(a.dtype, mx.floating) else a for a in args)
    proto = mlx2onnx.export(model, *args, **kwargs)
    report = mlx2onnx.verify(proto, model, *args, **kwargs)
    assert report.passed, str(report)
    assert not any(o.nan_in_reference for o in report.outputs), str(report)


def test_module_weights_are_named_by_parameter_path():
    model, args, kwargs = example("llama")
    proto = mlx2onnx.export(model, *args, **kwargs)
    names = {i.name for i in proto.graph.initializer}
    assert "embed_tokens.weight" in names
    assert "layers.0.self_attn.q_proj.weight" in names
    assert "layers.1.mlp.down_proj.weight" in names
