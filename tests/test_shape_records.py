"""Shape primitives that tracing on this CPU never produces (BroadcastAxes appears only in
shapeless exports; Copy and StopGradient are removed by MLX before the callback), checked
through hand-built records against NumPy on random inputs."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import mlx.core as mx
import mlx2onnx
from mlx2onnx.capture.trace import GraphInput, GraphOutput, Primitive, TensorSpec, Trace
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from harness import ort_session

OPSETS = sorted({default_opset(), MIN_OPSET})


def run(trace: Trace, opset: int, feeds: list[np.ndarray]) -> list[np.ndarray]:
    model = mlx2onnx.Exporter(opset=opset).trace_to_ir(trace)
    proto = ir.serde.serialize_model(model)
    session = ort_session(proto)
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, feeds)))


def one_record(name, arguments, inputs, output, np_dtype):
    specs = [TensorSpec(f"I{k}", shape, mx.float32 if np_dtype == np.float32 else mx.int32) for k, shape in enumerate(inputs)]
    out = TensorSpec("OUT", output, specs[0].dtype)
    rec = Primitive(0, name, tuple(arguments), tuple(specs), (out,))
    graph_inputs = tuple(GraphInput(s, f"x{k}", k, None) for k, s in enumerate(specs))
    return Trace(graph_inputs, (GraphOutput(out, None),), (), (rec,), "cpu", "hand_built")


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
    trace = one_record("BroadcastAxes", [ignore], [x_shape, y_shape], out_shape, np_dtype)
    (got,) = run(trace, opset, [x, y])
    batch = np.broadcast_shapes(x_shape[: len(x_shape) + ignore[0]], y_shape[: len(y_shape) + ignore[0]])
    assert batch + x_shape[len(x_shape) + ignore[0]:] == out_shape
    np.testing.assert_array_equal(got, np.broadcast_to(x, out_shape))


@pytest.mark.parametrize("opset", OPSETS)
@pytest.mark.parametrize("name", ["Copy", "StopGradient"])
def test_identity_records(opset, name):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    trace = one_record(name, [], [(3, 4)], (3, 4), np.float32)
    (got,) = run(trace, opset, [x])
    np.testing.assert_array_equal(got, x)
