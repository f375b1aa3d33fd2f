"""Matrix products: Matmul, AddMM, GatherMM, BlockMaskedMM, Hadamard."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx.translate.registry import handles
from mlx2onnx.translate.rounding import round_within

from .indices import flat_indices


@handles("Matmul")
def matmul(ctx, rec):
    """inputs (a[..., M, K], b[..., K, N]) with batch dims already broadcast; arguments []."""
    a, b = ctx.inputs(rec)
    return [ctx.run("MatMul", [a, b], rec.outputs[0].dtype)]


@handles("AddMM")
def addmm(ctx, rec):
    """inputs (a, b, c) with the addend last, c broadcast to the output; arguments
    [alpha, beta]: alpha * (a @ b) + beta * c. With beta == 0 MLX never reads c (an inf or
    NaN there does not reach the result), so neither does the export."""
    a, b, c = ctx.inputs(rec)
    alpha, beta = (float(v) for v in rec.args)
    dtype = rec.outputs[0].dtype
    if rec.inputs[0].rank == rec.inputs[1].rank == 2:
        return [ctx.run("Gemm", [a, b, c], dtype, alpha=alpha, beta=beta)]
    work = ctx.work_dtype("MatMul", dtype)
    product = ctx.op.MatMul(ctx.cast(a, work), ctx.cast(b, work))
    if alpha != 1.0:
        product = ctx.op.Mul(product, ctx.scalar(alpha, work))
    if beta == 0.0:
        return [ctx.cast(product, dtype)]
    addend = ctx.cast(c, work)
    if beta != 1.0:
        addend = ctx.op.Mul(addend, ctx.scalar(beta, work))
    return [ctx.cast(ctx.op.Add(product, addend), dtype)]


@handles("GatherMM")
def gather_mm(ctx, rec):
    """inputs (a[..., M, K], b[..., K, N], lhs_idx, rhs_idx uint32); arguments
    [left_sorted, right_sorted] (performance hints only): out[i] = a_flat[lhs[i]] @
    b_flat[rhs[i]] where *_flat folds the batch dims; out shape = idx shape + [M, N]."""
    a, b, lhs, rhs = ctx.inputs(rec)
    out = rec.outputs[0]
    batch = out.shape[:-2]
    a_spec, b_spec = rec.inputs[0], rec.inputs[1]
    work = ctx.work_dtype("MatMul", out.dtype)
    a_rows = ctx.op.Gather(
        ctx.reshape(ctx.cast(a, work), [-1, *a_spec.shape[-2:]]),
        flat_indices(ctx, lhs, rec.inputs[2].shape, batch),
        axis=0,
    )
    b_rows = ctx.op.Gather(
        ctx.reshape(ctx.cast(b, work), [-1, *b_spec.shape[-2:]]),
        flat_indices(ctx, rhs, rec.inputs[3].shape, batch),
        axis=0,
    )
    return [ctx.cast(ctx.reshape(ctx.op.MatMul(a_rows, b_rows), out.shape), out.dtype)]


def _block_mask(ctx, data, mask, mask_spec, rows, cols, block_size, work):
    """MLX's CPU block masking of a [..., rows, cols] matrix: a bool mask zeroes the
    blocks that are False (NaN and inf become 0), a float mask multiplies each block."""
    row_blocks = ctx.ints(np.arange(rows) // block_size)
    col_blocks = ctx.ints(np.arange(cols) // block_size)
    expanded = ctx.op.Gather(ctx.op.Gather(mask, row_blocks, axis=-2), col_blocks, axis=-1)
    if mask_spec.dtype == mx.bool_:
        return ctx.op.Where(expanded, data, ctx.scalar(0.0, work))
    return ctx.op.Mul(data, ctx.cast(expanded, work))


@handles("BlockMaskedMM")
def block_masked_mm(ctx, rec):
    """inputs (a[..., M, K], b[..., K, N], then mask_out for 3 inputs, mask_lhs and
    mask_rhs for 4, all three for 5; masks are bool or float at block level
    [..., ceil(rows / block_size), ceil(cols / block_size)]); arguments [block_size]."""
    (block_size,) = rec.args
    values = ctx.inputs(rec)
    count = len(values)
    if count not in (3, 4, 5):
        raise ctx.fail(f"{count} inputs are not supported: expected 3, 4 or 5")
    out = rec.outputs[0]
    work = ctx.work_dtype("MatMul", out.dtype)
    m, k = rec.inputs[0].shape[-2:]
    n = rec.inputs[1].shape[-1]
    a, b = ctx.cast(values[0], work), ctx.cast(values[1], work)
    if count >= 4:
        a = _block_mask(ctx, a, values[-2], rec.inputs[-2], m, k, block_size, work)
        b = _block_mask(ctx, b, values[-1], rec.inputs[-1], k, n, block_size, work)
    product = ctx.op.MatMul(a, b)
    if count in (3, 5):
        product = _block_mask(ctx, product, values[2], rec.inputs[2], m, n, block_size, work)
    return [ctx.cast(product, out.dtype)]


@handles("Hadamard")
def hadamard(ctx, rec):
    """inputs (x[..., n]); arguments [scale]: the scaled Walsh-Hadamard transform along the
    last axis, n = m * 2^k with m in (1, 12, 20, 28), in MLX's own order of operations, so a
    float32 result is MLX's bit for bit: k butterfly stages (a + b, a - b over pairs 1, 2, 4
    ... apart, each stored in the dtype), the scale applied in the last stage when m = 1;
    for m > 1 then each of the m outputs summed term by term from 0 over the m slices with
    the signs of MLX's m-by-m matrix, times the scale. O(n log n) where a product with the
    n-by-n matrix was O(n^2) and left a float32 result off by the rounding of its sums."""
    (scale,) = rec.args
    (x,) = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    n = rec.inputs[0].shape[-1]
    m = next((f for f in (12, 20, 28) if n % f == 0), 1) if n & (n - 1) else 1
    blocks = n // m
    scale = ctx.scalar(float(np.float32(scale)), mx.float32)
    y = ctx.op.Reshape(ctx.cast(x, mx.float32), ctx.ints([-1, m, blocks]))
    h = 1
    while h < blocks:
        y = _butterfly(ctx, y, h, blocks, m, dtype)
        if m == 1 and 2 * h == blocks:
            y = round_within(ctx, ctx.op.Mul(y, scale), dtype, mx.float32)
        h *= 2
    if m > 1:
        y = ctx.op.Mul(_signed_sums(ctx, y, m), scale)
    return [ctx.cast(ctx.op.Reshape(y, ctx.op.Shape(x)), dtype)]


def _butterfly(ctx, y, h, blocks, m, dtype):
    """One stage over pairs ``h`` apart in each block: (a, b) -> (a + b, a - b), stored in
    the dtype as MLX stores it."""
    pairs = ctx.op.Reshape(y, ctx.ints([-1, m, blocks // (2 * h), 2, h]))
    a = ctx.op.Slice(pairs, ctx.ints([0]), ctx.ints([1]), ctx.ints([3]))
    b = ctx.op.Slice(pairs, ctx.ints([1]), ctx.ints([2]), ctx.ints([3]))
    halves = [
        round_within(ctx, ctx.op.Add(a, b), dtype, mx.float32),
        round_within(ctx, ctx.op.Sub(a, b), dtype, mx.float32),
    ]
    return ctx.op.Reshape(ctx.op.Concat(*halves, axis=3), ctx.ints([-1, m, blocks]))


def _signed_sums(ctx, y, m):
    """[..., m, blocks] -> out[j] = sum over k of sign[j, k] * y[k], added in k order from
    0 as MLX adds (float32); the signs are MLX's m-by-m matrix, read from its transform of
    the identity."""
    signs = np.array(mx.hadamard_transform(mx.eye(m, dtype=mx.float32), scale=1.0))  # [k, j]
    total = ctx.scalar(0.0, mx.float32)
    for k in range(m):
        term = ctx.op.Slice(y, ctx.ints([k]), ctx.ints([k + 1]), ctx.ints([1]))
        total = ctx.op.Add(total, ctx.op.Mul(term, ctx.const(signs[k].reshape(m, 1).astype(np.float32))))
    return total
