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

import mlx.core as mx
import numpy as np

from mlx2onnx.capture.records import QuantizationMode
from mlx2onnx.dtypes import array_to_numpy, numpy_to_array
from mlx2onnx.translate.registry import handles
from mlx2onnx.translate.rounding import cast_rounded
from mlx2onnx.translate.settings import QUANTIZED_WEIGHT_CHOICES

from . import lowbit
from .indices import flat_indices
from .quant_codes import (
    AFFINE,
    MXFP4,
    MXFP8,
    NVFP4,
    constant_array,
    dequantize_weights,
    period,
    picked_codes,
    scale_table,
    swap_last,
)

PACKED, BYTES, DEQUANTIZE, DEQUANTIZELINEAR = QUANTIZED_WEIGHT_CHOICES


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


# -- export-time dequantization ---------------------------------------------------------
def folded_weights(ctx, w, scales, biases, group_size, bits, mode, transpose, dtype):
    """Float weights ``[..., K, N]`` of MLX dtype ``dtype`` dequantized by MLX at export
    time, or None when the option is off or an operand is not a constant."""
    if ctx.settings.quantized_weights != DEQUANTIZE:
        return None
    arrays = [constant_array(w), constant_array(scales)] + ([constant_array(biases)] if mode == AFFINE else [])
    if any(a is None for a in arrays):
        return None
    mx_arrays = [numpy_to_array(a) for a in arrays]
    dense = mx.dequantize(
        mx_arrays[0],
        mx_arrays[1],
        mx_arrays[2] if mode == AFFINE else None,
        group_size=group_size,
        bits=bits,
        mode=QuantizationMode(mode).name,
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
    return lowbit.blocked_matmul(ctx, rec, x, terms, bias, group_size, bits)


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
            weights = swap_last(ctx, weights, len(w_shape))
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

        count = 1
        for size in batch:  # a product of sizes, dynamic ones (SymInt) included
            count = count * size
        weights = dequantize_weights(
            ctx,
            None,
            pick(scales, s_spec),
            pick(biases, s_spec) if biases is not None else None,
            [count, *w_spec.shape[-2:]],
            group_size,
            bits,
            mode,
            dtype,
            work,
            codes=picked_codes(ctx, w, w_spec, rhs_flat, count, bits),
        )
        if transpose:
            weights = swap_last(ctx, weights, 3)
    product = ctx.op.MatMul(xs, weights)
    return [ctx.cast(ctx.reshape(product, rec.outputs[0].shape), dtype)]


# -- Quantize -------------------------------------------------------------------------
def _fold_quantize(ctx, array, group_size, bits, mode):
    outs = mx.quantize(numpy_to_array(array), group_size=group_size, bits=bits, mode=QuantizationMode(mode).name)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return [ctx.const(np.ascontiguousarray(array_to_numpy(o.astype(ctx.carried(o.dtype))))) for o in outs]


def _pack_codes(ctx, q, lead, cols, bits):
    """Integer-valued float32 codes ``[*lead, cols]`` -> uint32 words (LSB-first)."""
    codes, span = period(bits)
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
        dense = dequantize_weights(
            ctx, values[0], values[1], biases, rec.inputs[0].shape, group_size, bits, mode, dtype, mx.float32
        )
        return [cast_rounded(ctx, dense, dtype)]
    constant = constant_array(values[0])
    if constant is not None:
        return _fold_quantize(ctx, constant, group_size, bits, mode)
    if mode != AFFINE:
        raise ctx.fail(
            f"mode={int(mode)} ({QuantizationMode(mode).name}) quantization of a runtime input is not supported: "
            "only affine quantization of runtime arrays is built in the graph; quantize constant weights"
        )
    return _affine_quantize(ctx, values[0], rec.inputs[0], group_size, bits, rec.outputs[1].dtype)
