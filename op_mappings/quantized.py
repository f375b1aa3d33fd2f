"""Quantized matrix products: QuantizedMatmul, GatherQMM, Quantize.

MLX packs quantized codes as an LSB-first bitstream in little-endian uint32 words (code
k of a row occupies bits k*bits .. k*bits+bits-1; 3/5/6-bit codes cross words). Each
group of ``group_size`` codes along the last axis shares a scale (and, in affine mode, a
bias): affine w = q * scale + bias; mxfp4/nvfp4 w = FP4-E2M1(q) * scale; mxfp8
w = FP8-E4M3(q) * scale, where mx scales are uint8 E8M0 (2^(s-127), s=0 read as 2^-127)
and nvfp4 scales are uint8 FP8-E4M3. The CPU kernels cast the decoded scale to the
activation dtype before use; the tables below do the same.

How constant weights are exported is the export's ``quantized_weights`` setting
(``ctx.settings.quantized_weights``, from :class:`mlx2onnx.Exporter`):

* ``"packed"`` (default): a constant affine, mxfp4 or nvfp4 Linear weight stays in 4-bit blocks the
  runtime keeps packed and multiplies with its low-bit kernel (:mod:`op_mappings.lowbit`:
  ``MatMulNBits`` carrying its accuracy level, float32 unless the export asks for int8
  activations). Every other quantized weight (mxfp8, GatherQMM, quantized embeddings'
  rows, weights that are not constants) as ``"bytes"``.
* ``"bytes"``: MLX's uint32 words, as bytes, scales and biases stay initializers exactly
  as MLX holds them and the graph unpacks them (BitShift, BitwiseAnd or Mod below opset
  18, Gather for the fp tables, Cast, Mul, Add) before a MatMul. A 4-bit model stays about
  4.5 bits per weight on disk and every runtime reads it exactly (tract rounds 4-bit
  block scales to float16);
  onnxruntime constant-folds the unpacking to float32 at session start.
* ``"dequantize"``: MLX itself (``mx.dequantize``) dequantizes constant weights at export
  time; they are stored as float initializers of the activation dtype, already in the
  layout the MatMul wants. Weights that are not constants are unpacked in the graph.
* ``"dequantizelinear"``: as ``"packed"``, with the 4-bit blocks in standard ONNX
  (``DequantizeLinear`` + ``MatMul``, opset 21+), whose arithmetic in onnxruntime follows
  the session's accuracy level (int8 activations by default).

The float arithmetic runs in float32 (onnxruntime has no float16/bfloat16 MatMul).
"""

from __future__ import annotations

import math

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.records import QuantizationMode
from mlx2onnx.dtypes import array_to_numpy, numpy_to_array
from mlx2onnx.translate.markers import KEEP_PACKED, WORDS_FROM_BYTES
from mlx2onnx.translate.registry import handles
from mlx2onnx.translate.rounding import cast_rounded
from mlx2onnx.translate.settings import QUANTIZED_WEIGHT_CHOICES

from . import lowbit
from .matmul import flat_indices

AFFINE, MXFP4, MXFP8, NVFP4 = QuantizationMode

PACKED, BYTES, DEQUANTIZE, DEQUANTIZELINEAR = QUANTIZED_WEIGHT_CHOICES

FP4_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)


def _check_mode(ctx, group_size: int, bits: int, mode: int) -> None:
    if mode == AFFINE:
        if bits not in (2, 3, 4, 5, 6, 8):
            raise ctx.fail(f"bits={bits} is not supported: affine quantization uses 2, 3, 4, 5, 6 or 8 bits")
    elif mode in (MXFP4, NVFP4):
        if bits != 4:
            raise ctx.fail(f"bits={bits} is not supported for {QuantizationMode(mode).name}: it uses 4 bits")
    elif mode == MXFP8:
        if bits != 8:
            raise ctx.fail(f"bits={bits} is not supported for mxfp8: it uses 8 bits")
    else:
        raise ctx.fail(f"mode={mode} is not supported: 0 (affine), 1 (mxfp4), 2 (mxfp8) and 3 (nvfp4) are")
    if group_size <= 0 or group_size % 16:
        raise ctx.fail(f"group_size={group_size} is not supported: a positive multiple of 16 is needed")


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
    if ctx.opset >= 18:
        return ctx.op.BitwiseAnd(x, ctx.const(np.asarray((1 << bits) - 1, np_dtype)))
    return ctx.op.Mod(x, ctx.const(np.asarray(1 << bits, np_dtype)))


