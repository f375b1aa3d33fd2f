"""Integer and bitwise primitives: BitwiseBinary (and, or, xor, shifts) and View (bit
reinterpretation).

ONNX spellings by opset:

* And/Or/Xor on integers are ``BitwiseAnd``/``BitwiseOr``/``BitwiseXor`` from opset 18.
  At opset 17 they are rebuilt exactly from bit planes: ``BitShift`` (opset 11, unsigned)
  splits each value into its bits along a new last axis, the bits are combined with
  ``Mul``/``Add``/``Sub`` and summed back (disjoint bits, so the sum has no carries).
  On bool inputs they are the logical ``And``/``Or``/``Xor``.
* ``BitShift`` takes signed types only from opset 28 (arithmetic right shift). Below
  that a signed left shift runs on the same-width unsigned type, and a signed right
  shift uses ``x >> s == ~(~x >> s)`` for negative ``x`` with ``~x == -1 - x``.

Shift amounts outside ``[0, bits)`` are undefined behaviour in MLX (C++ shifts; the
result depends on MLX's code path: elementwise arrays shift by ``s mod 32`` or ``s mod
64``, a broadcast scalar amount gives 0). The export follows the one definition ONNX has
(opset 28): the value is shifted out, giving 0, or -1 for a right shift of a negative
value; negative amounts count as out of range. (Opset 11 leaves unsigned out-of-range
shifts unspecified; onnxruntime applies the same rule there.)

View reads the bytes of one dtype as another: integer and bool views are Casts (which
wrap) plus BitShift splitting or joining of bytes, at every opset; float bits need
``BitCast`` (opset 26) and are refused below it.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.capture.records import BitwiseOp
from mlx2onnx.translate.opset import FEATURES
from mlx2onnx.translate.registry import handles

from .bits import UNSIGNED_OF, bits_of, bitwise_via_planes, sum_last_axis, to_unsigned

# BitwiseBinary::Op
LOGICAL = {BitwiseOp.And: "And", BitwiseOp.Or: "Or", BitwiseOp.Xor: "Xor"}
BITWISE = {BitwiseOp.And: "BitwiseAnd", BitwiseOp.Or: "BitwiseOr", BitwiseOp.Xor: "BitwiseXor"}
SHIFTS = {BitwiseOp.LeftShift: "LEFT", BitwiseOp.RightShift: "RIGHT"}


def shift(ctx, x, amount, dtype, direction: str):
    """x << amount or x >> amount (arithmetic for signed types), ONNX-28 out-of-range rule."""
    if dtypes.is_unsigned(dtype) or ctx.has("signed BitShift"):
        return ctx.op.BitShift(x, amount, direction=direction)
    udtype = UNSIGNED_OF[dtype]
    amount = ctx.cast(amount, udtype)  # a negative amount becomes >= bits: shifted out
    if direction == "LEFT":
        return ctx.cast(ctx.op.BitShift(ctx.cast(x, udtype), amount, direction="LEFT"), dtype)
    negative = ctx.run("Less", [x, ctx.scalar(0, dtype)], dtype, out_dtype=mx.bool_)
    minus_one = ctx.scalar(-1, dtype)
    flipped = ctx.run("Where", [negative, ctx.op.Sub(minus_one, x), x], dtype, fixed=(0,))  # >= 0
    shifted = ctx.cast(ctx.op.BitShift(ctx.cast(flipped, udtype), amount, direction="RIGHT"), dtype)
    return ctx.run("Where", [negative, ctx.op.Sub(minus_one, shifted), shifted], dtype, fixed=(0,))


@handles("BitwiseBinary")
def bitwise_binary(ctx, rec):
    """inputs (a, b) of one integer or bool dtype; arguments [op: BitwiseOp]: And, Or and Xor
    (logical ops for bool), LeftShift and RightShift."""
    a, b = ctx.inputs(rec)
    (op,) = rec.args
    dtype = rec.outputs[0].dtype
    if op not in LOGICAL and op not in SHIFTS:
        raise ctx.fail(f"argument op={op!r} is not a BitwiseBinary op (0=And, 1=Or, 2=Xor, 3=LeftShift, 4=RightShift)")
    if dtype == mx.bool_:
        if op in SHIFTS:
            raise ctx.fail(f"argument op={op!r} (a shift) on bool inputs: MLX promotes bool shifts to uint8")
        return [ctx.op.__getattr__(LOGICAL[op])(a, b)]
    if not dtypes.is_integer(dtype):
        raise ctx.fail(f"BitwiseBinary on {dtypes.name(dtype)}: only integer and bool inputs exist in MLX")
    if op in SHIFTS:
        return [shift(ctx, a, b, dtype, SHIFTS[op])]
    if ctx.has("bitwise ops"):
        return [ctx.op.__getattr__(BITWISE[op])(a, b)]
    return [bitwise_via_planes(ctx, a, b, op, dtype)]


# -- View: bit reinterpretation --------------------------------------------------------


def own_onnx_type(dtype: mx.Dtype):
    """The ONNX type of ``dtype`` itself, whatever carries it in this export's float policy."""
    return dtypes.to_onnx(dtype)


