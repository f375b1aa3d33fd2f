"""Greedy decoding over the prefill and decode graphs of :func:`~.decoder.export_decoder` in
onnxruntime (:func:`generate`), and MLX's own greedy tokens, the reference of every
generation check (:func:`mlx_generate`)."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx

from ..errors import ExportOptionError
from .decoder import DecoderExport, cache_names


def generate(export: DecoderExport, prompt: np.ndarray, max_new_tokens: int, sessions=None) -> np.ndarray:
    """Greedy decoding with onnxruntime: ``prompt`` [batch, prompt_length] int -> the
    ``max_new_tokens`` generated token ids [batch, max_new_tokens]."""
    prompt = np.asarray(prompt, dtype=np.int32)
    if prompt.ndim != 2 or not export.dynamic and prompt.shape != (export.batch, export.prompt_length):
        expected = "[batch, prompt length]" if export.dynamic else f"({export.batch}, {export.prompt_length})"
        raise ExportOptionError(f"prompt shape {prompt.shape} differs from the exported {expected}")
    prompt_length = prompt.shape[1]
    vocabulary = _vocabulary(export)
    if prompt.size and (prompt.min() < 0 or vocabulary is not None and prompt.max() >= vocabulary):
        raise ExportOptionError(
            f"prompt token ids must be in 0..{'vocabulary-1' if vocabulary is None else vocabulary - 1}; "
            f"got {int(prompt.min())}..{int(prompt.max())}"
        )
    if not 0 < prompt_length or prompt_length + max_new_tokens - 1 > export.max_length:
        raise ExportOptionError(
            f"{max_new_tokens} new tokens after a prompt of {prompt_length} do not fit max_length={export.max_length}"
        )
    prefill, decode = sessions or export.sessions()
    outs = prefill.run(None, {"input_ids": prompt})
    logits, cache = outs[0], outs[1:]
    tokens = []
    position = prompt_length
    for step in range(max_new_tokens):
        token = logits[:, -1, :].argmax(axis=-1).astype(np.int32)
        tokens.append(token)
        if step == max_new_tokens - 1:
            break
        feeds = {"input_ids": token[:, None], "position": np.array(position, dtype=np.int32)}
        feeds.update(dict(zip(cache_names(export.layers, "past_key_values"), cache)))
        outs = decode.run(None, feeds)
        logits, cache = outs[0], outs[1:]
        position += 1
    return np.stack(tokens, axis=1)


def _vocabulary(export: DecoderExport) -> int | None:
    """The size of the logits' last axis, from the decode graph's declared output."""
    proto = onnx.load(str(export.decode), load_external_data=False)
    dims = proto.graph.output[0].type.tensor_type.shape.dim
    return dims[-1].dim_value if dims and dims[-1].HasField("dim_value") else None


def mlx_generate(model: nn.Module, prompt: mx.array, max_new_tokens: int, cache=None) -> np.ndarray:
    """Greedy decoding in MLX with the model's own cache (:func:`fresh_cache`), the
    reference for :func:`generate`."""
    cache = fresh_cache(model) if cache is None else cache
    logits = model(prompt, cache=cache)
    tokens = []
    for step in range(max_new_tokens):
        token = mx.argmax(logits[:, -1, :], axis=-1).astype(mx.int32)
        tokens.append(token)
        if step == max_new_tokens - 1:
            break
        logits = model(token[:, None], cache=cache)
    return np.array(mx.stack(tokens, axis=1))


def fresh_cache(model: nn.Module) -> list:
    """The model's own empty cache, as mlx-lm's generation makes it (``make_cache`` when
    it has one, else a KVCache per layer)."""
    if hasattr(model, "make_cache"):
        return model.make_cache()
    from mlx_lm.models.cache import KVCache

    return [KVCache() for _ in model.layers]


def mlx_logits(model: nn.Module, ids: mx.array) -> mx.array:
    """The logits [batch, sequence, vocab] of ``ids`` as mlx-lm's generation computes them:
    over a fresh cache. (A model whose layers share another layer's cache, Gemma 3n's
    KV-shared layers, computes other numbers without one: those layers then project their
    own keys and values.)"""
    return model(ids, cache=fresh_cache(model))


def mlx_prompt_logits(model: nn.Module, prompt: mx.array) -> mx.array:
    """The logits [batch, vocab] of the prompt's last token (:func:`mlx_logits`)."""
    return mlx_logits(model, prompt)[:, -1]
