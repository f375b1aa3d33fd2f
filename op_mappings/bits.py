"""Bit planes: an integer split into its bits along a new last axis and summed back, and
the bitwise ops rebuilt from them where ONNX has no Bitwise ops (before opset 18). A
helper module, not a handler family: families (bitwise, creation's random bits,
elementwise's integer power) import it, never each other."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.records import BitwiseOp

UNSIGNED_OF = {
    mx.int8: mx.uint8,
    mx.int16: mx.uint16,
    mx.int32: mx.uint32,
    mx.int64: mx.uint64,
    mx.uint8: mx.uint8,
    mx.uint16: mx.uint16,
    mx.uint32: mx.uint32,
    mx.uint64: mx.uint64,
    mx.bool_: mx.uint8,
}


def bits_of(dtype: mx.Dtype) -> int:
    return dtype.size * 8


def to_unsigned(ctx, x, dtype):
    """``x`` with the same bits in the unsigned type of its width (Cast wraps)."""
    return ctx.cast(x, UNSIGNED_OF[dtype])


def bit_planes(ctx, u, udtype, bits: int):
    """Unsigned ``u`` -> its ``bits`` bits (0 or 1, lowest first) along a new last axis."""
    k = ctx.const(np.arange(bits, dtype=ctx.numpy_type(udtype)))
    one = ctx.scalar(1, udtype)
    shifted = ctx.op.BitShift(ctx.unsqueeze(u, [-1]), k, direction="RIGHT")
    upper = ctx.op.BitShift(ctx.op.BitShift(shifted, one, direction="RIGHT"), one, direction="LEFT")
    return ctx.op.Sub(shifted, upper)


def sum_last_axis(ctx, x, size: int):
    """Sum over a last axis of power-of-two ``size`` (dropped), as a tree of ``Add`` over
    strided slices: onnxruntime's int64 ``ReduceSum`` goes through double and drops the
    low bits of 64-bit values, and has no unsigned kernels."""
    while size > 1:
        size //= 2
        even = ctx.slice(x, [0], [2 * size], axes=[-1], steps=[2])
        odd = ctx.slice(x, [1], [2 * size], axes=[-1], steps=[2])
        x = ctx.op.Add(even, odd)
    return ctx.squeeze(x, [-1])


def from_bit_planes(ctx, planes, udtype, bits: int):
    """The inverse of :func:`bit_planes`: the sum of ``plane_k << k`` over the last axis
    (the bits are disjoint, so the sum has no carries)."""
    k = ctx.const(np.arange(bits, dtype=ctx.numpy_type(udtype)))
    return sum_last_axis(ctx, ctx.op.BitShift(planes, k, direction="LEFT"), bits)


def bitwise_via_planes(ctx, a, b, op: int, dtype):
    """a & b, a | b or a ^ b without the opset-18 Bitwise ops (exact, any integer width)."""
    udtype, bits = UNSIGNED_OF[dtype], bits_of(dtype)
    pa = bit_planes(ctx, to_unsigned(ctx, a, dtype), udtype, bits)
    pb = bit_planes(ctx, to_unsigned(ctx, b, dtype), udtype, bits)
    both = ctx.op.Mul(pa, pb)
    either = ctx.op.Add(pa, pb)
    if op == BitwiseOp.And:
        planes = both
    elif op == BitwiseOp.Or:
        planes = ctx.op.Sub(either, both)
    else:
        planes = ctx.op.Sub(either, ctx.op.Add(both, both))
    return ctx.cast(from_bit_planes(ctx, planes, udtype, bits), dtype)
