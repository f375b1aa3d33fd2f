"""MLX's quantized codes: the tables that decode them (built by running MLX, rounded to the
activation dtype as MLX does) and their unpacking in the graph (shifts and masks of the
uint32 words, or of their bytes) into dequantized weights. The layouts: :mod:`.quantized`.
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.records import QuantizationMode
from mlx2onnx.translate.markers import KEEP_PACKED, WORDS_FROM_BYTES

AFFINE, MXFP4, MXFP8, NVFP4 = QuantizationMode


def constant_array(value):
    """The NumPy array a constant ONNX value holds, or None."""
    return None if value is None or value.const_value is None else value.const_value.numpy()


FP4_E2M1 = np.array(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32
)


# -- code tables (built by running MLX, rounded to the activation dtype as MLX does) ------
def _round_to(values: np.ndarray, dtype: mx.Dtype) -> np.ndarray:
    """float32 ``values`` rounded to MLX dtype ``dtype`` by MLX, returned as float32."""
    return np.array(mx.array(values.astype(np.float32)).astype(dtype).astype(mx.float32))


def _fp8_e4m3() -> np.ndarray:
    return np.array(mx.from_fp8(mx.arange(256).astype(mx.uint8), dtype=mx.float32))


def code_table(mode: int, dtype: mx.Dtype) -> np.ndarray:
    return _round_to(FP4_E2M1 if mode in (MXFP4, NVFP4) else _fp8_e4m3(), dtype)


def scale_table(mode: int, dtype: mx.Dtype) -> np.ndarray:
    """The 256 decoded scales, indexed by the uint8 scale code."""
    if mode == NVFP4:
        return _round_to(_fp8_e4m3(), dtype)
    codes = np.arange(256, dtype=np.uint32)
    bf16_bits = np.where(codes == 0, 0x40, codes << 7).astype(np.uint32)
    return _round_to((bf16_bits << 16).view(np.float32), dtype)


# -- unpacking ------------------------------------------------------------------------
def _mask(ctx, x, bits: int, np_dtype):
    if ctx.has("bitwise ops"):
        return ctx.op.BitwiseAnd(x, ctx.const(np.asarray((1 << bits) - 1, np_dtype)))
    return ctx.op.Mod(x, ctx.const(np.asarray(1 << bits, np_dtype)))


def period(bits: int) -> tuple[int, int]:
    """(codes, words) of the smallest whole number of words holding whole codes."""
    codes = 32 // math.gcd(32, bits)
    return codes, codes * bits // 32


def unpack_codes(ctx, packed, shape, bits: int):
    """uint32 words of MLX shape ``[..., P]`` -> unsigned codes ``[..., P * 32 / bits]``.

    Every node is marked :data:`KEEP_PACKED`: folding them on constant words would store
    one uint32 per code (8x a 4-bit weight) instead of the packed words."""
    with ctx.marking(KEEP_PACKED):
        return _unpack_codes(ctx, packed, shape, bits)


def picked_codes(ctx, packed, spec, index, count: int, bits: int):
    """The codes ``[count, R, P * 32 / bits]`` of the matrices ``index`` picks from packed
    words of MLX shape ``[..., R, P]``. Constant words of a portable export are picked from
    their bytes (:func:`as_bytes`: OpenVINO misreads uint32 words at or above 2^31)."""
    rows, width = spec.shape[-2:]
    words = constant_array(packed)
    from_bytes = ctx.portable and words is not None
    source = as_bytes(ctx, packed, words) if from_bytes else packed
    with ctx.marking(KEEP_PACKED):
        picked = ctx.op.Gather(ctx.reshape(source, [-1, rows, width * 4 if from_bytes else width]), index, axis=0)
        return (_unpack_bytes if from_bytes else _unpack_codes)(ctx, picked, [count, rows, width], bits)


def _unpack_codes(ctx, packed, shape, bits: int):
    words = constant_array(packed)
    if ctx.portable and words is not None:
        return _unpack_bytes(ctx, as_bytes(ctx, packed, words), shape, bits)
    *lead, words = shape
    count = words * 32 // bits
    if 32 % bits == 0:
        per_word = 32 // bits
        shifts = ctx.const(np.arange(per_word, dtype=np.uint32) * bits)
        parts = ctx.op.BitShift(ctx.unsqueeze(packed, [len(shape)]), shifts, direction="RIGHT")
        return ctx.reshape(_mask(ctx, parts, bits, np.uint32), [*lead, count])
    codes, span = period(bits)
    starts = np.arange(codes) * bits
    grouped = ctx.reshape(ctx.cast(packed, mx.uint64), [*lead, words // span, span])
    following = ctx.op.Gather(grouped, ctx.ints(np.minimum(np.arange(span) + 1, span - 1)), axis=-1)
    high = ctx.op.BitShift(following, ctx.const(np.asarray(32, np.uint64)), direction="LEFT")
    pairs = ctx.op.Add(grouped, high)  # word j in the low half, word j+1 in the high half
    picked = ctx.op.Gather(pairs, ctx.ints(starts // 32), axis=-1)
    shifted = ctx.op.BitShift(picked, ctx.const((starts % 32).astype(np.uint64)), direction="RIGHT")
    return ctx.reshape(_mask(ctx, shifted, bits, np.uint64), [*lead, count])


def as_bytes(ctx, packed, words: np.ndarray):
    """Constant packed words as their little-endian bytes ``[..., P * 4]`` (uint8), under
    the words' own name. A portable export stores them so: OpenVINO's CPU plugin computes
    uint32 (and 64-bit integers) in 32-bit signed or float arithmetic, which loses every
    word at or above 2^31, while its uint8 arithmetic is exact."""

    def raw():
        return (
            np.ascontiguousarray(words.astype("<u4", copy=False))
            .view(np.uint8)
            .reshape(*words.shape[:-1], words.shape[-1] * 4)
        )

    return ctx.relaid(packed, raw)


def words_from_bytes(ctx, data, shape):
    """uint32 words ``[..., P]`` joined from their little-endian bytes ``[..., P * 4]`` by
    shifts and Add (disjoint bits). OpenVINO misreads the words at or above 2^31, so the
    fields MLX cuts out of them are assembled from the bytes by passes.byte_fields."""
    *lead, words = shape
    parts = ctx.cast(ctx.reshape(data, [*lead, words, 4]), mx.uint32)
    shifted = ctx.op.BitShift(parts, ctx.const(np.array([0, 8, 16, 24], np.uint32)), direction="LEFT")
    b0, b1, b2, b3 = (ctx.op.Gather(shifted, ctx.ints(k), axis=-1) for k in range(4))
    return ctx.mark(ctx.op.Add(ctx.op.Add(b0, b1), ctx.op.Add(b2, b3)), WORDS_FROM_BYTES)  # passes.byte_fields


def _unpack_bytes(ctx, data, shape, bits: int):
    """The LSB-first codes of bytes ``[..., P * 4]``, cut out in int32 with Div and Mod by
    powers of two (exact for these non-negative values): OpenVINO's CPU plugin folds
    uint8 shifts and masks of constant bytes wrongly before a MatMul, and its int32
    arithmetic is exact. Codes of 2 or 4 bits sit inside one byte; 3, 5 and 6-bit codes
    may cross into the next byte, so two bytes are joined (values below 2^16) first."""
    *lead, words = shape
    count = words * 32 // bits
    if bits == 8:
        return ctx.reshape(data, [*lead, count])
    wide = ctx.cast(data, mx.int32)
    if 8 % bits == 0:
        shifted = ctx.op.Div(
            ctx.unsqueeze(wide, [len(shape)]), ctx.const(2 ** (np.arange(8 // bits, dtype=np.int32) * bits))
        )
        return ctx.reshape(ctx.op.Mod(shifted, ctx.const(np.asarray(1 << bits, np.int32))), [*lead, count])
    codes = 8 // math.gcd(8, bits)
    span = codes * bits // 8
    starts = np.arange(codes) * bits
    grouped = ctx.reshape(wide, [*lead, words * 4 // span, span])
    low = ctx.op.Gather(grouped, ctx.ints(starts // 8), axis=-1)
    high = ctx.op.Gather(grouped, ctx.ints(np.minimum(starts // 8 + 1, span - 1)), axis=-1)
    pairs = ctx.op.Add(low, ctx.op.Mul(high, ctx.const(np.asarray(256, np.int32))))
    shifted = ctx.op.Div(pairs, ctx.const((2 ** (starts % 8)).astype(np.int32)))
    return ctx.reshape(ctx.op.Mod(shifted, ctx.const(np.asarray(1 << bits, np.int32))), [*lead, count])


def dequantize_weights(ctx, w, scales, biases, w_shape, group_size, bits, mode, dtype, work, codes=None):
    """Weights ``[..., R, C]`` in ``work`` from packed words of MLX shape ``[..., R, P]``
    (or from their ``codes``, already unpacked).

    ``dtype`` is the activation dtype the decoded tables are rounded to."""
    *lead, rows, words = w_shape
    cols = words * 32 // bits
    groups = cols // group_size
    codes = unpack_codes(ctx, w, w_shape, bits) if codes is None else codes
    if mode == AFFINE:
        values = ctx.cast(codes, work)
    else:
        table = ctx.const(code_table(mode, dtype).astype(ctx.numpy_type(work)))
        values = ctx.op.Gather(table, ctx.cast(codes, mx.int64), axis=0)
    values = ctx.reshape(values, [*lead, rows, groups, group_size])
    axis = len(lead) + 2
    if mode == AFFINE:
        scale = ctx.unsqueeze(ctx.cast(scales, work), [axis])
        bias = ctx.unsqueeze(ctx.cast(biases, work), [axis])
        values = ctx.op.Add(ctx.op.Mul(values, scale), bias)
    else:
        table = ctx.const(scale_table(mode, dtype).astype(ctx.numpy_type(work)))
        scale = ctx.op.Gather(table, ctx.cast(scales, mx.int64), axis=0)
        values = ctx.op.Mul(values, ctx.unsqueeze(scale, [axis]))
    return ctx.reshape(values, [*lead, rows, cols])


def swap_last(ctx, x, rank: int):
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return ctx.op.Transpose(x, perm=perm)
