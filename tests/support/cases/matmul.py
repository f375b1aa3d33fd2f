"""Parity cases: Matmul, AddMM, GatherMM (MoE routing), BlockMaskedMM, Hadamard."""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from tests.support.harness import FLOATS, Case, rand, randn, with_edges


def indices(rng, shape, high):
    return mx.array(rng.integers(0, high, size=shape).astype(np.uint32))


def block_mask(rng, shape, dtype):
    if dtype == mx.bool_:
        return rand(rng, shape, mx.bool_)
    return rand(rng, shape, mx.float32, -2.0, 2.0)


def poisoned_operands(rng, dt, size=64, block=32):
    """Operands with NaN/inf planted only in the blocks their bool masks drop."""
    tiles = size // block
    ops, masks = [], []
    for _ in range(2):
        keep = rng.random((tiles, tiles)) < 0.5
        keep[0, 0], keep[-1, -1] = True, False
        values = np.array(randn(rng, (size, size), dt))
        dropped = ~np.kron(keep, np.ones((block, block), bool))
        poison = rng.choice(np.array([np.nan, np.inf, -np.inf], np.float32), size=values.shape)
        values = np.where(dropped & (rng.random(values.shape) < 0.3), poison, values)
        ops.append(mx.array(values.astype(np.float32)))
        masks.append(mx.array(keep))
    return ops[0], ops[1], masks[0], masks[1]


CASES = [
    Case("matmul.matmul", mx.matmul, lambda rng, dt: (randn(rng, (3, 4), dt), randn(rng, (4, 5), dt)),
         dtypes=FLOATS, primitives=("Matmul",), onnx_ops=("MatMul",)),
    Case("matmul.matmul_batched", mx.matmul, lambda rng, dt: (randn(rng, (2, 3, 4), dt), randn(rng, (2, 4, 5), dt)),
         primitives=("Matmul",)),
    Case("matmul.addmm", lambda c, a, b: mx.addmm(c, a, b, alpha=0.5, beta=2.0),
         lambda rng, dt: (randn(rng, (3, 5), dt), randn(rng, (3, 4), dt), randn(rng, (4, 5), dt)),
         dtypes=FLOATS, primitives=("AddMM",)),
    Case("matmul.addmm_batched", lambda c, a, b: mx.addmm(c, a, b, alpha=1.5, beta=-1.0),
         lambda rng, dt: (randn(rng, (5,), dt), randn(rng, (2, 3, 4), dt), randn(rng, (2, 4, 5), dt)),
         primitives=("AddMM",)),
    # GatherMM: MLX's CPU kernel is float32 only.
    Case("matmul.gather_mm",
         lambda a, b, li, ri: mx.gather_mm(a, b, lhs_indices=li, rhs_indices=ri),
         lambda rng, dt: (randn(rng, (3, 2, 4), dt), randn(rng, (5, 4, 6), dt), indices(rng, (7,), 3), indices(rng, (7,), 5)),
         primitives=("GatherMM",), onnx_ops=("Gather", "MatMul")),
    Case("matmul.gather_mm_rhs_only",
         lambda a, b, ri: mx.gather_mm(a, b, rhs_indices=ri),
         lambda rng, dt: (randn(rng, (4, 1, 8), dt), randn(rng, (6, 8, 3), dt), indices(rng, (4,), 6)),
         primitives=("GatherMM",)),
    Case("matmul.gather_mm_sorted",
         lambda a, b, ri: mx.gather_mm(a, b, rhs_indices=ri, sorted_indices=True),
         lambda rng, dt: (randn(rng, (5, 1, 4), dt), randn(rng, (3, 4, 2), dt), mx.sort(indices(rng, (5,), 3))),
         primitives=("GatherMM",)),
    Case("matmul.gather_mm_2d_indices",
         lambda a, b, li, ri: mx.gather_mm(a, b, lhs_indices=li, rhs_indices=ri),
         lambda rng, dt: (randn(rng, (2, 3, 3, 4), dt), randn(rng, (2, 2, 4, 5), dt), indices(rng, (2, 3), 6),
                          indices(rng, (2, 3), 4)),
         primitives=("GatherMM",)),
    Case("matmul.gather_mm_edges",
         lambda a, b, li, ri: mx.gather_mm(a, b, lhs_indices=li, rhs_indices=ri),
         lambda rng, dt: (with_edges(rng, randn(rng, (3, 2, 4), dt)), with_edges(rng, randn(rng, (5, 4, 6), dt)),
                          indices(rng, (7,), 3), indices(rng, (7,), 5)),
         primitives=("GatherMM",)),
]

