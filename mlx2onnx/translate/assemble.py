"""Build: graph inputs and outputs, initializers and opset -> an onnx-ir model."""

from __future__ import annotations

import json

import mlx.core as mx
import onnx_ir as ir

from .. import dtypes
from .._version import __version__
from ..capture.tracing import Trace
from .context import Context, ir_shape
from ..io.metadata import IO_METADATA_KEY
from .opset import ir_version_for
from ..capture.symbolic import NeedsStatic


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
        "outputs": [_output_entry(trace, o, n) for o, n in zip(trace.outputs, output_names)],
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


def _output_entry(trace: Trace, out, name: str) -> dict:
    entry = {"name": name, "key": out.label}
    axis = order_free_axis(trace, out.spec.name)
    if axis is not None:
        entry["order_free_axis"] = axis
    return entry


def order_free_axis(trace: Trace, name: str) -> int | None:
    """The axis along which value ``name`` holds an unordered set, or None.

    MLX's Partition/ArgPartition (and topk = Partition + Slice of the last k) leave the
    elements before and after the k-th in an implementation-defined order; the export's
    full sort is an equally valid result. A value read straight from one, or through
    Slices that take each unordered run whole or not at all, is the same *set* along the
    axis in any correct implementation, so the check compares it sorted along that axis.
    """
    producer = {o.name: p for p in trace.primitives for o in p.outputs}
    slices = []
    record = producer.get(name)
    while record is not None and record.name == "Slice":
        slices.append(record)
        record = producer.get(record.inputs[0].name)
    if record is None or record.name not in ("Partition", "ArgPartition"):
        return None
    try:
        return _whole_runs_axis(record, slices)
    except (TypeError, NeedsStatic):  # sizes of a dynamic export: only topk's own slice is read symbolically
        axis = int(record.arguments[1]) % len(record.inputs[0].shape)
        if not slices:
            return axis
        if len(slices) == 1 and str(slices[0].arguments[0][axis]) == str(record.arguments[0]) \
                and all(int(v) == 1 for v in slices[0].arguments[2]):
            return axis
        return None


def _whole_runs_axis(record, slices) -> int | None:
    kth, axis = (int(a) for a in record.arguments[:2])
    axis %= len(record.inputs[0].shape)
    size = int(record.inputs[0].shape[axis])
    kth %= max(size, 1)
    runs = [(0, kth), (kth + 1, size)]  # the unordered runs, as [start, stop) in the current view
    for rec in reversed(slices):
        start, stop, strides = (list(a) for a in rec.arguments[:3])
        dim = int(rec.inputs[0].shape[axis])
        a, b, step = int(start[axis]), int(stop[axis]), int(strides[axis])
        a, b = (max(0, min(dim, v + dim if v < 0 else v)) for v in (a, b))
        if step != 1:
            return None
        for lo, hi in runs:
            if lo < hi and not (a <= lo and hi <= b) and max(a, lo) < min(b, hi):
                return None  # the slice cuts an unordered run: no order-free reading of it
        runs = [(max(lo, a) - a, min(hi, b) - a) for lo, hi in runs if a <= lo and hi <= b]
    return axis


def _graph_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in name) or "mlx_function"
