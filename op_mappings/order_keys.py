"""Order-preserving keys: a value in a dtype onnxruntime's TopK, ArgMax and ReduceMax run
on, its order kept exactly (uint64, which has no wider type, as int64 with its sign bit
flipped). A helper module, not a handler family: reduce and sort import it, never each
other."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

SIGN_BIT = 1 << 63


def flip_sign_bit(ctx, x):
    """int64 <-> uint64 bits with the top bit flipped: maps uint64 order onto int64 order
    (an involution on the int64 view)."""
    if ctx.has("bitwise ops"):
        return ctx.op.BitwiseXor(x, ctx.const(np.array(-SIGN_BIT, np.int64)))
    return ctx.op.Add(x, ctx.const(np.array(-SIGN_BIT, np.int64)))  # wraps: same bits as the xor


def ordered_key(ctx, x, dtype, op_type):
    """``x`` (MLX dtype ``dtype``) in a dtype onnxruntime runs ``op_type`` (TopK, ArgMax,
    ReduceMax ...) on, with the order of the values kept exactly. Returns (value, key dtype).
    uint64 has no wider type: its bits are viewed as int64 with the sign bit flipped."""
    if dtype == mx.uint64 and not ctx.has_kernel(op_type, dtype):
        return flip_sign_bit(ctx, ctx.cast(x, mx.int64)), mx.uint64
    work = ctx.work_dtype(op_type, dtype)
    return ctx.cast(x, work), work


def from_key(ctx, key, key_dtype, dtype):
    """The inverse of :func:`ordered_key` for values."""
    if key_dtype == mx.uint64 and dtype == mx.uint64:
        return ctx.cast(flip_sign_bit(ctx, key), mx.uint64)
    return ctx.cast(key, dtype)
