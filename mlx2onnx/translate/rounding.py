"""Rounding to the narrow floats MLX computes in, where the graph carries them wider.

An export may carry bfloat16 (or float16) values as float32 (``Exporter(bfloat16=...)``,
the portable target's default: tract has no bfloat16 type, onnxruntime's CPU provider
few bfloat16 kernels). Carried values are rounded to their dtype where MLX casts to it
(:func:`round_to`); under the ``"emulate"`` policy also after every op, as MLX rounds
the output of every primitive (:func:`round_outputs`), except for primitives whose
outputs are values of their inputs (shape and selection ops), and inside the primitives
whose narrow kernels round an intermediate (:func:`round_within`).

Two spellings of the rounding, both exact:

- ``Cast(Cast(x, bfloat16), float32)``: two nodes, for runtimes with a bfloat16 type;
- for the portable target, float32 arithmetic only (:func:`bfloat16_in_float32`), which
  tract reads too. It rounds to nearest, ties to even, like the Cast, on all 2^32 float32
  bit patterns (checked exhaustively against ml_dtypes with numpy's float32 arithmetic;
  tests/runtimes/test_rounding.py runs every tie class, subnormals, zeros, infinities and the
  overflow edge in every runtime).
"""

from __future__ import annotations

from typing import Sequence

import mlx.core as mx
import onnx_ir as ir

from .. import dtypes

NARROW = (mx.bfloat16, mx.float16)

# primitives whose outputs hold only values of their inputs (or constants MLX filled):
# nothing to round
KEEPS_VALUES = frozenset(
    {
        "Abs",
        "AsStrided",
        "AsType",
        "Broadcast",
        "BroadcastAxes",
        "Ceil",
        "Concatenate",
        "Contiguous",
        "Copy",
        "Depends",
        "DynamicSlice",
        "DynamicSliceUpdate",
        "ExpandDims",
        "Flatten",
        "Floor",
        "Gather",
        "GatherAxis",
        "Load",
        "MaskedScatter",
        "Maximum",
        "Minimum",
        "Negative",
        "Pad",
        "Partition",
        "Reshape",
        "Round",
        "Select",
        "Sign",
        "Slice",
        "SliceUpdate",
        "Sort",
        "Split",
        "Squeeze",
        "StopGradient",
        "Transpose",
        "Unflatten",
        "View",
        "Arange",
    }
)


def needs_rounding(ctx, dtype: mx.Dtype) -> bool:
    """Whether values of MLX dtype ``dtype`` are carried wider than themselves (then a
    cast to ``dtype`` rounds with :func:`round_to`)."""
    return dtype in NARROW and ctx.carried(dtype) != dtype


def emulated(ctx, dtype: mx.Dtype) -> bool:
    """Whether ``dtype`` is carried wider and rounded after every op (policy ``"emulate"``)."""
    return needs_rounding(ctx, dtype) and ctx.settings.floats.emulates(dtype)


def round_to(ctx, x: ir.Value, dtype: mx.Dtype, op=None) -> ir.Value:
    """``x`` (carried as ``ctx.onnx_type(dtype)``, or a float computed wider) rounded to the
    values of ``dtype``, in the type that carries ``dtype``. ``op`` emits the nodes
    (default ``ctx.op``; a Scan body passes its own builder)."""
    op = ctx.op if op is None else op
    carrier = ctx.onnx_type(dtype)
    float32 = ir.DataType.FLOAT
    if dtype == mx.bfloat16 and ctx.portable and carrier == float32 and x.dtype in (None, float32):
        return bfloat16_in_float32(op, x)
    return op.Cast(op.Cast(x, to=dtypes.to_onnx(dtype)), to=carrier)


def cast_rounded(ctx, x: ir.Value, dtype: mx.Dtype) -> ir.Value:
    """``x`` cast to MLX dtype ``dtype`` as MLX casts: rounded to its values (once, from
    ``x`` itself) even where the export carries it wider."""
    return round_to(ctx, x, dtype) if needs_rounding(ctx, dtype) else ctx.cast(x, dtype)