def _period(bits: int) -> tuple[int, int]:
    """(codes, words) of the smallest whole number of words holding whole codes."""
    codes = 32 // math.gcd(32, bits)
    return codes, codes * bits // 32




def unpack_codes(ctx, packed, shape, bits: int):
    """uint32 words of MLX shape ``[..., P]`` -> unsigned codes ``[..., P * 32 / bits]``.

    Every node is marked :data:`KEEP_PACKED`: folding them on constant words would store
    one uint32 per code (8x a 4-bit weight) instead of the packed words."""
    first = len(ctx.nodes)
    codes = _unpack_codes(ctx, packed, shape, bits)
    _keep_packed(ctx, first)
    return codes


def _keep_packed(ctx, first: int) -> None:
    for node in ctx.nodes[first:]:
        node.metadata_props[KEEP_PACKED] = "1"


def picked_codes(ctx, packed, spec, index, count: int, bits: int):
    """The codes ``[count, R, P * 32 / bits]`` of the matrices ``index`` picks from packed
    words of MLX shape ``[..., R, P]``. Constant words of a portable export are picked from
    their bytes (:func:`as_bytes`: OpenVINO misreads uint32 words at or above 2^31)."""
    rows, width = spec.shape[-2:]
    words = _constant(packed)
    from_bytes = ctx.portable and words is not None
    source = as_bytes(ctx, packed, words) if from_bytes else packed
    first = len(ctx.nodes)
    picked = ctx.op.Gather(ctx.reshape(source, [-1, rows, width * 4 if from_bytes else width]), index, axis=0)
    codes = (_unpack_bytes if from_bytes else _unpack_codes)(ctx, picked, [count, rows, width], bits)
    _keep_packed(ctx, first)
    return codes


def _unpack_codes(ctx, packed, shape, bits: int):
    words = _constant(packed)
    if ctx.portable and words is not None:
        return _unpack_bytes(ctx, as_bytes(ctx, packed, words), shape, bits)
    *lead, words = shape
    count = words * 32 // bits
    if 32 % bits == 0:
        per_word = 32 // bits
        shifts = ctx.const(np.arange(per_word, dtype=np.uint32) * bits)
        parts = ctx.op.BitShift(ctx.unsqueeze(packed, [len(shape)]), shifts, direction="RIGHT")
        return ctx.reshape(_mask(ctx, parts, bits, np.uint32), [*lead, count])
    codes, span = _period(bits)
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
    if id(packed) in ctx.byte_views:
        return ctx.byte_views[id(packed)]
    raw = np.ascontiguousarray(words.astype("<u4", copy=False)).view(np.uint8)
    name = packed.name
    packed.name = ctx.fresh(f"{name}.words")  # left unused: the passes drop it
    ctx.release(name)
    ctx.byte_views[id(packed)] = ctx.const(raw.reshape(*words.shape[:-1], words.shape[-1] * 4), name=name)
    return ctx.byte_views[id(packed)]


