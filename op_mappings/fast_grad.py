"""Fused backward kernels of ``mx.fast``: RMSNormVJP and LayerNormVJP.

MLX records these only when a gradient (``mx.grad``, ``mx.vjp``) runs through
``mx.fast.rms_norm`` / ``mx.fast.layer_norm`` on a GPU stream; on the CPU the forward op
decomposes and its gradient is ordinary primitives. Their layouts are in ``mlx/fast.cpp``
(``RMSNorm::vjp``, ``LayerNorm::vjp``): the record has one output per primal, each in
that primal's shape and dtype, whichever of them the gradient asked for. A primal that was
absent in the forward call (no weight, no bias) is a 0-d ``array(1)``/``array(0)`` and its
gradient is a 0-d zero. The sums are taken in float32, as MLX's GPU kernels accumulate,
and each output is rounded once.
"""

from __future__ import annotations

import mlx.core as mx

from mlx2onnx.translate.registry import handles

F32 = mx.float32


def _row_mean(ctx, v):
    return ctx.reduce("ReduceMean", v, [-1], keepdims=True)


def _inverse_rms(ctx, v, eps: float):
    """``n = rsqrt(mean(v**2, -1) + eps)`` and ``n**3``, in float32."""
    n = ctx.op.Reciprocal(ctx.op.Sqrt(ctx.op.Add(_row_mean(ctx, ctx.op.Mul(v, v)), ctx.scalar(eps, F32))))
    return n, ctx.op.Mul(ctx.op.Mul(n, n), n)


def _over_rows(ctx, v, rank: int, spec, dtype: mx.Dtype):
    """The gradient of a per-channel parameter: ``v`` summed over every axis but the last,
    or a 0-d zero when the parameter was absent (``spec`` 0-d)."""
    if spec.rank == 0:
        return ctx.scalar(0, dtype)
    if rank > 1:
        v = ctx.reduce("ReduceSum", v, list(range(rank - 1)), keepdims=False)
    return ctx.cast(v, dtype)


@handles("RMSNormVJP")
def rms_norm_vjp(ctx, rec):
    """inputs (x, w, g): the primals of RMSNorm (w 1-D [D] or 0-d ``array(1)``) and the
    cotangent g of its output; arguments [eps]; outputs (dx, dw). With
    ``n = rsqrt(mean(x**2, -1) + eps)``: ``dx = g*w*n - x * mean(g*w*x, -1) * n**3`` and
    ``dw = sum(g * x * n)`` over every axis but the last."""
    (eps,) = rec.args
    x, w, g = (ctx.cast(v, F32) for v in ctx.inputs(rec))
    rank = rec.inputs[0].rank
    n, n3 = _inverse_rms(ctx, x, eps)
    gw = ctx.op.Mul(g, w)
    along = ctx.op.Mul(ctx.op.Mul(x, _row_mean(ctx, ctx.op.Mul(gw, x))), n3)
    dx = ctx.op.Sub(ctx.op.Mul(gw, n), along)
    dw = _over_rows(ctx, ctx.op.Mul(g, ctx.op.Mul(x, n)), rank, rec.inputs[1], rec.outputs[1].dtype)
    return [ctx.cast(dx, rec.outputs[0].dtype), dw]


@handles("LayerNormVJP")
def layer_norm_vjp(ctx, rec):
    """inputs (x, w, b, g): the primals of LayerNorm (w, b 1-D [D] or 0-d ``array(1)``,
    ``array(0)``) and the cotangent g; arguments [eps]; outputs (dx, dw, db). With
    ``xc = x - mean(x)``, ``n = rsqrt(mean(xc**2) + eps)`` and ``wg = w*g`` (means over the
    last axis): ``dx = (wg - mean(wg)) * n - xc * mean(wg*xc) * n**3``,
    ``dw = sum(g * xc * n)`` and ``db = sum(g)`` over every axis but the last."""
    (eps,) = rec.args
    x, w, _, g = (ctx.cast(v, F32) for v in ctx.inputs(rec))
    rank = rec.inputs[0].rank
    xc = ctx.op.Sub(x, _row_mean(ctx, x))
    n, n3 = _inverse_rms(ctx, xc, eps)
    wg = ctx.op.Mul(w, g)
    centred = ctx.op.Mul(ctx.op.Sub(wg, _row_mean(ctx, wg)), n)
    dx = ctx.op.Sub(centred, ctx.op.Mul(ctx.op.Mul(xc, _row_mean(ctx, ctx.op.Mul(wg, xc))), n3))
    dw = _over_rows(ctx, ctx.op.Mul(g, ctx.op.Mul(xc, n)), rank, rec.inputs[1], rec.outputs[1].dtype)
    db = _over_rows(ctx, g, rank, rec.inputs[2], rec.outputs[2].dtype)
    return [ctx.cast(dx, rec.outputs[0].dtype), dw, db]
