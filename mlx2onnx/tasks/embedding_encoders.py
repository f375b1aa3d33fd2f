"""The mlx-embeddings architectures the feature-extraction export knows, one
:class:`Encoder` each: the graph's inputs and outputs as functions of mlx-embeddings'
model, its embedding (mlx-embeddings' own ``text_embeds``), and how transformers.js's
``feature-extraction`` pipeline pools the first output into that embedding.

Encoders (BERT, XLM-RoBERTa, ModernBERT) give their token states, which the pipeline
pools (mean or first token). Decoder embedding models (Qwen3-Embedding, EmbeddingGemma,
Llama bidirectional, LFM2's late-interaction model) give their token states and, beside
them, the embedding itself as ``sentence_embedding``, as their ONNX exports on the hub do:
EmbeddingGemma's dense layers after the mean are not a pooling the pipeline has, and a
last-token embedding needs the last real token."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Callable

import mlx.core as mx

TOKEN_TYPES = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Encoder:
    """How one mlx-embeddings architecture is exported.

    ``outputs``: (model, *inputs) -> the graph's outputs, named by ``output_names`` (the
    first is what transformers.js's pipeline reads: ``last_hidden_state``, or
    ``token_embeddings`` when the embedding is one vector a token); ``embeddings``:
    (model, *inputs) -> mlx-embeddings' ``text_embeds``; ``pooling``: config -> the
    pipeline's pooling of the first output into them (``mean``, ``cls``, ``last_token``,
    ``none``), or None where the pipeline has no such pooling (the embedding is then the
    ``sentence_embedding`` output, which ``AutoModel`` gives); ``runtime_type``: the ``model_type`` the package's config.json gives
    transformers.js when it has no type of the folder's name; ``runtime_config``: fields
    transformers.js reads that an older config.json lacks; ``padding_side``: the side
    the package's tokenizer pads, where the pooling needs one."""

    inputs: tuple[str, ...]
    outputs: Callable
    embeddings: Callable
    pooling: Callable[[dict], str]
    output_names: tuple[str, ...] = ("last_hidden_state",)
    normalize: bool = True
    runtime_type: str | None = None
    runtime_config: Callable[[dict], dict] = lambda config: {}  # fields the runtime reads that the folder lacks
    padding_side: str | None = None
    needs_sentence_files: bool = False  # the model_type is also an mlx-lm one: recognised by its sentence files
    classes: tuple | None = None  # the config's ``architectures`` mlx-embeddings pools, where it pools only some


def _bert_states(model, input_ids, attention_mask, token_type_ids):
    return model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state


def _bert_embeds(model, input_ids, attention_mask, token_type_ids):
    return model(input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).text_embeds


def _modernbert_states(model, input_ids, attention_mask):
    # ModernBERT builds its additive masks in the mask's own dtype: float32, as
    # mlx-embeddings' own callers give it
    return model.model(input_ids, attention_mask=attention_mask.astype(mx.float32), return_dict=False)[0]


def _modernbert_embeds(model, input_ids, attention_mask):
    return model(input_ids, attention_mask=attention_mask.astype(mx.float32)).text_embeds


def _states_and_embeds(model, input_ids, attention_mask):
    out = model(input_ids, attention_mask=attention_mask)
    return out.last_hidden_state, out.text_embeds


def _embeds(model, input_ids, attention_mask):
    return model(input_ids, attention_mask=attention_mask).text_embeds


def _normalized(model, vectors):
    """mlx-embeddings' own L2 normalisation (its ``normalize_embeddings``, eps 1e-9)."""
    return sys.modules[type(model).__module__].normalize_embeddings(vectors)


def _causal_mask(input_ids, attention_mask, dtype):
    """Qwen3's additive mask, causal and over the real tokens, as mlx-embeddings builds it;
    except that a query that sees no key (a left pad before every real token, where
    mlx-embeddings' softmax gives NaN that then spreads over the whole row) sees itself.
    Every row mlx-embeddings computes without NaN gets the same mask."""
    positions = mx.arange(input_ids.shape[1])
    allowed = (positions[None, :] <= positions[:, None])[None] & attention_mask.astype(mx.bool_)[:, None, :]
    blind = ~mx.any(allowed, axis=-1, keepdims=True)
    allowed = allowed | (blind & (positions[None, :] == positions[:, None])[None])
    return mx.where(allowed, 0.0, -mx.inf).astype(dtype)[:, None]


def _last_token_states(model, input_ids, attention_mask):
    """Qwen3-Embedding: the token states, and the normalised state of each row's last real
    token (the last position whose mask is 1, on either padding side: mlx-embeddings'
    ``last_token_pool`` of a right-padded batch, and its left-padding branch)."""
    table = model.model.embed_tokens  # the states' dtype: the table's, or its scales' when quantized
    dtype = getattr(table, "scales", table.weight).dtype
    states = model.model(input_ids, attention_mask=_causal_mask(input_ids, attention_mask, dtype))
    positions = mx.arange(input_ids.shape[1]).astype(mx.int32)
    last = mx.max(attention_mask.astype(mx.int32) * positions[None, :], axis=1)
    pooled = mx.take_along_axis(states, last[:, None, None], axis=1)[:, 0]
    return states, _normalized(model, pooled)


def _lfm2_layer_types(config: dict) -> dict:
    """LFM2's ``layer_types`` (which transformers.js reads even without caches) from the
    ``full_attn_idxs`` of a config.json written before Transformers had the field."""
    if "layer_types" in config:
        return {}
    attention = set(config.get("full_attn_idxs", ()))
    return {"layer_types": ["full_attention" if i in attention else "conv" for i in range(config["num_hidden_layers"])]}


DECODER_INPUTS = TOKEN_TYPES[:2]
STATES_AND_EMBEDDING = ("last_hidden_state", "sentence_embedding")

# the encoders the registry (mlx2onnx.tasks) gives each mlx-embeddings model_type
BERT = Encoder(TOKEN_TYPES, _bert_states, _bert_embeds, lambda config: "mean")  # and XLM-RoBERTa
MODERNBERT = Encoder(
    DECODER_INPUTS,
    _modernbert_states,
    _modernbert_embeds,
    lambda config: config.get("classifier_pooling", "mean"),
    classes=(None, ["ModernBertModel"]),
)
LAST_TOKEN = Encoder(  # Qwen3-Embedding
    DECODER_INPUTS,
    _last_token_states,
    _embeds,
    lambda config: "last_token",
    STATES_AND_EMBEDDING,
    padding_side="left",
    needs_sentence_files=True,
)
# EmbeddingGemma: mean, then two dense layers; the pipeline's mean of the states is not it
DENSE_AFTER_MEAN = Encoder(
    DECODER_INPUTS,
    _states_and_embeds,
    _embeds,
    lambda config: None,
    STATES_AND_EMBEDDING,
    needs_sentence_files=True,
)
LLAMA_BIDIRECTIONAL = Encoder(
    DECODER_INPUTS, _states_and_embeds, _embeds, lambda config: "mean", STATES_AND_EMBEDDING, runtime_type="llama"
)
# LFM2's late-interaction (ColBERT) model: one normalised vector a token, zero on pads
LATE_INTERACTION = Encoder(
    DECODER_INPUTS,
    _embeds,
    _embeds,
    lambda config: "none",
    ("token_embeddings",),
    normalize=False,
    runtime_config=_lfm2_layer_types,
    needs_sentence_files=True,
)