def words_from_bytes(ctx, data, shape):
    """uint32 words ``[..., P]`` joined from their little-endian bytes ``[..., P * 4]`` by
    shifts and Add (disjoint bits). OpenVINO misreads the words at or above 2^31, so the
    fields MLX cuts out of them are assembled from the bytes by passes.byte_fields."""
    *lead, words = shape
    parts = ctx.cast(ctx.reshape(data, [*lead, words, 4]), mx.uint32)
    shifted = ctx.op.BitShift(parts, ctx.const(np.array([0, 8, 16, 24], np.uint32)), direction="LEFT")
    b0, b1, b2, b3 = (ctx.op.Gather(shifted, ctx.ints(k), axis=-1) for k in range(4))
    words = ctx.op.Add(ctx.op.Add(b0, b1), ctx.op.Add(b2, b3))
    words.producer().metadata_props[WORDS_FROM_BYTES] = "1"  # passes.byte_fields reads fields from the bytes
    return words


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
        shifted = ctx.op.Div(ctx.unsqueeze(wide, [len(shape)]), ctx.const(2 ** (np.arange(8 // bits, dtype=np.int32) * bits)))
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


def _swap_last(ctx, x, rank: int):
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return ctx.op.Transpose(x, perm=perm)


# -- export-time dequantization ---------------------------------------------------------
def _constant(value):
    return None if value is None or value.const_value is None else value.const_value.numpy()


def folded_weights(ctx, w, scales, biases, group_size, bits, mode, transpose, dtype):
    """Float weights ``[..., K, N]`` of MLX dtype ``dtype`` dequantized by MLX at export
    time, or None when the option is off or an operand is not a constant."""
    if ctx.settings.quantized_weights != DEQUANTIZE:
        return None
    arrays = [_constant(w), _constant(scales)] + ([_constant(biases)] if mode == AFFINE else [])
    if any(a is None for a in arrays):
        return None
    mx_arrays = [numpy_to_array(a) for a in arrays]
    dense = mx.dequantize(
        mx_arrays[0], mx_arrays[1], mx_arrays[2] if mode == AFFINE else None,
        group_size=group_size, bits=bits, mode=QuantizationMode(mode).name,
    ).astype(dtype)
    dense = array_to_numpy(dense)
    if transpose:
        dense = np.swapaxes(dense, -1, -2)
    return ctx.const(np.ascontiguousarray(dense))


def _blocked(ctx, rec, x, operands, group_size, bits, mode, transpose, dtype):
    """The product with the weight in 4-bit blocks (:mod:`op_mappings.lowbit`), or None."""
    if ctx.settings.quantized_weights not in (PACKED, DEQUANTIZELINEAR) or mode not in (AFFINE, MXFP4, NVFP4):
        return None
    if not lowbit.fits(ctx, rec, operands, group_size, transpose):
        return None
    words, scales, biases = (None if v is None else v.const_value.numpy() for v in operands)
    if mode == AFFINE:
        terms, bias = lowbit.affine_terms(words, scales.astype(np.float32), bits), biases
    else:
        codes = lowbit.codes_of(words, bits)
        decoded = scale_table(mode, dtype)[scales.astype(np.int64)]
        if not np.all(np.isfinite(decoded)):  # a scale the activation dtype cannot hold
            return None
        terms, bias = lowbit.fp4_terms(codes, decoded.astype(np.float32))
    return lowbit.blocked_matmul(ctx, rec, x, terms, bias, group_size)


def _quantized_operands(values, mode):
    """(x, w, scales, biases or None, rest) from the inputs of a quantized record."""
    x, w, scales = values[:3]
    if mode == AFFINE:
        return x, w, scales, values[3], values[4:]
    return x, w, scales, None, values[3:]


@handles("QuantizedMatmul")
def quantized_matmul(ctx, rec):
    """inputs (x[..., M, K], w uint32, scales, biases only when mode is affine); arguments
    [group_size, bits, mode, transpose]: x @ dequantize(w).T when transpose (w is
    [..., N, K*bits/32]), else x @ dequantize(w) (w is [..., K, N*bits/32])."""
    group_size, bits, mode, transpose = rec.args
    _check_mode(ctx, group_size, bits, mode)
    x, w, scales, biases, rest = _quantized_operands(ctx.inputs(rec), mode)
    if rest:
        raise ctx.fail(f"{len(rec.inputs)} inputs are not supported: a global scale input is not handled")
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("MatMul", dtype)
    w_shape = rec.inputs[1].shape
    blocked = _blocked(ctx, rec, x, (w, scales, biases), group_size, bits, mode, transpose, dtype)
    if blocked is not None:
        return [ctx.cast(blocked, dtype)]
    weights = folded_weights(ctx, w, scales, biases, group_size, bits, mode, transpose, dtype)
    if weights is None:
        weights = dequantize_weights(ctx, w, scales, biases, w_shape, group_size, bits, mode, dtype, work)
        if transpose:
            weights = _swap_last(ctx, weights, len(w_shape))
    product = ctx.op.MatMul(ctx.cast(x, work), ctx.cast(weights, work))
    return [ctx.cast(product, dtype)]


@handles("GatherQMM")
def gather_qmm(ctx, rec):
    """inputs (x[..., M, K], w[..., N, Kp] uint32, scales, biases (affine only), lhs_idx,
    rhs_idx uint32); arguments [group_size, bits, mode, transpose, left_sorted,
    right_sorted]: out[i] = x_flat[lhs[i]] @ dequantize(w_flat[rhs[i]]) (.T when
    transpose), out shape = broadcast(idx shapes) + [M, N]. The sorted flags are hints."""
    group_size, bits, mode, transpose, _left_sorted, _right_sorted = rec.args
    _check_mode(ctx, group_size, bits, mode)
    x, w, scales, biases, rest = _quantized_operands(ctx.inputs(rec), mode)
    if len(rest) != 2:
        raise ctx.fail(f"{len(rec.inputs)} inputs are not supported: expected x, w, scales, (biases), lhs, rhs")
    lhs, rhs = rest
    dtype = rec.outputs[0].dtype
    work = ctx.work_dtype("MatMul", dtype)
    batch = rec.outputs[0].shape[:-2]
    m, k = rec.inputs[0].shape[-2:]
    w_spec, s_spec = rec.inputs[1], rec.inputs[2]
    lhs_flat = flat_indices(ctx, lhs, rec.inputs[-2].shape, batch)
    rhs_flat = flat_indices(ctx, rhs, rec.inputs[-1].shape, batch)
    xs = ctx.op.Gather(ctx.reshape(ctx.cast(x, work), [-1, m, k]), lhs_flat, axis=0)
    dense = folded_weights(ctx, w, scales, biases, group_size, bits, mode, transpose, dtype)
    if dense is not None:
        inner = rec.inputs[0].shape[-1]
        dense = ctx.reshape(dense, [-1, inner, rec.outputs[0].shape[-1]])
        weights = ctx.cast(ctx.op.Gather(dense, rhs_flat, axis=0), work)
    else:
        def pick(value, spec):
            return ctx.op.Gather(ctx.reshape(value, [-1, *spec.shape[-2:]]), rhs_flat, axis=0)

        count = int(np.prod(batch, dtype=np.int64))
        weights = dequantize_weights(
            ctx, None, pick(scales, s_spec), pick(biases, s_spec) if biases is not None else None,
            [count, *w_spec.shape[-2:]], group_size, bits, mode, dtype, work,
            codes=picked_codes(ctx, w, w_spec, rhs_flat, count, bits),
        )
        if transpose:
            weights = _swap_last(ctx, weights, 3)
    product = ctx.op.MatMul(xs, weights)
    return [ctx.cast(ctx.reshape(product, rec.outputs[0].shape), dtype)]


# -- Quantize -------------------------------------------------------------------------
def _fold_quantize(ctx, array, group_size, bits, mode):
    outs = mx.quantize(numpy_to_array(array), group_size=group_size, bits=bits, mode=QuantizationMode(mode).name)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return [ctx.const(np.ascontiguousarray(array_to_numpy(o.astype(ctx.carried(o.dtype))))) for o in outs]


def _pack_codes(ctx, q, lead, cols, bits):
    """Integer-valued float32 codes ``[*lead, cols]`` -> uint32 words (LSB-first)."""
    codes, span = _period(bits)
    shifts = np.arange(codes)[None, :] * bits - 32 * np.arange(span)[:, None]  # [span, codes]
    overlap = (shifts > -bits) & (shifts < 32)
    mul = np.where(overlap & (shifts >= 0), 2.0 ** np.clip(shifts, 0, 62), 0).astype(np.int64)
    mul = np.where(overlap & (shifts < 0), 1, mul).astype(np.int64)
    div = np.where(overlap & (shifts < 0), 2.0 ** np.clip(-shifts, 0, 62), 1).astype(np.int64)
    grouped = ctx.reshape(ctx.cast(q, mx.int64), [*lead, cols // codes, 1, codes])
    parts = ctx.op.Div(ctx.op.Mul(grouped, ctx.const(mul)), ctx.const(div))
    parts = ctx.op.Mod(parts, ctx.const(np.asarray(1 << 32, np.int64)))
    words = ctx.reduce("ReduceSum", parts, [len(lead) + 2], keepdims=False)
    return ctx.cast(ctx.reshape(words, [*lead, cols * bits // 32]), mx.uint32)


def _affine_quantize(ctx, w, spec, group_size, bits, out_dtype):
    """MLX's CPU affine quantize, step by step in float32 (exact: every step is one
    correctly rounded IEEE operation, rint is round-half-even like ONNX Round)."""
    f32 = mx.float32
    *lead, cols = spec.shape
    groups = cols // group_size
    axis = len(lead) + 1
    wf = ctx.reshape(ctx.cast(w, f32), [*lead, groups, group_size])
    w_max = ctx.reduce("ReduceMax", wf, [axis])
    w_min = ctx.reduce("ReduceMin", wf, [axis])
    n_bins = ctx.scalar(float((1 << bits) - 1), f32)
    zero = ctx.scalar(0.0, f32)
    mask = ctx.op.Greater(ctx.op.Abs(w_min), ctx.op.Abs(w_max))
    scale = ctx.op.Max(ctx.op.Div(ctx.op.Sub(w_max, w_min), n_bins), ctx.scalar(1e-7, f32))
    scale = ctx.op.Where(mask, scale, ctx.op.Neg(scale))
    edge = ctx.op.Where(mask, w_min, w_max)
    q0 = ctx.op.Round(ctx.op.Div(edge, scale))
    nonzero = ctx.op.Not(ctx.op.Equal(q0, zero))
    scale = ctx.op.Where(nonzero, ctx.op.Div(edge, q0), scale)
    bias = ctx.op.Where(nonzero, edge, zero)
    q = ctx.op.Clip(ctx.op.Round(ctx.op.Div(ctx.op.Sub(wf, bias), scale)), zero, n_bins)
    words = _pack_codes(ctx, q, lead, cols, bits)
    scales = cast_rounded(ctx, ctx.reshape(scale, [*lead, groups]), out_dtype)
    biases = cast_rounded(ctx, ctx.reshape(bias, [*lead, groups]), out_dtype)
    return [words, scales, biases]


@handles("Quantize")
def quantize(ctx, rec):
    """arguments [group_size, bits, mode, dequantize]. dequantize False: inputs (w) ->
    (w_q uint32, scales, biases when affine); True: inputs (w_q, scales, (biases)) -> (w).
    A constant w is quantized by MLX at export time; a runtime w is quantized in the graph
    (affine mode, MLX's CPU algorithm)."""
    group_size, bits, mode, dequantize = rec.args
    _check_mode(ctx, group_size, bits, mode)
    values = ctx.inputs(rec)
    if dequantize:
        dtype = rec.outputs[0].dtype
        biases = values[2] if mode == AFFINE else None
        dense = dequantize_weights(ctx, values[0], values[1], biases, rec.inputs[0].shape,
                                   group_size, bits, mode, dtype, mx.float32)
        return [cast_rounded(ctx, dense, dtype)]
    constant = _constant(values[0])
    if constant is not None:
        return _fold_quantize(ctx, constant, group_size, bits, mode)
    if mode != AFFINE:
        raise ctx.fail(
            f"mode={int(mode)} ({QuantizationMode(mode).name}) quantization of a runtime input is not supported: "
            "only affine quantization of runtime arrays is built in the graph; quantize constant weights"
        )
    return _affine_quantize(ctx, values[0], rec.inputs[0], group_size, bits, rec.outputs[1].dtype)
