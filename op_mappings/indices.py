"""Index helpers shared by the gathered products (matmul's GatherMM, quantized's
GatherQMM). A helper module, not a handler family."""

from __future__ import annotations

import mlx.core as mx


def flat_indices(ctx, index, shape, batch):
    """uint32 indices of MLX shape ``shape`` broadcast to ``batch`` and flattened, int64."""
    index = ctx.cast(index, mx.int64)
    if tuple(shape) != tuple(batch):
        index = ctx.op.Expand(index, ctx.ints(list(batch)))
    return ctx.reshape(index, [-1])
