"""Creation primitives: Arange, Full."""

from __future__ import annotations

import mlx.core as mx

from mlx2onnx import dtypes
from mlx2onnx.registry import handles


@handles("Arange")
def arange(ctx, rec):
    """no inputs; arguments [start, stop, step] (floats): a constant, filled by MLX itself
    (MLX fills by repeated addition in the output dtype, which ONNX Range does not)."""
    start, stop, step = rec.arguments
    out = rec.outputs[0]
    values = mx.arange(start, stop, step, dtype=out.dtype)
    if tuple(values.shape) != tuple(out.shape):
        raise ctx.fail(f"mx.arange{(start, stop, step)} gives shape {values.shape}, the record says {out.shape}")
    carried = dtypes.carried(out.dtype)  # the export's float policy (e.g. bfloat16 as float32)
    if carried != out.dtype:
        values = values.astype(carried)
    return [ctx.const(dtypes.array_to_numpy(values), name=f"arange_{rec.index}")]


@handles("Full")
def full(ctx, rec):
    """inputs (value, already broadcast to the output shape); arguments []: the value itself."""
    (value,) = ctx.inputs(rec)
    if rec.inputs[0].dtype != rec.outputs[0].dtype:
        return [ctx.op.Cast(value, to=dtypes.to_onnx(rec.outputs[0].dtype))]
    return [ctx.op.Identity(value)]
