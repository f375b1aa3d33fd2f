"""Affine quantized weights that stay low-bit in the runtime: 4-bit blocks.

MLX's affine weight is ``w = q * scale + bias`` per group of ``group_size`` codes along K,
so for a Linear (``x @ w.T``)::

    x @ w.T = sum_j x @ ((n_j - z_j) * 16^j * scale).T  +  groupsum(x) @ centre.T

where ``q = sum_j 16^j n_j`` splits the codes into 4-bit nibbles (one for 2/3/4 bits,
two for 5/6/8), each centred on its block's zero point ``z_j`` (the middle of the
nibble's values in that block), ``groupsum(x)`` [..., K / group_size] sums x over each
group, and ``centre = bias + sum_j z_j * 16^j * scale`` (computed in float64, rounded
once) is about the group's middle. Each nibble term is a 4-bit block product,
and the centre term a small [K / group_size, N] product: the result is MLX's up to float
summation order. Centred, no term is larger than MLX's own products: with zero points 0
the bias term (``bias`` is the group's minimum) and the code terms were each about
``|bias| * sum|x|`` and cancelled, which left errors 100x MLX's where a group's
activations share a sign and the result is small (fuzz program 4989 of seed 20261206:
3.9e-4 on 0.716; now 8e-6, as dequantized float weights give).

Two spellings of the nibble product:

* ``com.microsoft.MatMulNBits`` (the default, ``quantized_weights="packed"``), per-block
  zero points, with the accuracy the file asks for: ``accuracy_level=0`` computes in float32, so a
  default onnxruntime session (Python, node, web) gives MLX's numbers; ``=4``
  (``int8_activations=True``) quantizes the activations to int8 per block, faster and
  ~1e-2 relative off. MLX's rows are its B layout. OpenVINO reads it too (and quantizes
  the activations itself at its default settings), and tract (with float16 scales for
  32-code blocks): docs/runtimes.md.
* standard ONNX (``quantized_weights="dequantizelinear"``, opset 21+): ``DequantizeLinear``
  of a uint4 [K, N] tensor blocked along K with its zero points, then ``MatMul``. onnxruntime fuses the pair into
  ``MatMulNBits`` at the session's ``session.qdq_matmulnbits_accuracy_level``, which the
  file cannot set: its default 4 computes with int8 activations.

mxfp4 and nvfp4 weights (``w = FP4-E2M1(q) * scale``) take the same form with two
nibbles and a bias of ``-6 * scale`` (:func:`fp4_terms`), centred the same way. Constant 2-D weights only;
mxfp8 and other quantized products unpack in the graph (:mod:`op_mappings.quantized`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import mlx.core as mx
import numpy as np

from mlx2onnx.translate.markers import WEIGHT_BITS

NIBBLE = 4


def codes_of(words: np.ndarray, bits: int, rows_at_once: int = 1024) -> np.ndarray:
    """MLX's packed uint32 words [N, P] -> the codes [N, P * 32 / bits] (uint8), read
    LSB-first (3/5/6-bit codes cross byte and word boundaries)."""
    n, p = words.shape
    cols = p * 32 // bits
    out = np.empty((n, cols), np.uint8)
    for start in range(0, n, rows_at_once):
        data = np.ascontiguousarray(words[start : start + rows_at_once].astype("<u4")).view(np.uint8)
        if bits in (2, 4, 8):
            per = 8 // bits
            shifts = np.arange(per, dtype=np.uint8) * bits
            codes = (data[..., None] >> shifts) & np.uint8((1 << bits) - 1)
        else:
            stream = np.unpackbits(data, axis=-1, bitorder="little").reshape(len(data), cols, bits)
            codes = (stream * (1 << np.arange(bits, dtype=np.uint8))).sum(-1, dtype=np.uint8)
        out[start : start + rows_at_once] = codes.reshape(len(data), cols)
    return out


class Nibbles:
    """4-bit codes [N, K] held as MatMulNBits stores them: bytes [N, K / 2], two codes to a
    byte, low nibble first. MLX packs 4-bit codes the same way (LSB-first in little-endian
    uint32 words), so a 4-bit weight's bytes are used as they are (:meth:`of_words`: a view,
    nothing unpacked or copied; an 8B model's weights in seconds, not minutes)."""

    def __init__(self, packed: np.ndarray):
        self.packed = packed
        self.shape = (packed.shape[0], 2 * packed.shape[1])

    @classmethod
    def of_words(cls, words: np.ndarray) -> "Nibbles":
        """MLX's 4-bit words [N, K / 8] (uint32)."""
        return cls(np.ascontiguousarray(words.astype("<u4", copy=False)).view(np.uint8))

    @classmethod
    def of_codes(cls, codes: np.ndarray) -> "Nibbles":
        """Codes [N, K] (uint8, each below 16)."""
        return cls(_two_per_byte(codes))

    def codes(self) -> np.ndarray:
        out = np.empty(self.shape, np.uint8)
        out[:, 0::2], out[:, 1::2] = self.packed & 15, self.packed >> 4
        return out

    def middles(self, group_size: int, rows_at_once: int = 1024) -> np.ndarray:
        """The zero point of each block of ``group_size`` codes: the middle of its values
        (uint8 [N, K / group_size])."""
        n, blocks = self.shape[0], self.shape[1] // group_size
        out = np.empty((n, blocks), np.uint8)

        def rows(start: int) -> None:
            part = self.packed[start : start + rows_at_once].reshape(-1, blocks, group_size // 2)
            low, high = part & np.uint8(15), part >> 4
            least = _halving(np.minimum(low, high), np.minimum).astype(np.uint16)
            most = _halving(np.maximum(low, high), np.maximum)
            out[start : start + rows_at_once] = (least + most + 1) // 2

        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # NumPy's ufuncs let go of the GIL
            list(pool.map(rows, range(0, n, rows_at_once)))
        return out


def _halving(values: np.ndarray, op) -> np.ndarray:
    """``op`` over the last axis (a power of two long) by halves: whole-array operations,
    ~1.7x faster than NumPy's reduction along a short axis (0.089 s against 0.154 s for a
    14336 x 4096 weight here)."""
    while values.shape[-1] > 1:
        half = values.shape[-1] // 2
        values = op(values[..., :half], values[..., half:])
    return values[..., 0]


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
    return ctx.has("blocked DequantizeLinear") and ctx.serves("DequantizeLinear")


def _contrib(ctx) -> bool:
    """Whether the blocks are onnxruntime's MatMulNBits (else standard DequantizeLinear)."""
    return ctx.settings.quantized_weights != "dequantizelinear"


FLOAT32_ACCURACY, INT8_ACCURACY = 0, 4  # MatMulNBits accuracy_level: float32 compute, int8 activations


def affine_terms(words: np.ndarray, scale: np.ndarray, bits: int) -> list[tuple[Nibbles, np.ndarray]]:
    """``q * scale`` as 4-bit terms ``(n_j, 16^j * scale)``: q = sum_j 16^j n_j, from MLX's
    packed words (4-bit ones as they are)."""
    if bits == NIBBLE:
        return [(Nibbles.of_words(words), scale)]
    codes = codes_of(words, bits)
    if bits < NIBBLE:
        return [(Nibbles.of_codes(codes), scale)]
    return [
        (Nibbles.of_codes((codes >> (NIBBLE * j)) & np.uint8(15)), scale * np.float32(16**j))
        for j in range(-(-bits // NIBBLE))
    ]


FP4_DOUBLED = np.array([0, 1, 2, 3, 4, 6, 8, 12], np.int16)  # 2 * |E2M1 value| by magnitude code


def fp4_terms(codes: np.ndarray, scale: np.ndarray) -> tuple[list, np.ndarray]:
    """FP4-E2M1(q) * scale as 4-bit terms and a bias: 2 * value + 12 is an integer in
    0..24, split into n0 = min(it, 15) and n1 = the rest, so value * scale =
    (n0 + n1) * scale / 2 - 6 * scale (every product exact in float32)."""
    doubled = FP4_DOUBLED[codes & 7] * np.where(codes & 8, -1, 1).astype(np.int16) + 12
    low = np.minimum(doubled, 15).astype(np.uint8)
    high = (doubled - low).astype(np.uint8)
    half = scale * np.float32(0.5)
    return [(Nibbles.of_codes(low), half), (Nibbles.of_codes(high), half)], scale * np.float32(-6)


def blocked_matmul(ctx, rec, x, terms, bias: np.ndarray, group_size: int, bits: int):
    """float32 ``x @ w.T`` for ``w = sum(n * step for n, step in terms) + bias`` per group:
    each term a 4-bit block product centred on its blocks' zero points, the rest as
    ``groupsum(x) @ centre.T`` (see module). The first term's node records the MLX
    weights' width, ``bits`` (``WEIGHT_BITS``: a package names its file by it)."""
    k = terms[0][0].shape[1]
    x = ctx.cast(x, mx.float32)
    product = _matmul_nbits if _contrib(ctx) else _dequantize_matmul
    total = None
    centre = bias.astype(np.float64)
    for nibble, step in terms:
        zero = nibble.middles(group_size)
        term = product(ctx, x, nibble, step.astype(np.float32), zero, group_size)
        if total is None:
            term.producer().metadata_props[WEIGHT_BITS] = str(bits)
        total = term if total is None else ctx.op.Add(total, term)
        centre = centre + zero * step.astype(np.float64)
    return ctx.op.Add(total, _bias_term(ctx, rec, x, centre.astype(np.float32), group_size, k))


def _dequantize_matmul(ctx, x, nibble: Nibbles, scale: np.ndarray, zero: np.ndarray, group_size: int):
    """x @ ((nibble - zero) * scale).T as DequantizeLinear(uint4 [K, N] blocked along K,
    with zero points) + MatMul."""
    codes = ctx.const(np.ascontiguousarray(nibble.codes().T).astype(ml_dtypes.uint4))
    steps = ctx.const(np.ascontiguousarray(scale.T))
    zeros = ctx.const(np.ascontiguousarray(zero.T).astype(ml_dtypes.uint4))
    weight = ctx.op.DequantizeLinear(codes, steps, zeros, axis=0, block_size=group_size)
    return ctx.op.MatMul(x, weight)


def _matmul_nbits(ctx, x, nibble: Nibbles, scale: np.ndarray, zero: np.ndarray, group_size: int):
    """x @ ((nibble - zero) * scale).T as com.microsoft.MatMulNBits (zero points per
    block, two to a byte, low nibble first), float32 compute unless the export asks for
    int8 activations."""
    n, k = nibble.shape
    packed = nibble.packed.reshape(n, k // group_size, group_size // 2)
    return ctx.op.MatMulNBits(
        x,
        ctx.const(packed),
        ctx.const(scale.reshape(-1)),
        ctx.const(_two_per_byte(zero).reshape(-1)),
        _domain="com.microsoft",
        K=k,
        N=n,
        bits=NIBBLE,
        block_size=group_size,
        accuracy_level=INT8_ACCURACY if ctx.settings.int8_activations else FLOAT32_ACCURACY,
    )


def _two_per_byte(nibbles: np.ndarray) -> np.ndarray:
    """4-bit values packed two to a byte along the last axis, low nibble first (an odd
    length padded with 0), as MatMulNBits stores codes and zero points."""
    if nibbles.shape[-1] % 2:
        nibbles = np.concatenate([nibbles, np.zeros((*nibbles.shape[:-1], 1), nibbles.dtype)], axis=-1)
    return (nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)).astype(np.uint8)


def _bias_term(ctx, rec, x, biases: np.ndarray, group_size: int, k: int):
    """groupsum(x) @ bias.T: x [..., K] summed over each group [..., K / g], times [K / g, N]."""
    lead = list(rec.inputs[0].shape[:-1])
    grouped = ctx.reshape(x, [*lead, k // group_size, group_size])
    sums = ctx.reduce("ReduceSum", grouped, [-1], keepdims=False)
    return ctx.op.MatMul(sums, ctx.const(np.ascontiguousarray(biases.T)))
