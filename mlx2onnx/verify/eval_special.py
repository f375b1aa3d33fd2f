"""MLX evaluators of the interpreter: FFT, linear algebra and the fused mx.fast records."""

from __future__ import annotations

import mlx.core as mx

from ..errors import CannotEvaluate
from .evaluators import evaluator, out_spec


# -- FFT and linear algebra -----------------------------------------------------------------
@evaluator("FFT")
def fft(rec, xs, a):
    (x,) = xs
    axes = list(a.axes)
    out = out_spec(rec)
    if not a.real:
        fn = mx.fft.ifftn if a.inverse else mx.fft.fftn
        return [fn(x, s=[out.shape[ax] for ax in axes], axes=axes)]
    if not a.inverse:
        return [mx.fft.rfftn(x, s=[x.shape[ax] for ax in axes], axes=axes)]
    return [mx.fft.irfftn(x, s=[out.shape[ax] for ax in axes], axes=axes)]


_CPU = mx.cpu


@evaluator("QRF")
def qrf(rec, xs, a):
    return list(mx.linalg.qr(xs[0], stream=_CPU))


@evaluator("SVD")
def svd(rec, xs, a):
    result = mx.linalg.svd(xs[0], compute_uv=bool(a.compute_uv), stream=_CPU)
    return list(result) if isinstance(result, (list, tuple)) else [result]


@evaluator("Inverse")
def inverse(rec, xs, a):
    if a.tri:
        return [mx.linalg.tri_inv(xs[0], upper=bool(a.upper), stream=_CPU)]
    return [mx.linalg.inv(xs[0], stream=_CPU)]


@evaluator("Cholesky")
def cholesky(rec, xs, a):
    return [mx.linalg.cholesky(xs[0], upper=bool(a.upper), stream=_CPU)]


@evaluator("Eig")
def eig(rec, xs, a):
    if a.compute_eigenvectors:
        return list(mx.linalg.eig(xs[0], stream=_CPU))
    return [mx.linalg.eigvals(xs[0], stream=_CPU)]


@evaluator("Eigh")
def eigh(rec, xs, a):
    if a.compute_eigenvectors:
        return list(mx.linalg.eigh(xs[0], UPLO=a.uplo, stream=_CPU))
    return [mx.linalg.eigvalsh(xs[0], UPLO=a.uplo, stream=_CPU)]


# -- fused mx.fast primitives (GPU traces) ---------------------------------------------------
@evaluator("RMSNorm")
def rms_norm(rec, xs, a):
    x, w = xs
    return [mx.fast.rms_norm(x, w if w.ndim else None, a.eps)]


@evaluator("LayerNorm")
def layer_norm(rec, xs, a):
    x, w, b = xs
    return [mx.fast.layer_norm(x, w if w.ndim else None, b if b.ndim else None, a.eps)]


@evaluator("RMSNormVJP", "LayerNormVJP")
def norm_vjp(rec, xs, a):
    """The gradient of the forward norm with respect to every primal; a primal that was
    absent (0-d) gets a 0-d zero, as MLX's kernel gives."""
    *primals, g = xs
    forward = rms_norm if rec.name == "RMSNormVJP" else layer_norm
    _, grads = mx.vjp(lambda *p: forward(rec, list(p), a), primals, [g])
    return [d if p.ndim else mx.zeros_like(p) for d, p in zip(grads, primals)]


@evaluator("RoPE")
def rope(rec, xs, a):
    if not a.forward:
        raise CannotEvaluate("RoPE with forward=False only appears in gradients")
    x, offset, *freqs = xs
    freqs = freqs[0] if freqs else None
    return [
        mx.fast.rope(
            x,
            a.dims,
            traditional=bool(a.traditional),
            base=None if freqs is not None else a.base,
            scale=a.scale,
            offset=offset,
            freqs=freqs,
        )
    ]


@evaluator("ScaledDotProductAttention")
def sdpa(rec, xs, a):
    if a.output_logsumexp:
        raise CannotEvaluate("ScaledDotProductAttention with output_logsumexp has no Python op")
    q, k, v, *rest = xs
    sinks = rest.pop() if a.has_sinks else None
    mask = "causal" if a.do_causal else (rest[0] if rest else None)
    return [mx.fast.scaled_dot_product_attention(q, k, v, scale=a.scale, mask=mask, sinks=sinks)]
