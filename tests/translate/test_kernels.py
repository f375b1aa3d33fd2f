"""kernels.has_kernel says what onnxruntime's CPU provider really runs: checked against
sessions of one-node models (a profile names the kernels that ran)."""

from __future__ import annotations

import collections
import json

import mlx.core as mx
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from mlx2onnx.translate import kernels
from tests.support.harness import ort_session


def kernels_run(node, inputs: dict[str, np.ndarray], opset: int, folder) -> collections.Counter | None:
    """The op types whose kernels ran for a one-node model, or None if onnxruntime refused it."""
    types = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int8): TensorProto.INT8}
    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info(k, types[v.dtype], v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(folder / "profile")  # not the working directory
    try:
        session = ort_session(model, options)
    except Exception as exc:  # NOT_IMPLEMENTED: no kernel and no function body
        assert "NOT_IMPLEMENTED" in str(exc), exc
        return None
    session.run(None, inputs)
    with open(session.end_profiling()) as f:
        events = json.load(f)
    return collections.Counter(
        e["args"]["op_name"] for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")
    )


@pytest.mark.parametrize("opset", [23, 24, 25, 28])
def test_attention_kernel_is_reported_where_onnxruntime_runs_it(opset, tmp_path):
    """From opset 25 the model holds Attention 25; onnxruntime's kernel is registered for
    24 onwards but runs only Attention 24, so Attention 25 runs as its function body."""
    rng = np.random.default_rng(opset)
    feeds = {
        name: rng.standard_normal(shape).astype(np.float32)
        for name, shape in (("q", (1, 4, 5, 8)), ("k", (1, 2, 5, 8)), ("v", (1, 2, 5, 8)))
    }
    ran = kernels_run(helper.make_node("Attention", ["q", "k", "v"], ["y"], is_causal=1), feeds, opset, tmp_path)
    native = ran is not None and set(ran) == {"Attention"}
    assert kernels.has_kernel("Attention", mx.float32, opset, "T1") == native, ran


@pytest.mark.parametrize(
    "op_type, opset", [("DequantizeLinear", 23), ("DequantizeLinear", 28), ("Gelu", 20), ("Gelu", 28)]
)
def test_open_ended_registrations_serve_their_first_version_only(op_type, opset, tmp_path):
    if op_type == "Gelu":
        feeds = {"x": np.linspace(-3, 3, 8, dtype=np.float32)}
        node = helper.make_node("Gelu", ["x"], ["y"])
    else:
        feeds = {"x": np.arange(8, dtype=np.int8), "scale": np.array(0.5, np.float32)}
        node = helper.make_node("DequantizeLinear", ["x", "scale"], ["y"])
    ran = kernels_run(node, feeds, opset, tmp_path)
    native = ran is not None and set(ran) == {op_type}
    constraint = "T1" if op_type == "DequantizeLinear" else "T"
    dtype = mx.int8 if op_type == "DequantizeLinear" else mx.float32
    assert kernels.has_kernel(op_type, dtype, opset, constraint) == native, ran
