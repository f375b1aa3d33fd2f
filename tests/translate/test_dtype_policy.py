"""The bfloat16/float16 policy: keep, or carry as float16/float32, and verify in the
right precision."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx.models import example

ELEM = {"keep": onnx.TensorProto.BFLOAT16, "float16": onnx.TensorProto.FLOAT16, "float32": onnx.TensorProto.FLOAT}


@pytest.mark.parametrize("policy", ["keep", "float16", "float32", "auto"])
def test_bfloat16_model_policies(policy):
    model, args, kwargs = example("llama")
    model.set_dtype(mx.bfloat16)
    proto = mlx2onnx.Exporter(bfloat16=policy).export(model, *args, **kwargs)
    elem = proto.graph.output[0].type.tensor_type.elem_type
    if policy != "auto":
        assert elem == ELEM[policy]
        weights = [i for i in proto.graph.initializer if i.name == "embed_tokens.weight"]
        assert weights[0].data_type == ELEM[policy]
    report = mlx2onnx.verify(proto, model, *args, **kwargs)
    assert report.passed, str(report)
    assert report.outputs[0].dtype == "bfloat16"  # compared at MLX's own precision


def test_float32_carrying_matches_the_float32_model_closely():
    """Carrying bf16 weights as float32 computes the float32 model of the bf16 weights."""
    model, args, kwargs = example("mlp")
    model.set_dtype(mx.bfloat16)
    proto = mlx2onnx.Exporter(bfloat16="float32").export(model, *args, **kwargs)
    reference = example("mlp")[0]
    reference.set_dtype(mx.bfloat16)
    reference.set_dtype(mx.float32)  # the same bf16-rounded weights, computed in float32
    x = args[0].astype(mx.bfloat16)
    report = mlx2onnx.Verifier(random_inputs=False).verify(proto, reference, x.astype(mx.float32))
    assert report.passed and report.outputs[0].max_abs_error < 1e-4, str(report)


def test_float16_can_be_carried_as_float32():
    model, args, kwargs = example("mlp")
    model.set_dtype(mx.float16)
    x = args[0].astype(mx.float16)
    proto = mlx2onnx.Exporter(float16="float32").export(model, x)
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert mlx2onnx.verify(proto, model, x)


def test_unknown_policy_is_refused():
    with pytest.raises(mlx2onnx.ExportOptionError, match="bfloat16='int8'"):
        mlx2onnx.Exporter(bfloat16="int8").export(mx.abs, mx.ones(2))


@pytest.mark.parametrize("policy", ["float32", "float16", "keep"])
def test_casts_out_of_carried_bfloat16_round_like_mlx(policy):
    rng = np.random.default_rng(7)
    a = mx.array(rng.standard_normal((4, 16)).astype(np.float32)).astype(mx.bfloat16)
    b = mx.array(rng.standard_normal((16, 8)).astype(np.float32)).astype(mx.bfloat16)

    def fun(a, b):
        wide = (a @ b).astype(mx.float32)  # MLX rounds the product to bfloat16 first
        narrow = (wide * 3.1).astype(mx.bfloat16).astype(mx.float32)
        return wide, narrow, (a @ b).astype(mx.int32)

    proto = mlx2onnx.Exporter(bfloat16=policy).export(fun, a, b)
    # float16 carrying rounds differently from bfloat16: allow one bfloat16 ulp there.
    loose = {"float32": (0.07, 1 / 64)} if policy == "float16" else None
    report = mlx2onnx.Verifier(random_inputs=False, tolerances=loose).verify(proto, fun, a, b)
    assert report.passed, str(report)
    if policy != "float16":
        assert report.outputs[0].max_abs_error == 0, str(report)


@pytest.mark.parametrize("policy", ["keep", "float32", "float16"])
def test_floor_divide_of_bfloat16_rounds_its_quotient(policy):
    """MLX floors the bfloat16 quotient; computed in a wider type it must be rounded to
    bfloat16 first (about 1% of random elements were off by one)."""
    x = mx.array(np.random.default_rng(7).uniform(-30, 30, 2048).astype(np.float32)).astype(mx.bfloat16)

    def fun(a):
        return a // 0.28, mx.divmod(a, 0.28)[0]

    proto = mlx2onnx.Exporter(bfloat16=policy).export(fun, x)
    report = mlx2onnx.Verifier(random_inputs=False, tolerances={"bfloat16": (0.0, 0.0)}).verify(proto, fun, x)
    assert report.passed, str(report)
