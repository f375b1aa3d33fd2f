"""NumberOfElements only appears in shapeless exports, which ``mlx2onnx.capture`` does not
make: build the Trace from ``mx.export_function(..., shapeless=True)`` records and check
the export against MLX on random inputs (mean/var divide by it)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx import dtypes
from mlx2onnx.capture.tracing import _build_trace
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from mlx2onnx.verify.compare import compare
from mlx2onnx.verify.session import run_session
from tests.support.harness import ort_session, rand, rng_for

FUNCTIONS = [
    ("mean_ax1", lambda x: mx.mean(x, axis=1), (3, 5)),
    ("mean_all", lambda x: mx.mean(x), (2, 3, 4)),
    ("mean_ax02", lambda x: mx.mean(x, axis=(0, 2), keepdims=True), (2, 3, 4)),
    ("var_ax1", lambda x: mx.var(x, axis=-1), (4, 7)),
    ("count", lambda x: x.size * mx.mean(x) / mx.sum(x), (2, 9)),
]


def shapeless_trace(fn, x):
    records = []
    mx.export_function(records.append, fn, x, shapeless=True)
    return _build_trace(records, ["x"], [None], {}, "fn")


@pytest.mark.parametrize("opset", sorted({default_opset(), MIN_OPSET}))
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16])
@pytest.mark.parametrize("name, fn, shape", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_number_of_elements(name, fn, shape, dtype, opset):
    x = rand(rng_for("number_of_elements", name, dtypes.name(dtype)), shape, dtype)
    trace = shapeless_trace(fn, x)
    assert "NumberOfElements" in {p.name for p in trace.primitives}
    model = onnx.ModelProto.FromString(
        __import__("onnx_ir")
        .serde.serialize_model(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace))
        .SerializeToString()
    )
    onnx.checker.check_model(model, full_check=True)
    session = ort_session(model)
    feed = dtypes.array_to_numpy(x)
    (got,) = run_session(session, [session.get_outputs()[0].name], {session.get_inputs()[0].name: feed})
    want = fn(x)
    tolerance = (1e-6, 1e-6) if dtype == mx.float32 else (1e-3, 1e-3)
    report = compare("out", np.asarray(got), dtypes.array_to_numpy(want), dtypes.name(want.dtype), tolerance)
    assert report.passed, report.line()
