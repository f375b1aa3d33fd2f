"""Affine quantized weights that stay low-bit in the runtime: 4-bit blocks.

MLX's affine weight is ``w = q * scale + bias`` per group of ``group_size`` codes along K,
so for a Linear (``x @ w.T``)::

    x @ w.T = sum_j x @ (n_j * 16^j * scale).T  +  groupsum(x) @ bias.T

where ``q = sum_j 16^j n_j`` splits the codes into 4-bit nibbles (one for 2/3/4 bits,
two for 5/6/8) and ``groupsum(x)`` [..., K / group_size] sums x over each group. Each
nibble term is a zero-point-free 4-bit product, exact in float32 (``n_j * 16^j * scale``
is exact), and the bias term a small [K / group_size, N] product: the result is MLX's up
to float summation order, with no float zero points.

Two spellings of the nibble product:

* ``com.microsoft.MatMulNBits`` (the default, ``quantized_weights="packed"``), zero points
  0, with the accuracy the file asks for: ``accuracy_level=0`` computes in float32, so a
  default onnxruntime session (Python, node, web) gives MLX's numbers; ``=4``
  (``int8_activations=True``) quantizes the activations to int8 per block, faster and
  ~1e-2 relative off. MLX's rows are its B layout. OpenVINO reads it too (and quantizes
  the activations itself at its default settings), and tract (with float16 scales for
  32-code blocks): docs/runtimes.md.
* standard ONNX (``quantized_weights="dequantizelinear"``, opset 21+): ``DequantizeLinear``
  of a uint4 [K, N] tensor blocked along K, then ``MatMul``. onnxruntime fuses the pair into
  ``MatMulNBits`` at the session's ``session.qdq_matmulnbits_accuracy_level``, which the
  file cannot set: its default 4 computes with int8 activations.

mxfp4 and nvfp4 weights (``w = FP4-E2M1(q) * scale``) take the same form with two
nibbles and a bias of ``-6 * scale`` (:func:`fp4_terms`). Constant 2-D weights only;
mxfp8 and other quantized products unpack in the graph (:mod:`op_mappings.quantized`).
"""

from __future__ import annotations

import ml_dtypes
import mlx.core as mx
import numpy as np

from mlx2onnx.translate import kernels

BLOCKED_OPSET = 21  # DequantizeLinear with block_size and 4-bit types
NIBBLE = 4


def codes_of(words: np.ndarray, bits: int, rows_at_once: int = 1024) -> np.ndarray:
    """MLX's packed uint32 words [N, P] -> the codes [N, P * 32 / bits] (uint8), read
    LSB-first (3/5/6-bit codes cross byte and word boundaries)."""
    n, p = words.shape
    cols = p * 32 // bits
    out = np.empty((n, cols), np.uint8)
    for start in range(0, n, rows_at_once):
        data = np.ascontiguousarray(words[start:start + rows_at_once].astype("<u4")).view(np.uint8)
        if bits in (2, 4, 8):
            per = 8 // bits
            shifts = np.arange(per, dtype=np.uint8) * bits
            codes = (data[..., None] >> shifts) & np.uint8((1 << bits) - 1)
        else:
            stream = np.unpackbits(data, axis=-1, bitorder="little").reshape(len(data), cols, bits)
            codes = (stream * (1 << np.arange(bits, dtype=np.uint8))).sum(-1, dtype=np.uint8)
        out[start:start + rows_at_once] = codes.reshape(len(data), cols)
    return out


def fits(ctx, rec, operands, group_size: int, transpose: bool) -> bool:
    """Whether this QuantizedMatmul's weight (constant words and scales, constant biases
    when affine) can stay in 4-bit blocks."""
    if not transpose or any(v is not None and v.const_value is None for v in operands):
        return False
    if len(rec.inputs[1].shape) != 2 or group_size < 16 or group_size & (group_size - 1):
        return False
    if _contrib(ctx):
        return True
    # onnxruntime 1.32 runs DequantizeLinear up to version 25, not the opset 28 one
    return ctx.opset >= BLOCKED_OPSET and kernels.serves("DequantizeLinear", ctx.opset)


