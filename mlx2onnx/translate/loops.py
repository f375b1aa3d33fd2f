"""A loop recovered from an unrolled trace (:mod:`mlx2onnx.capture.loops`) as ONNX ``Loop``.

The body graph takes the iteration number, the loop condition and the carried values,
and returns the condition, the carried values' next values and the per-iteration values
ONNX stacks along a new first axis. The body reads everything else (weights, the whole
sequence it slices at ``a * iteration + b``) from the graph around it by name.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..capture.loops import loop_parts
from ..capture.symbolic import SymInt
from .context import make_value


def translate_loop(ctx, rec, translate_records) -> list[ir.Value]:
    """The outputs of :data:`~mlx2onnx.capture.loops.LOOP` record ``rec``: the carried
    values' last values, then the stacked ones. ``translate_records(ctx, records)``
    translates the body."""
    trips, body, carried = loop_parts(rec)
    first = [ctx.value(spec) for spec in rec.inputs[:carried]]
    iteration = ir.Value(name=ctx.fresh("iteration"), shape=ir.Shape([]), type=ir.TensorType(ir.DataType.INT64))
    condition = ir.Value(name=ctx.fresh("condition"), shape=ir.Shape([]), type=ir.TensorType(ir.DataType.BOOL))
    with ctx.subgraph(iteration) as nodes:
        state = []
        for spec in [i.spec for i in body.inputs[:carried]]:
            value = make_value(ctx.fresh(spec.name), spec, ctx.settings.floats)
            ctx.values[spec.name], ctx.specs[spec.name] = value, spec
            ctx.offer_dims(value, spec)
            state.append(value)
        translate_records(ctx, body.primitives)
        produced = [ctx.op.Identity(condition)]
        inside = {id(n) for n in nodes}
        for out in body.outputs:
            value = ctx.value(out.spec)
            if value.producer() is None or id(value.producer()) not in inside or any(value is v for v in produced):
                value = ctx.op.Identity(value)
                value.type = ir.TensorType(ctx.onnx_type(out.spec.dtype))
            produced.append(value)
    graph = ir.Graph([iteration, condition, *state], produced, nodes=nodes, name=ctx.fresh("loop_body"))
    count = ctx.ints(trips) if isinstance(trips, SymInt) else ctx.const(np.asarray(int(trips), np.int64))
    outputs = ctx.emit("Loop", [count, None, *first], {"body": graph}, len(body.outputs), "")
    return list(outputs) if isinstance(outputs, tuple) else [outputs]
