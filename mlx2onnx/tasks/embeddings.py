"""Sentence embeddings: an mlx-embeddings model folder -> a transformers.js
``feature-extraction`` package, and its check.

The package holds ``onnx/model.onnx`` (inputs ``input_ids``, ``attention_mask`` and, for
encoders with token types, ``token_type_ids``, int64 [batch_size, sequence_length];
output ``last_hidden_state`` [batch_size, sequence_length, hidden], the encoder's token
states before pooling), the folder's config.json and tokenizer files. Pooling and
normalisation run in the runtime, as transformers.js does them:
``pipeline("feature-extraction", PACKAGE)(texts, {pooling: "mean", normalize: true})``
gives mlx-embeddings' ``text_embeds`` (config.json records the pooling under
``mlx2onnx``)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedModelError, UnsupportedVariantError
from .loading import load_with

TOKEN_TYPES = ("input_ids", "attention_mask", "token_type_ids")


@dataclass(frozen=True)
class Encoder:
    """How one mlx-embeddings architecture is exported: the graph's inputs, its token
    states from them, its pooled and normalised embedding (mlx-embeddings' own), and the
    pooling that turns the first into the second."""

    inputs: tuple[str, ...]
    token_states: Callable  # (model, *inputs) -> [batch, sequence, hidden]
    embeddings: Callable  # (model, *inputs) -> [batch, hidden], mlx-embeddings' text_embeds
    pooling: Callable[[dict], str]  # config -> "mean" or "cls"


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


ENCODERS = {
    "bert": Encoder(TOKEN_TYPES, _bert_states, _bert_embeds, lambda config: "mean"),
    "xlm-roberta": Encoder(TOKEN_TYPES, _bert_states, _bert_embeds, lambda config: "mean"),
    "modernbert": Encoder(
        TOKEN_TYPES[:2], _modernbert_states, _modernbert_embeds, lambda config: config.get("classifier_pooling", "mean")
    ),
}


def encoder_of(config: dict) -> Encoder:
    model_type = str(config.get("model_type", "?")).replace("_", "-")
    if model_type not in ENCODERS:
        raise UnsupportedModelError(
            f"model_type {config.get('model_type')!r}: the feature-extraction export handles the mlx-embeddings "
            f"encoders {', '.join(sorted(ENCODERS))} (their embedding is the mean or first token of the encoder's "
            "states, which transformers.js pools itself)"
        )
    if config.get("architectures") not in (None, ["ModernBertModel"]) and model_type == "modernbert":
        raise UnsupportedVariantError(
            f"architectures {config['architectures']}: mlx-embeddings gives this ModernBERT folder no pooled "
            "embedding (only ModernBertModel's text_embeds are pooled), so there is nothing to match"
        )
    return ENCODERS[model_type]


def load_embeddings_folder(folder: Path):
    """(model, tokenizer, config) as mlx-embeddings loads the folder."""
    config = json.loads((folder / "config.json").read_text())
    encoder_of(config)
    model, tokenizer = load_with(
        folder,
        "mlx-embeddings",
        "mlx_embeddings.utils",
        "load",
        lambda load: load(str(folder)),
        usage=(ValueError, FileNotFoundError),
    )
    return model, getattr(tokenizer, "_tokenizer", tokenizer), config


def example_inputs(config: dict, names: tuple[str, ...]) -> list[mx.array]:
    """Token ids of two rows, the second right-padded (as the tokenizers pad), its mask,
    and token types of one type."""
    rng = np.random.default_rng(0)
    ids = rng.integers(0, int(config.get("vocab_size", 2)), (2, 6)).astype(np.int64)
    mask = np.ones((2, 6), np.int64)
    mask[1, 4:] = 0
    arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros((2, 6), np.int64)}
    return [mx.array(arrays[name]) for name in names]


def pooled(states: np.ndarray, mask: np.ndarray, pooling: str) -> np.ndarray:
    """transformers.js's pooling and L2 normalisation of ``states`` [batch, sequence, hidden]."""
    if pooling == "cls":
        vectors = states[:, 0]
    else:
        weights = mask[..., None].astype(np.float32)
        vectors = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def export_embeddings(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the feature-extraction package of the mlx-embeddings folder ``folder`` (see
    module) to ``out`` (already checked), whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with mlx-embeddings"):
        model, _, config = load_embeddings_folder(folder)
        encoder = encoder_of(config)
    dynamic = {name: {0: "batch_size", 1: "sequence_length"} for name in encoder.inputs}
    exporter = exporter.with_options(
        input_names=list(encoder.inputs), output_names=["last_hidden_state"], path=None, dynamic=dynamic
    )
    with stage("tracing the encoder at several sizes and translating it"):
        # partial keeps the parameter names, which the dynamic axes are given by
        graph = exporter.to_ir(functools.partial(encoder.token_states, model), *example_inputs(config, encoder.inputs))
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, {"onnx/model.onnx": graph}, exporter.check)
        copy_present(folder, package, TOKENIZER_FILES)
        write_json_files(
            package,
            {
                "config.json": dict(
                    config,
                    mlx2onnx={"task": "feature-extraction", "pooling": encoder.pooling(config), "normalize": True},
                )
            },
            dtypes,
        )
    return out


CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "MLX to ONNX",
    "Embeddings of sentences of different lengths, padded in one batch.",
)


def check_embeddings(package: Path, folder: Path, texts=CHECK_TEXTS, atol=None, rtol=None) -> dict:
    """The package's pooled, normalised embeddings of ``texts`` (one padded batch, the
    folder's tokenizer, a plain onnxruntime session, pooled as transformers.js pools)
    against mlx-embeddings' ``text_embeds`` of the same batch; a half-precision folder's
    also against its float32 ones (:meth:`~..verify.plain.PlainSession.half_compare`)."""
    from ..io.graph_files import graph_path
    from ..verify.plain import half_precision, in_float32, plain_session, reference

    model, tokenizer, config = load_embeddings_folder(folder)
    encoder = encoder_of(config)
    plain = plain_session(graph_path(package, "onnx/model.onnx"), atol, rtol)
    batch = tokenizer(list(texts), padding=True, return_tensors="np")
    feeds = {
        name: np.asarray(batch[name] if name in batch else np.zeros_like(batch["input_ids"]), np.int64)
        for name in encoder.inputs
    }
    pooling = json.loads((package / "config.json").read_text()).get("mlx2onnx", {}).get("pooling", "mean")
    got = pooled(plain.session.run(["last_hidden_state"], feeds)[0], feeds["attention_mask"], pooling)
    inputs = [mx.array(feeds[n]) for n in encoder.inputs]
    want, held = reference(encoder.embeddings(model, *inputs))
    half = half_precision(model)
    if half:
        with in_float32(model):
            float32_want = reference(encoder.embeddings(model, *inputs))[0]
    rows = []
    for k, (text, row_got, row_want) in enumerate(zip(texts, got, want)):
        error, bound = plain.compare(row_got, row_want, held)
        row = {
            "input": repr(text),
            "detail": "pooled, normalised embedding",
            "max_abs_error": error,
            "tolerance": bound,
            "passed": error <= bound,
        }
        if half:
            compared = plain.half_compare(row_got, row_want, float32_want[k], held)
            row.update(compared, passed=compared.pop("close"))
        rows.append(row)
    return plain.result(
        "feature-extraction", package, folder, rows, pooling=pooling, **({"half_precision": half} if half else {})
    )
