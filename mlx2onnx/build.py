"""Build: graph inputs and outputs, initializers and opset -> an onnx-ir model."""

from __future__ import annotations

import json

import mlx.core as mx
import onnx_ir as ir

from . import dtypes
from ._version import __version__
from .capture import Trace
from .context import Context, ir_shape
from .opset import ir_version_for

IO_METADATA_KEY = "mlx2onnx.io"
POLICY_METADATA_KEY = "mlx2onnx.dtype_policy"
PASSES_METADATA_KEY = "mlx2onnx.passes"
DYNAMIC_METADATA_KEY = "mlx2onnx.dynamic"


def build_model(ctx: Context, trace: Trace, input_names: list[str], output_names: list[str]) -> ir.Model:
    graph_inputs = [ctx.values[i.spec.name] for i in trace.inputs]
    graph_outputs: list[ir.Value] = []
    input_ids = {id(v) for v in graph_inputs}
    initializer_ids = {id(v) for v in ctx.initializers}
    for out, name in zip(trace.outputs, output_names):
        value = ctx.value(out.spec)
        taken = id(value) in input_ids or id(value) in initializer_ids or any(value is o for o in graph_outputs)
        if taken or value.producer() is None:
            value = ctx.op.Identity(value)
        value.name = name
        value.type = ir.TensorType(dtypes.to_onnx(out.spec.dtype))
        value.shape = ir_shape(out.spec.shape)
        graph_outputs.append(value)
    # Types guessed for internal temporaries are not serialised: only MLX-declared ones.
    output_ids = {id(v) for v in graph_outputs}
    for node in ctx.nodes:
        for value in node.outputs:
            if id(value) not in ctx.bound and id(value) not in output_ids:
                value.type = None
                value.shape = None
    opsets = {"": ctx.opset, **ctx.domains}
    graph = ir.Graph(
        graph_inputs,
        graph_outputs,
        nodes=ctx.nodes,
        initializers=ctx.initializers,
        opset_imports=opsets,
        name=_graph_name(trace.function_name),
    )
    io = {
        "inputs": [
            {"name": n, "position": i.position, "keyword": i.keyword} for i, n in zip(trace.inputs, input_names)
        ],
        "outputs": [{"name": n, "key": o.label} for o, n in zip(trace.outputs, output_names)],
    }
    return ir.Model(
        graph,
        ir_version=ir_version_for(ctx.opset),
        producer_name="mlx2onnx",
        producer_version=__version__,
        metadata_props={
            IO_METADATA_KEY: json.dumps(io, sort_keys=True),
            "mlx.version": mx.__version__,
            "mlx.device": trace.device,
            "mlx.function": trace.function_name,
        },
    )


def _graph_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) or "mlx_function"
