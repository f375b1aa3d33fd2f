"""The handler of the ``"loop"`` record kind: a loop recovered from an unrolled trace
(:class:`~mlx2onnx.capture.trace.LoopRecord`) as ONNX ``Loop``.

The body graph takes the iteration number, the loop condition and the carried values,
and returns the condition, the carried values' next values and the per-iteration values
ONNX stacks along a new first axis. The body reads everything else (weights, the whole
sequence it slices at ``a * iteration + b``) from the graph around it by name.

A loop that runs no step (its first steps unrolled before it, at the smallest sizes)
returns its stacks with dims the runtime makes up (onnxruntime and OpenVINO give 0 for
the dynamic ones), so the Loop sits in the ``then`` branch of an ``If`` on the trip
count, whose ``else`` branch returns the first values and empty stacks of the right shape.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..capture.trace import LoopRecord
from .context import make_value
from .registry import handles_kind


@handles_kind(LoopRecord.kind)
def translate_loop(ctx, rec: LoopRecord, translate_records) -> list[ir.Value]:
    """The outputs of loop record ``rec``: the carried values' last values, then the
    stacked ones. ``translate_records(records)`` translates the body."""
    trips, body, carried = rec.trips, rec.body, rec.carried
    first = [ctx.value(spec) for spec in rec.inputs[:carried]]
    count = ctx.ints(trips)  # a size: a loop is recovered only where traces run it different times
    graph = _body(ctx, body, carried, translate_records)
    empty = [ctx.ints([0, *spec.shape[1:]]) for spec in rec.outputs[carried:]]
    with ctx.subgraph() as running:
        ran = _outputs(ctx.emit("Loop", [count, None, *first], {"body": graph}, len(body.outputs), ""))
        ran = [_produced(ctx, v, spec, running) for v, spec in zip(ran, rec.outputs)]
    with ctx.subgraph() as skipped:
        none = [ctx.op.Identity(v) for v in first] + [
            ctx.op.ConstantOfShape(shape, value=ir.tensor(np.zeros([1], ctx.numpy_type(spec.dtype))))
            for shape, spec in zip(empty, rec.outputs[carried:])
        ]
        none = [_produced(ctx, v, spec, skipped) for v, spec in zip(none, rec.outputs)]
    runs = ctx.op.Greater(count, ctx.const(np.asarray(0, np.int64)))
    branches = {
        "then_branch": ir.Graph([], ran, nodes=running, name=ctx.fresh("loop_runs")),
        "else_branch": ir.Graph([], none, nodes=skipped, name=ctx.fresh("loop_skipped")),
    }
    return _outputs(ctx.emit("If", [runs], branches, len(rec.outputs), ""))


def _body(ctx, body, carried: int, translate_records) -> ir.Graph:
    iteration = ir.Value(name=ctx.fresh("iteration"), shape=ir.Shape([]), type=ir.TensorType(ir.DataType.INT64))
    condition = ir.Value(name=ctx.fresh("condition"), shape=ir.Shape([]), type=ir.TensorType(ir.DataType.BOOL))
    with ctx.subgraph(iteration) as nodes:
        state = []
        for spec in [i.spec for i in body.inputs[:carried]]:
            value = make_value(ctx.fresh(spec.name), spec, ctx.settings.floats)
            ctx.values[spec.name], ctx.specs[spec.name] = value, spec
            ctx.offer_dims(value, spec)
            state.append(value)
        translate_records(body.primitives)
        produced = [ctx.op.Identity(condition)]
        produced += [_produced(ctx, ctx.value(out.spec), out.spec, nodes, produced) for out in body.outputs]
    ctx.nodes.extend(_invariant(nodes, {id(v) for v in [iteration, condition, *state]}, {id(v) for v in produced}))
    return ir.Graph([iteration, condition, *state], produced, nodes=nodes, name=ctx.fresh("loop_body"))


def _invariant(nodes: list, inputs: set, outputs: set) -> list:
    """Take out of ``nodes`` (a loop body) those that read nothing the body makes or
    takes (``inputs``) and give none of its ``outputs`` (a weight's transpose, a 4-bit
    weight's DequantizeLinear): they run once, before the loop. (onnxruntime's 4-bit fusion also looks for a DequantizeLinear's weight in
    the graph of the node, so one in a body that reads a weight from outside fails.)"""
    varying, moved = set(inputs), []
    for node in list(nodes):
        if any(v is not None and id(v) in varying for v in node.inputs):
            varying.update(id(v) for v in node.outputs)
        elif not any(id(v) in outputs for v in node.outputs):
            moved.append(node)
            nodes.remove(node)
    return moved


def _produced(ctx, value: ir.Value, spec, nodes: list, taken: list = ()) -> ir.Value:
    """``value`` as an output of the graph whose nodes are ``nodes`` (an Identity when it
    comes from outside, or is already an output), typed as MLX's ``spec``."""
    inside = {id(n) for n in nodes}
    if value.producer() is None or id(value.producer()) not in inside or any(value is v for v in taken):
        value = ctx.op.Identity(value)
    if value.type is None:
        value.type = ir.TensorType(ctx.onnx_type(spec.dtype))
    return value


def _outputs(values) -> list[ir.Value]:
    return list(values) if isinstance(values, tuple) else [values]
