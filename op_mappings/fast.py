"""Fused ``mx.fast`` primitives: RMSNorm, LayerNorm, RoPE, ScaledDotProductAttention.

MLX records these only on a GPU stream (Metal or CUDA); on the CPU the ``mx.fast`` ops
decompose into plain primitives before export. Their layouts are in ``mlx/fast.cpp``
(the leading ``nullptr`` of each state is dropped by the export callback).

Where the target opset has the fused ONNX op and onnxruntime runs it exactly, the
handler emits it (LayerNormalization 17, RMSNormalization / RotaryEmbedding 23,
Attention 23-24: onnxruntime runs Attention 25 as its function body); otherwise it
writes the exact decomposition. float16 and bfloat16 are computed in float32 and
rounded once at the end, as MLX's GPU kernels do.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from mlx2onnx.translate.markers import BOOL_MASK_BIAS
from mlx2onnx.translate.registry import handles

F32 = mx.float32


def _fused(ctx, op_type: str, dtype: mx.Dtype) -> bool:
    """Whether the fused ``op_type`` exists at the target opset and ORT runs it on ``dtype``
    (as the graph carries it: the export's float policy may carry bfloat16 as float32)."""
    return ctx.has(op_type) and ctx.has_kernel(op_type, ctx.carried(dtype))


def _per_channel(ctx, value, spec, size: int, dtype: mx.Dtype):
    """A 1-D [size] weight or bias; MLX passes a 0-d ``array(1)``/``array(0)`` when absent."""
    if spec.rank == 1:
        return value
    if spec.rank != 0:
        raise ctx.fail(f"input {spec.name} has shape {spec.shape}; expected a 0-d or 1-D [{size}] array")
    return ctx.run("Expand", [value, ctx.ints([size])], dtype, fixed=(1,))


# -- normalisations ---------------------------------------------------------------------
@handles("RMSNorm")
def rms_norm(ctx, rec):
    """inputs (x, w) with w 1-D [D] or a 0-d ``array(1)`` when there is no weight, both in
    the output dtype; arguments [eps]: ``(x * rsqrt(mean(x**2, -1) + eps)) * w`` with the
    normalisation in float32, rounded to the output dtype before the weight multiply."""
    (eps,) = rec.args
    x, w = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    size = rec.inputs[0].shape[-1]
    if _fused(ctx, "RMSNormalization", dtype):
        w = _per_channel(ctx, w, rec.inputs[1], size, dtype)
        return [ctx.op.RMSNormalization(x, w, axis=-1, epsilon=float(eps), stash_type=1)]
    x32 = ctx.cast(x, F32)
    mean_square = ctx.reduce("ReduceMean", ctx.op.Mul(x32, x32), [-1], keepdims=True)
    inv_rms = ctx.op.Reciprocal(ctx.op.Sqrt(ctx.op.Add(mean_square, ctx.scalar(eps, F32))))
    normed = ctx.cast(ctx.op.Mul(x32, inv_rms), dtype)
    return [ctx.run("Mul", [normed, w], dtype)]


@handles("LayerNorm")
def layer_norm(ctx, rec):
    """inputs (x, w, b) with w/b 1-D [D], or 0-d ``array(1)``/``array(0)`` when absent, all
    in the output dtype; arguments [eps]: LayerNormalization over the last axis, statistics
    in float32 (onnxruntime has kernels for float32, float16 and bfloat16)."""
    (eps,) = rec.args
    x, w, b = ctx.inputs(rec)
    dtype = rec.outputs[0].dtype
    size = rec.inputs[0].shape[-1]
    w = _per_channel(ctx, w, rec.inputs[1], size, dtype)
    b = _per_channel(ctx, b, rec.inputs[2], size, dtype)
    work = ctx.work_dtype("LayerNormalization", dtype)
    y = ctx.op.LayerNormalization(
        ctx.cast(x, work), ctx.cast(w, work), ctx.cast(b, work), axis=-1, epsilon=float(eps), stash_type=1
    )
    return [ctx.cast(y, dtype)]


# -- rotary embedding -------------------------------------------------------------------
def _inverse_frequencies(base: float, half: int) -> np.ndarray:
    """MLX's default ``exp(-arange(half) * log(base) / half)``, computed by MLX itself so
    the float32 values are bit-identical to the fallback's."""
    step = np.float32(np.log(np.float32(base))) / np.float32(half)
    inv = mx.exp(mx.arange(0, -half, -1, dtype=mx.float32) * mx.array(step, dtype=mx.float32))
    return dtypes.array_to_numpy(inv).astype(np.float32)


@handles("RoPE")
def rope(ctx, rec):
    """inputs (x [B, ..., T, D], offset int32 0-d or [B], optional freqs f32 [dims/2]);
    arguments [dims, traditional, base, scale, forward] (base is 1.0 and unused when freqs
    are given). Rotates the first ``dims`` features of each position by
    ``theta = (arange(T) + offset) * scale * inv_freq``, pairs are halves
    (traditional=False) or neighbours (True); ``forward=False`` rotates by ``-theta``."""
    dims, traditional, base, scale, forward = rec.args
    dims = int(dims)
    x, offset, *freqs = ctx.inputs(rec)
    spec = rec.inputs[0]
    dtype = rec.outputs[0].dtype
    if spec.rank < 3:
        raise ctx.fail(f"input x has shape {spec.shape}; RoPE needs at least 3 dimensions")
    if dims <= 0 or dims % 2 or dims > spec.shape[-1]:
        raise ctx.fail(f"argument dims={dims} must be even, positive and at most {spec.shape[-1]}")
    batch, steps, width = spec.shape[0], spec.shape[-2], spec.shape[-1]
    heads = int(np.prod(spec.shape[1:-2], dtype=np.int64))
    half = dims // 2
    x4 = ctx.reshape(ctx.cast(x, F32), [batch, heads, steps, width])

    steps_f = ctx.const(np.arange(steps, dtype=np.float32))
    offset_f = ctx.reshape(ctx.cast(offset, F32), [-1, 1])  # [1, 1] or [B, 1]
    positions = ctx.op.Mul(ctx.op.Add(steps_f, offset_f), ctx.scalar(scale, F32))  # [Bo, T]
    if freqs:
        inv_freq = ctx.op.Reciprocal(ctx.cast(freqs[0], F32))
    else:
        inv_freq = ctx.const(_inverse_frequencies(float(base), half))
    theta = ctx.op.Mul(ctx.unsqueeze(positions, [-1]), inv_freq)  # [Bo, T, half]
    cos, sin = ctx.op.Cos(theta), ctx.op.Sin(theta)
    if not forward:
        sin = ctx.op.Neg(sin)

    if _fused(ctx, "RotaryEmbedding", F32):
        if rec.inputs[1].size != batch:
            cos = ctx.op.Expand(cos, ctx.ints([batch, steps, half]))
            sin = ctx.op.Expand(sin, ctx.ints([batch, steps, half]))
        out = ctx.op.RotaryEmbedding(x4, cos, sin, interleaved=int(bool(traditional)), rotary_embedding_dim=dims)
    else:
        cos, sin = ctx.unsqueeze(cos, [1]), ctx.unsqueeze(sin, [1])
        out = _rotate(ctx, x4, [batch, heads, steps, width], cos, sin, dims, bool(traditional))
    return [ctx.cast(ctx.reshape(out, spec.shape), dtype)]


def _rotate(ctx, x4, shape: list[int], cos, sin, dims: int, traditional: bool):
    """The rotation written out: x [B, N, T, D] float32, cos/sin [Bo, 1, T, dims/2]."""
    big = np.iinfo(np.int64).max
    if traditional:
        x1 = ctx.slice(x4, [0], [dims], [-1], [2])
        x2 = ctx.slice(x4, [1], [dims], [-1], [2])
    else:
        x1 = ctx.slice(x4, [0], [dims // 2], [-1])
        x2 = ctx.slice(x4, [dims // 2], [dims], [-1])
    real = ctx.op.Sub(ctx.op.Mul(x1, cos), ctx.op.Mul(x2, sin))
    imag = ctx.op.Add(ctx.op.Mul(x1, sin), ctx.op.Mul(x2, cos))
    if traditional:
        pairs = ctx.op.Concat(ctx.unsqueeze(real, [-1]), ctx.unsqueeze(imag, [-1]), axis=-1)
        rotated = [ctx.reshape(pairs, shape[:3] + [dims])]
    else:
        rotated = [real, imag]
    if dims < shape[3]:
        rotated.append(ctx.slice(x4, [dims], [big], [-1]))
    return ctx.op.Concat(*rotated, axis=-1) if len(rotated) > 1 else rotated[0]


# -- attention --------------------------------------------------------------------------
@handles("ScaledDotProductAttention")
def scaled_dot_product_attention(ctx, rec):
    """inputs (q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv], optional mask
    broadcast to [B, Hq, Lq, Lk] (bool: keep where True, masked scores become finfo.min;
    otherwise additive), optional sinks [Hq]); arguments [scale, do_causal, has_sinks,
    output_logsumexp, force_fused]. ``softmax(scale * q @ k^T + mask) @ v`` with query
    head h reading kv head h // (Hq / Hkv); the causal mask is bottom-right aligned
    (query i sees keys j <= i + Lk - Lq); sinks add one logit per head to the softmax
    denominator. With output_logsumexp a second float32 output [B, Hq, Lq, 1] holds the
    natural-log logsumexp of each score row (sinks included).

    onnxruntime's Attention (where it runs its own kernel: opsets 23-24 with onnxruntime
    1.32) is used without sinks, logsumexp and float masks.
    It zeroes rows whose scores are all -inf/finfo.min, so bool masks become a
    finfo.min/2 bias (fully masked rows stay uniform, as in MLX), and float masks (whose
    all -inf rows are NaN in MLX) take the decomposition. One known difference remains:
    a masked key with a +inf or NaN score (infinite queries or keys) still counts there,
    where MLX's fallback replaces masked scores by finfo.min."""
    scale, causal, has_sinks, logsumexp, _force_fused = rec.args
    q, k, v, *extra = ctx.inputs(rec)
    sinks = extra.pop() if has_sinks else None
    if len(extra) > 1:
        raise ctx.fail(f"got {len(rec.inputs)} inputs for has_sinks={has_sinks}; expected q, k, v, [mask], [sinks]")
    mask = extra[0] if extra else None
    mask_spec = rec.inputs[3] if mask is not None else None
    if causal and mask is not None:
        raise ctx.fail("argument do_causal=True together with an array mask; MLX never records both")
    if mask_spec is not None and mask_spec.rank > 4:
        raise ctx.fail(f"mask shape {mask_spec.shape} has more than 4 dimensions")
    dtype = rec.outputs[0].dtype
    qs, ks, vs = rec.inputs[:3]
    batch, q_heads, q_len, _ = qs.shape
    kv_heads, k_len = ks.shape[1], ks.shape[2]
    if q_heads % kv_heads:
        raise ctx.fail(f"query heads {q_heads} are not a multiple of key/value heads {kv_heads}")
    bool_mask = mask_spec is not None and mask_spec.dtype == mx.bool_
    fused = (
        ctx.has("Attention")
        and ctx.has_kernel("Attention", F32, "T1")
        and not has_sinks
        and not logsumexp
        and (mask is None or bool_mask)
        and not (causal and q_len > k_len)
    )
    q, k, v = (ctx.cast(t, F32) for t in (q, k, v))
    if fused:
        bias = None
        if bool_mask:
            bias = ctx.op.Where(mask, ctx.scalar(0.0, F32), ctx.scalar(BOOL_MASK_BIAS, F32))
        elif causal and q_len != k_len:
            bias = ctx.op.Where(ctx.const(_causal(q_len, k_len)), ctx.scalar(0.0, F32), ctx.scalar(BOOL_MASK_BIAS, F32))
        out = ctx.op.Attention(q, k, v, bias, scale=float(scale), is_causal=int(bool(causal and q_len == k_len)))
        return [ctx.cast(out, dtype)]
    return _attention_composite(ctx, rec, q, k, v, mask, sinks, float(scale), bool(causal), bool(logsumexp))


def _causal(q_len: int, k_len: int) -> np.ndarray:
    """MLX's bottom-right causal mask: query i (at position i + Lk - Lq) sees keys j <= it."""
    return np.arange(k_len - q_len, k_len)[:, None] >= np.arange(k_len)[None, :]


def _attention_composite(ctx, rec, q, k, v, mask, sinks, scale, causal, logsumexp):
    """The attention chain in float32, grouped as [B, Hkv, R, L, D] for GQA like MLX."""
    dtype = rec.outputs[0].dtype
    batch, q_heads, q_len, _ = rec.inputs[0].shape
    kv_heads, k_len = rec.inputs[1].shape[1], rec.inputs[1].shape[2]
    repeats = q_heads // kv_heads
    q = ctx.op.Mul(q, ctx.scalar(scale, F32))
    if repeats > 1:
        q = ctx.reshape(q, [batch, kv_heads, repeats, q_len, rec.inputs[0].shape[3]])
        k, v = ctx.unsqueeze(k, [2]), ctx.unsqueeze(v, [2])
    rank = 5 if repeats > 1 else 4
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    scores = ctx.op.MatMul(q, ctx.op.Transpose(k, perm=perm))
    # MLX fills masked scores with its own dtype's lowest value, also when the export carries
    # that dtype as float32 (it shows in the logsumexp of a fully masked row)
    lowest = ctx.scalar(float(np.finfo(dtypes.to_numpy(dtype)).min), F32)
    if causal:
        scores = ctx.op.Where(ctx.const(_causal(q_len, k_len)), scores, lowest)
    elif mask is not None:
        mask = _group_heads(ctx, mask, rec.inputs[3], kv_heads, repeats)
        if rec.inputs[3].dtype == mx.bool_:
            scores = ctx.op.Where(mask, scores, lowest)
        else:
            scores = ctx.op.Add(scores, ctx.cast(mask, F32))
    score_shape = [batch, kv_heads, repeats, q_len, k_len] if repeats > 1 else [batch, q_heads, q_len, k_len]
    if sinks is not None:
        sink_shape = [1, kv_heads, repeats, 1, 1] if repeats > 1 else [1, q_heads, 1, 1]
        sink = ctx.reshape(ctx.cast(sinks, F32), sink_shape)
        sink = ctx.op.Expand(sink, ctx.ints(score_shape[:-1] + [1]))
        scores = ctx.op.Concat(sink, scores, axis=-1)
    if logsumexp:
        peak = ctx.reduce("ReduceMax", scores, [-1], keepdims=True)
        exps = ctx.op.Exp(ctx.op.Sub(scores, peak))
        total = ctx.reduce("ReduceSum", exps, [-1], keepdims=True)
        probs = ctx.op.Div(exps, total)
        lse = ctx.reshape(ctx.op.Add(peak, ctx.op.Log(total)), [batch, q_heads, q_len, 1])
    else:
        probs = ctx.op.Softmax(scores, axis=-1)
    if sinks is not None:
        probs = ctx.slice(probs, [1], [k_len + 1], [-1])
    out = ctx.op.MatMul(probs, v)
    out = ctx.cast(ctx.reshape(out, rec.outputs[0].shape), dtype)
    if logsumexp:
        return [out, ctx.cast(lse, rec.outputs[1].dtype)]
    return [out] + [None] * (len(rec.outputs) - 1)


def _group_heads(ctx, mask, spec, kv_heads: int, repeats: int):
    """A mask broadcastable to [B, Hq, Lq, Lk] made broadcastable to the grouped scores."""
    if spec.rank < 4:
        mask = ctx.unsqueeze(mask, list(range(4 - spec.rank)))
    shape = (1,) * (4 - spec.rank) + tuple(spec.shape)
    if repeats == 1:
        return mask
    if shape[1] == 1:
        return ctx.unsqueeze(mask, [2])
    return ctx.reshape(mask, [shape[0], kv_heads, repeats, shape[2], shape[3]])
