"""Assemble: graph inputs and outputs, initializers and opset -> an onnx-ir model.

What the model says about itself (its metadata) is written after the passes, by
:mod:`mlx2onnx.io.metadata`.
"""

from __future__ import annotations

import onnx_ir as ir

from .._version import __version__
from ..capture.trace import Trace
from .context import Context, ir_shape
from .opset import ir_version_for

PRODUCER = "mlx2onnx"  # the producer_name an export writes, by which mlx2onnx knows its own files


def build_model(ctx: Context, trace: Trace, input_names: list[str], output_names: list[str]) -> ir.Model:
    graph_inputs = list(ctx.graph_inputs)
    graph_outputs: list[ir.Value] = []
    input_ids = {id(v) for v in graph_inputs}
    initializer_ids = {id(v) for v in ctx.initializers}
    for out, name in zip(trace.outputs, output_names):
        value = ctx.value(out.spec)
        taken = id(value) in input_ids or id(value) in initializer_ids or any(value is o for o in graph_outputs)
        if taken or value.producer() is None:
            value = ctx.op.Identity(value)
        value.name = name
        value.type = ir.TensorType(ctx.onnx_type(out.spec.dtype))
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
    return ir.Model(
        graph,
        ir_version=ir_version_for(ctx.opset),
        producer_name=PRODUCER,
        producer_version=__version__,
    )


def _graph_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) or "mlx_function"
