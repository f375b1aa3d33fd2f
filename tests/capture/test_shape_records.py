"""Shape primitives that tracing on this CPU never produces (BroadcastAxes appears only in
shapeless exports; Copy and StopGradient are removed by MLX before the callback), checked
through hand-built records against NumPy on random inputs."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

import mlx2onnx
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from tests.support.harness import Arg, export_and_run, record_trace

OPSETS = sorted({default_opset(), MIN_OPSET})


def run(name, arguments, operands, output, opset: int) -> list[np.ndarray]:
    """Record ``name`` on NumPy ``operands`` with one output of shape ``output`` (the first
    operand's dtype), exported at ``opset`` and run in onnxruntime."""
    inputs = [Arg(f"x{k}", mx.array(a)) for k, a in enumerate(operands)]
    trace, feeds = record_trace(name, arguments, inputs, [(output, inputs[0].array.dtype)], device="cpu")
    return export_and_run(trace, feeds, mlx2onnx.Exporter(opset=opset))[1]


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("np_dtype", [np.float32, np.int32])
@pytest.mark.parametrize(
    "x_shape, y_shape, ignore, out_shape",
    [
        ((2, 1, 3, 4), (5, 4, 6), [-2, -1], (2, 5, 3, 4)),
        ((1, 3, 4), (6, 2, 4, 5), [-2, -1], (6, 2, 3, 4)),
        ((3, 4), (2, 4, 7), [-2, -1], (2, 3, 4)),
    ],
)
def test_broadcast_axes(opset, np_dtype, x_shape, y_shape, ignore, out_shape):
    rng = np.random.default_rng(sum(x_shape) + opset)
    x = rng.uniform(-5, 5, x_shape).astype(np_dtype)
    y = rng.uniform(-5, 5, y_shape).astype(np_dtype)
    (got,) = run("BroadcastAxes", [ignore], [x, y], out_shape, opset)
    batch = np.broadcast_shapes(x_shape[: len(x_shape) + ignore[0]], y_shape[: len(y_shape) + ignore[0]])
    assert batch + x_shape[len(x_shape) + ignore[0] :] == out_shape
    np.testing.assert_array_equal(got, np.broadcast_to(x, out_shape))


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", ["Copy", "StopGradient"])
def test_identity_records(opset, name):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    (got,) = run(name, [], [x], (3, 4), opset)
    np.testing.assert_array_equal(got, x)
