"""Integer and bitwise primitives: BitwiseBinary (and, or, xor, shifts).

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
value; negative amounts count as out of range.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.registry import handles

# BitwiseBinary::Op
AND, OR, XOR, LEFT_SHIFT, RIGHT_SHIFT = range(5)
LOGICAL = {AND: "And", OR: "Or", XOR: "Xor"}
BITWISE = {AND: "BitwiseAnd", OR: "BitwiseOr", XOR: "BitwiseXor"}
SHIFTS = {LEFT_SHIFT: "LEFT", RIGHT_SHIFT: "RIGHT"}

UNSIGNED_OF = {
    mx.int8: mx.uint8, mx.int16: mx.uint16, mx.int32: mx.uint32, mx.int64: mx.uint64,
    mx.uint8: mx.uint8, mx.uint16: mx.uint16, mx.uint32: mx.uint32, mx.uint64: mx.uint64,
    mx.bool_: mx.uint8,
}


def bits_of(dtype: mx.Dtype) -> int:
    return dtype.size * 8


def to_unsigned(ctx, x, dtype):
    """``x`` with the same bits in the unsigned type of its width (Cast wraps)."""
    return ctx.cast(x, UNSIGNED_OF[dtype])


def bit_planes(ctx, u, udtype, bits: int):
    """Unsigned ``u`` -> its ``bits`` bits (0 or 1, lowest first) along a new last axis."""
    k = ctx.const(np.arange(bits, dtype=dtypes.to_numpy(udtype)))
    one = ctx.scalar(1, udtype)
    shifted = ctx.op.BitShift(ctx.unsqueeze(u, [-1]), k, direction="RIGHT")
    upper = ctx.op.BitShift(ctx.op.BitShift(shifted, one, direction="RIGHT"), one, direction="LEFT")
    return ctx.op.Sub(shifted, upper)


def from_bit_planes(ctx, planes, udtype, bits: int):
    """The inverse of :func:`bit_planes`: the sum of ``plane_k << k`` over the last axis.

    The bits are disjoint, so the sum has no carries. It is a tree of ``Add`` over
    strided slices: onnxruntime's int64 ``ReduceSum`` goes through double and drops the
    low bits of 64-bit values.
    """
    k = ctx.const(np.arange(bits, dtype=dtypes.to_numpy(udtype)))
    total = ctx.op.BitShift(planes, k, direction="LEFT")
    width = bits
    while width > 1:
        width //= 2
        even = ctx.slice(total, [0], [2 * width], axes=[-1], steps=[2])
        odd = ctx.slice(total, [1], [2 * width], axes=[-1], steps=[2])
        total = ctx.op.Add(even, odd)
    return ctx.squeeze(total, [-1])


def bitwise_via_planes(ctx, a, b, op: int, dtype):
    """a & b, a | b or a ^ b without the opset-18 Bitwise ops (exact, any integer width)."""
    udtype, bits = UNSIGNED_OF[dtype], bits_of(dtype)
    pa = bit_planes(ctx, to_unsigned(ctx, a, dtype), udtype, bits)
    pb = bit_planes(ctx, to_unsigned(ctx, b, dtype), udtype, bits)
    both = ctx.op.Mul(pa, pb)
    either = ctx.op.Add(pa, pb)
    if op == AND:
        planes = both
    elif op == OR:
        planes = ctx.op.Sub(either, both)
    else:
        planes = ctx.op.Sub(either, ctx.op.Add(both, both))
    return ctx.cast(from_bit_planes(ctx, planes, udtype, bits), dtype)


def shift(ctx, x, amount, dtype, direction: str):
    """x << amount or x >> amount (arithmetic for signed types), ONNX-28 out-of-range rule."""
    if dtypes.is_unsigned(dtype) or ctx.opset >= 28:
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
    """inputs (a, b) of one integer or bool dtype; arguments [op] with And=0, Or=1, Xor=2,
    LeftShift=3, RightShift=4."""
    a, b = ctx.inputs(rec)
    (op,) = rec.arguments
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
    if ctx.opset >= 18:
        return [ctx.op.__getattr__(BITWISE[op])(a, b)]
    return [bitwise_via_planes(ctx, a, b, op, dtype)]