def view_to_bits(ctx, x, dtype):
    """``x`` as the unsigned integers holding its bits (bool is one byte, 0 or 1). A float
    carried in a wider type (bfloat16 as float32) is first cast back to its own type,
    which is exact."""
    if dtypes.is_float(dtype):
        own = ctx.cast_like(x, own_onnx_type(dtype))
        return ctx.op.BitCast(own, to=ctx.onnx_type(UNSIGNED_OF_FLOAT[dtype]))
    return to_unsigned(ctx, x, dtype)


def view_from_bits(ctx, u, dtype):
    """The inverse of :func:`view_to_bits`; a byte other than 0 or 1 becomes True."""
    if dtypes.is_float(dtype):
        return ctx.cast(ctx.op.BitCast(u, to=own_onnx_type(dtype)), dtype)
    return ctx.cast(u, dtype)


UNSIGNED_OF_FLOAT = {mx.float16: mx.uint16, mx.bfloat16: mx.uint16, mx.float32: mx.uint32, mx.float64: mx.uint64}


@handles("View")
def view(ctx, rec):
    """inputs (x,); arguments [dtype]: the bytes of x read as dtype (little endian, row
    major). A different width scales the last dimension (f32[3, 4] -> u8[3, 16]).

    Integer and bool views are Casts (which wrap) plus BitShift splitting or joining of
    bytes; float bits need ONNX BitCast (opset 26)."""
    (x,) = ctx.inputs(rec)
    (target,) = rec.args
    source = rec.inputs[0].dtype
    if source == target:
        return [ctx.op.Identity(x)]
    if mx.complex64 in (source, target):
        raise ctx.fail(
            f"argument dtype={dtypes.name(target)}: views of complex64 cannot be expressed on real ONNX tensors"
        )
    floats = [dtypes.name(d) for d in (source, target) if dtypes.is_float(d)]
    if floats and not ctx.has("BitCast"):
        raise ctx.fail(
            f"argument dtype={dtypes.name(target)}: viewing {dtypes.name(source)} as {dtypes.name(target)} "
            f"reinterprets {floats[0]} bits, which needs ONNX BitCast (opset {FEATURES['BitCast']}); "
            + ctx.needs("BitCast")
        )
    src_u = UNSIGNED_OF_FLOAT.get(source) or UNSIGNED_OF[source]
    dst_u = UNSIGNED_OF_FLOAT.get(target) or UNSIGNED_OF[target]
    u = view_to_bits(ctx, x, source)
    src_bits, dst_bits = bits_of(source), bits_of(target)
    out_shape = list(rec.outputs[0].shape)
    if src_bits > dst_bits:  # split: lowest part first
        parts = src_bits // dst_bits
        k = ctx.const(np.arange(0, src_bits, dst_bits, dtype=ctx.numpy_type(src_u)))
        pieces = ctx.op.BitShift(ctx.unsqueeze(u, [-1]), k, direction="RIGHT")
        u = ctx.reshape(ctx.cast(pieces, dst_u), out_shape)  # Cast keeps the low bits
    elif src_bits < dst_bits:  # join consecutive parts along the last axis
        parts = dst_bits // src_bits
        k = ctx.const(np.arange(0, dst_bits, src_bits, dtype=ctx.numpy_type(dst_u)))
        grouped = ctx.reshape(ctx.cast(u, dst_u), out_shape + [parts])
        u = sum_last_axis(ctx, ctx.op.BitShift(grouped, k, direction="LEFT"), parts)
    return [view_from_bits(ctx, u, target)]