def narrowed(ctx, x: ir.Value, dtype: mx.Dtype, work: mx.Dtype) -> ir.Value:
    """``x``, computed in MLX dtype ``work``, rounded to the values of ``dtype`` and kept in
    ``work``: a value MLX rounds to ``dtype`` before it computes on."""
    return ctx.cast(cast_rounded(ctx, x, dtype), work)


def round_within(ctx, x: ir.Value, dtype: mx.Dtype, work: mx.Dtype) -> ir.Value:
    """:func:`narrowed`, where MLX rounds an intermediate of a narrow-float primitive. A
    dtype carried wider without emulation is computed in the wider type throughout: left
    as it is."""
    if needs_rounding(ctx, dtype) and not emulated(ctx, dtype):
        return x
    return narrowed(ctx, x, dtype, work)


def round_inputs(ctx, trace) -> None:
    """Round carried graph inputs once: a caller may feed float32 values to a bfloat16
    input, which MLX would hold rounded."""
    for graph_input in trace.inputs:
        spec = graph_input.spec
        if emulated(ctx, spec.dtype):
            ctx.values[spec.name] = round_to(ctx, ctx.values[spec.name], spec.dtype)


def round_outputs(ctx, rec, outputs: Sequence[ir.Value | None]) -> list[ir.Value | None]:
    """The handler's outputs of ``rec``, each rounded where MLX rounds it and the graph does not."""
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if rec.name in KEEPS_VALUES:
        return outputs
    return [
        round_to(ctx, value, spec.dtype) if value is not None and emulated(ctx, spec.dtype) else value
        for spec, value in zip(rec.outputs, outputs)
    ]


def bfloat16_in_float32(op, x: ir.Value) -> ir.Value:
    """Round float32 ``x`` to bfloat16 values (nearest, ties to even) with float32 ops only.

    For |x| in [2^e, 2^(e+1)), adding and subtracting M = 1.5 * 2^(e+16) rounds |x| to a
    multiple of 2^(e-7) (its bfloat16 spacing) by float32's own round-to-nearest-even,
    since |x| + M stays in M's binade. M comes from p = |x| * 2^24 (exact) and
    S = (p + |x|) - p: the sum rounds |x| to p's spacing 2^(e+1), so S is 2^(e+1), or 0
    when |x| is exactly 2^e (then M = 0 and a power of two stays itself); M = 0.75 * 2^16 * S.
    No product feeds a sum, so a runtime that contracts Mul+Add into a fused multiply-add
    gets the same values (the first form tried, Rump's q - q * (1 - 2^-24), broke in
    OpenVINO that way). Below 2^-126 bfloat16's spacing stays 2^-133, so |x| is clamped
    at 1.5 * 2^-126 for M; above 2^100 |x| is scaled by 2^-64 first (exact) so p cannot
    overflow, and rounding past bfloat16's largest finite value gives inf, as the Cast
    does. The sign comes back by a product with sign(x + 1/x), which is -1 for -0 and
    negative subnormals as well (Where would drop the sign of a zero in onnxruntime).
    """

    def c(value: float) -> ir.Value:
        return op.Constant(value_float=value)

    big = c(2.0**100)
    magnitude = op.Abs(x)
    scale = op.Where(op.Greater(magnitude, big), c(2.0**-64), c(1.0))
    a = op.Mul(magnitude, scale)
    clamped = op.Min(op.Max(a, c(1.5 * 2.0**-126)), big)
    p = op.Mul(clamped, c(2.0**24))
    spacing = op.Sub(op.Add(p, clamped), p)  # 2^(e+1), or 0 at a power of two
    magic = op.Mul(spacing, c(49152.0))  # 0.75 * 2^16
    rounded = op.Div(op.Sub(op.Add(a, magic), magic), scale)
    return op.Mul(rounded, op.Sign(op.Add(x, op.Reciprocal(x))))
