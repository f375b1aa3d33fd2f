"""Matrix products: Matmul, AddMM."""

from __future__ import annotations

from mlx2onnx.registry import handles


@handles("Matmul")
def matmul(ctx, rec):
    """inputs (a[..., M, K], b[..., K, N]) with batch dims already broadcast; arguments []."""
    a, b = ctx.inputs(rec)
    return [ctx.run("MatMul", [a, b], rec.outputs[0].dtype)]


@handles("AddMM")
def addmm(ctx, rec):
    """inputs (a, b, c) with the addend last, c broadcast to the output; arguments
    [alpha, beta]: alpha * (a @ b) + beta * c."""
    a, b, c = ctx.inputs(rec)
    alpha, beta = (float(v) for v in rec.arguments)
    dtype = rec.outputs[0].dtype
    if rec.inputs[0].rank == rec.inputs[1].rank == 2:
        return [ctx.run("Gemm", [a, b, c], dtype, alpha=alpha, beta=beta)]
    work = ctx.work_dtype("MatMul", dtype)
    product = ctx.op.MatMul(ctx.cast(a, work), ctx.cast(b, work))
    addend = ctx.cast(c, work)
    if alpha != 1.0:
        product = ctx.op.Mul(product, ctx.scalar(alpha, work))
    if beta != 1.0:
        addend = ctx.op.Mul(addend, ctx.scalar(beta, work))
    return [ctx.cast(ctx.op.Add(product, addend), dtype)]