def _contrib(ctx) -> bool:
    """Whether the blocks are onnxruntime's MatMulNBits (else standard DequantizeLinear)."""
    return ctx.settings.quantized_weights != "dequantizelinear"


FLOAT32_ACCURACY, INT8_ACCURACY = 0, 4  # MatMulNBits accuracy_level: float32 compute, int8 activations


def affine_terms(codes: np.ndarray, scale: np.ndarray, bits: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``q * scale`` as 4-bit terms ``(n_j, 16^j * scale)``: q = sum_j 16^j n_j."""
    if bits <= NIBBLE:
        return [(codes, scale)]
    return [((codes >> (NIBBLE * j)) & np.uint8(15), scale * np.float32(16**j)) for j in range(-(-bits // NIBBLE))]


FP4_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12], np.int16)  # 2 * |E2M1 value| by magnitude code


def fp4_terms(codes: np.ndarray, scale: np.ndarray) -> tuple[list, np.ndarray]:
    """FP4-E2M1(q) * scale as 4-bit terms and a bias: 2 * value + 12 is an integer in
    0..24, split into n0 = min(it, 15) and n1 = the rest, so value * scale =
    (n0 + n1) * scale / 2 - 6 * scale (every product exact in float32)."""
    doubled = FP4_DOUBLED[codes & 7] * np.where(codes & 8, -1, 1).astype(np.int16) + 12
    low = np.minimum(doubled, 15).astype(np.uint8)
    high = (doubled - low).astype(np.uint8)
    half = scale * np.float32(0.5)
    return [(low, half), (high, half)], scale * np.float32(-6)


def blocked_matmul(ctx, rec, x, terms, bias: np.ndarray, group_size: int):
    """float32 ``x @ w.T`` for ``w = sum(n * step for n, step in terms) + bias`` per group:
    each term a 4-bit block product, the bias as ``groupsum(x) @ bias.T`` (see module)."""
    k = terms[0][0].shape[1]
    x = ctx.cast(x, mx.float32)
    product = _matmul_nbits if _contrib(ctx) else _dequantize_matmul
    total = None
    for nibble, step in terms:
        term = product(ctx, x, nibble, step.astype(np.float32), group_size)
        total = term if total is None else ctx.op.Add(total, term)
    return ctx.op.Add(total, _bias_term(ctx, rec, x, bias.astype(np.float32), group_size, k))


def _dequantize_matmul(ctx, x, nibble: np.ndarray, scale: np.ndarray, group_size: int):
    """x @ (nibble * scale).T as DequantizeLinear(uint4 [K, N], blocked along K) + MatMul."""
    codes = ctx.const(np.ascontiguousarray(nibble.T).astype(ml_dtypes.uint4))
    steps = ctx.const(np.ascontiguousarray(scale.T))
    weight = ctx.op.DequantizeLinear(codes, steps, axis=0, block_size=group_size)
    return ctx.op.MatMul(x, weight)


def _matmul_nbits(ctx, x, nibble: np.ndarray, scale: np.ndarray, group_size: int):
    """x @ (nibble * scale).T as com.microsoft.MatMulNBits (zero points 0), float32 compute
    unless the export asks for int8 activations."""
    n, k = nibble.shape
    blocks = k // group_size
    pairs = nibble.reshape(n, blocks, group_size // 2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    zero_points = np.zeros(n * -(-blocks // 2), np.uint8)
    return ctx.op.MatMulNBits(
        x, ctx.const(packed), ctx.const(scale.reshape(-1)), ctx.const(zero_points),
        _domain="com.microsoft", K=k, N=n, bits=NIBBLE, block_size=group_size,
        accuracy_level=INT8_ACCURACY if ctx.settings.int8_activations else FLOAT32_ACCURACY,
    )


def _bias_term(ctx, rec, x, biases: np.ndarray, group_size: int, k: int):
    """groupsum(x) @ bias.T: x [..., K] summed over each group [..., K / g], times [K / g, N]."""
    lead = list(rec.inputs[0].shape[:-1])
    grouped = ctx.reshape(x, [*lead, k // group_size, group_size])
    sums = ctx.reduce("ReduceSum", grouped, [-1], keepdims=False)
    return ctx.op.MatMul(sums, ctx.const(np.ascontiguousarray(biases.T)))