# BlockMaskedMM: MLX's CPU kernel is float32 only; a bool mask zeroes blocks, a float
# mask scales them. Shapes that are not block multiples leave partial edge blocks.
for mask_dtype in (mx.bool_, mx.float32):
    tag = "bool" if mask_dtype == mx.bool_ else "float"
    CASES += [
        Case(f"matmul.block_masked_mm_out_{tag}",
             lambda a, b, m: mx.block_masked_mm(a, b, 32, m),
             lambda rng, dt, md=mask_dtype: (randn(rng, (64, 64), dt), randn(rng, (64, 64), dt), block_mask(rng, (2, 2), md)),
             primitives=("BlockMaskedMM",), onnx_ops=("MatMul",)),
        Case(f"matmul.block_masked_mm_operands_{tag}",
             lambda a, b, ma, mb: mx.block_masked_mm(a, b, 32, None, ma, mb),
             lambda rng, dt, md=mask_dtype: (randn(rng, (40, 70), dt), randn(rng, (70, 50), dt),
                                             block_mask(rng, (2, 3), md), block_mask(rng, (3, 2), md)),
             primitives=("BlockMaskedMM",)),
        Case(f"matmul.block_masked_mm_all_{tag}",
             lambda a, b, mo, ma, mb: mx.block_masked_mm(a, b, 32, mo, ma, mb),
             lambda rng, dt, md=mask_dtype: (randn(rng, (2, 64, 40), dt), randn(rng, (2, 40, 96), dt),
                                             block_mask(rng, (2, 2, 3), md), block_mask(rng, (2, 2, 2), md),
                                             block_mask(rng, (2, 2, 3), md)),
             primitives=("BlockMaskedMM",)),
    ]
CASES += [
    Case("matmul.block_masked_mm_64",
         lambda a, b, mo, ma, mb: mx.block_masked_mm(a, b, 64, mo, ma, mb),
         lambda rng, dt: (randn(rng, (100, 64), dt), randn(rng, (64, 130), dt), block_mask(rng, (2, 3), mx.bool_),
                          block_mask(rng, (2, 1), mx.bool_), block_mask(rng, (1, 3), mx.bool_)),
         primitives=("BlockMaskedMM",)),
    # NaN/inf inside a block masked by a bool mask become 0, as in MLX.
    Case("matmul.block_masked_mm_edges",
         lambda a, b, ma, mb: mx.block_masked_mm(a, b, 32, None, ma, mb),
         lambda rng, dt: poisoned_operands(rng, dt), primitives=("BlockMaskedMM",)),
]

# Hadamard: n = 2^k or m * 2^k with m in {12, 20, 28}; the default scale is 1/sqrt(n).
for n in (4, 8, 12, 20, 28, 64, 96):
    CASES.append(
        Case(f"matmul.hadamard_{n}", mx.hadamard_transform, lambda rng, dt, n=n: (randn(rng, (3, n), dt),),
             dtypes=FLOATS, primitives=("Hadamard",), onnx_ops=("Add",))
    )
CASES += [
    Case("matmul.hadamard_scale", lambda x: mx.hadamard_transform(x, scale=0.25),
         lambda rng, dt: (randn(rng, (2, 3, 16), dt),), dtypes=FLOATS, primitives=("Hadamard",)),
    # MLX's order of operations, so float32 is MLX's bit for bit (a product with the matrix is not)
    Case("matmul.hadamard_bit_exact", lambda x, y: (mx.hadamard_transform(x, scale=0.3), mx.hadamard_transform(y)),
         lambda rng, dt: (randn(rng, (3, 1024), dt), randn(rng, (2, 5, 28 * 16), dt)), primitives=("Hadamard",),
         tolerances={"float32": (0.0, 0.0)}),
    Case("matmul.hadamard_edges", mx.hadamard_transform, lambda rng, dt: (randn(rng, (4, 8), dt),),
         primitives=("Hadamard",), edges=True),
]
