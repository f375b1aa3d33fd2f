"""The fused backward records of ``mx.fast`` norms, as a GPU emits them for a gradient.

``mx.grad`` through ``mx.fast.rms_norm`` / ``layer_norm`` on Metal or CUDA records one
``RMSNormVJP`` / ``LayerNormVJP`` (layouts in ``mlx/fast.cpp``); here on the CPU the same
gradient is ordinary primitives. Each test builds the one-record trace, translates, checks
(full) and runs it in onnxruntime, and compares every output with ``mx.vjp`` of the
``mx.fast`` op computed here on the same random inputs and cotangent.
"""

from __future__ import annotations

import mlx.core as mx
import pytest

from mlx2onnx import dtypes
from tests.capture.test_fast_records import SETTINGS, Setting, check_record, norm_input
from tests.support.harness import Arg, randn, rng_for

SHAPES = {"rows": (2, 3, 16), "vector": (16,)}


def _cotangent(rng, shape, dtype):
    return randn(rng, shape, mx.float32).astype(dtype)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no_weight"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_rms_norm_vjp(shape, weight, setting: Setting):
    dtype, size = setting.dtype, SHAPES[shape]
    rng = rng_for("rms_norm_vjp", shape, weight, dtypes.name(dtype))
    x = norm_input(rng, dtype)[(0,) * (3 - len(size))] if len(size) < 3 else norm_input(rng, dtype)
    w = randn(rng, size[-1:], dtype) if weight else mx.array(1, dtype=dtype)
    g = _cotangent(rng, size, dtype)
    eps = 1e-5
    _, (dx, dw) = mx.vjp(lambda x, w: [mx.fast.rms_norm(x, w if weight else None, eps)], [x, w], [g])
    if not weight:
        dw = mx.zeros_like(w)  # MLX's kernel: the gradient of the absent weight is a 0-d zero
    check_record("RMSNormVJP", [eps], [Arg("x", x), Arg("w", w, constant=True), Arg("g", g)], [dx, dw], setting)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("affine", ["weight_bias", "weight", "none"])
@pytest.mark.parametrize("shape", list(SHAPES))
def test_layer_norm_vjp(shape, affine, setting: Setting):
    dtype, size = setting.dtype, SHAPES[shape]
    rng = rng_for("layer_norm_vjp", shape, affine, dtypes.name(dtype))
    x = norm_input(rng, dtype)[(0,) * (3 - len(size))] if len(size) < 3 else norm_input(rng, dtype)
    w = randn(rng, size[-1:], dtype) if affine != "none" else mx.array(1, dtype=dtype)
    b = randn(rng, size[-1:], dtype) if affine == "weight_bias" else mx.array(0, dtype=dtype)
    g = _cotangent(rng, size, dtype)
    eps = 1e-4

    def forward(x, w, b):
        return [mx.fast.layer_norm(x, w if affine != "none" else None, b if affine == "weight_bias" else None, eps)]

    _, (dx, dw, db) = mx.vjp(forward, [x, w, b], [g])
    dw = dw if affine != "none" else mx.zeros_like(w)
    db = db if affine == "weight_bias" else mx.zeros_like(b)
    inputs = [Arg("x", x), Arg("w", w, constant=True), Arg("b", b, constant=True), Arg("g", g)]
    check_record("LayerNormVJP", [eps], inputs, [dx, dw, db], setting)


def test_weights_as_graph_inputs():
    """A gradient with respect to the weights takes them as function arguments."""
    rng = rng_for("norm_vjp_inputs")
    x, w, b, g = norm_input(rng, mx.float32), randn(rng, (16,)), randn(rng, (16,)), randn(rng, (2, 3, 16))
    _, grads = mx.vjp(lambda x, w, b: [mx.fast.layer_norm(x, w, b, 1e-5)], [x, w, b], [g])
    check_record(
        "LayerNormVJP", [1e-5], [Arg("x", x), Arg("w", w), Arg("b", b), Arg("g", g)], grads, Setting(mx.float32, 17)
    )
