"""Sentence embeddings: an mlx-embeddings model folder -> a transformers.js
``feature-extraction`` package, and its check.

The package holds ``onnx/model.onnx`` (inputs ``input_ids``, ``attention_mask`` and, for
encoders with token types, ``token_type_ids``, int64 [batch_size, sequence_length];
outputs as :mod:`.embedding_encoders` declares them: ``last_hidden_state`` [batch_size,
sequence_length, hidden], the token states before pooling, and for decoder embedding
models ``sentence_embedding`` [batch_size, dimensions], the embedding itself), the
folder's config.json and tokenizer files. Pooling and normalisation run in the runtime, as
transformers.js does them:
``pipeline("feature-extraction", PACKAGE)(texts, {pooling: "mean", normalize: true})``
gives mlx-embeddings' ``text_embeds`` (config.json records the pooling under
``mlx2onnx``; a last-token package's tokenizer pads on the left, so that the last token is
a real one); where no pooling of the pipeline gives it (EmbeddingGemma's dense layers),
``AutoModel``'s ``sentence_embedding`` does.

A decoder embedding folder (``qwen3``, ``gemma3_text``, ``lfm2``: model types mlx-lm
also has) is told from a language model by the sentence-transformers files that
mlx-embeddings' converter copies beside its weights (``modules.json``,
``config_sentence_transformers.json``)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedVariantError
from ..io.notes import PackageNotes, noted, read_notes
from .embedding_encoders import Encoder
from .loading import folder_json, load_with

SENTENCE_FILES = ("modules.json", "config_sentence_transformers.json")


def has_sentence_files(folder: Path, encoder: Encoder) -> bool:
    """Whether ``folder`` (of a model_type the registry names for ``encoder``) is an
    mlx-embeddings folder: for a model_type mlx-lm also has, the sentence-transformers files
    tell it from a language model."""
    return not encoder.needs_sentence_files or any((folder / name).is_file() for name in SENTENCE_FILES)


def check_classes(config: dict, encoder: Encoder) -> None:
    """Refuse a folder whose ``architectures`` mlx-embeddings gives no pooled embedding."""
    if encoder.classes is not None and config.get("architectures") not in encoder.classes:
        raise UnsupportedVariantError(
            f"architectures {config['architectures']}: mlx-embeddings gives this {config.get('model_type')} folder "
            f"no pooled embedding (only {', '.join(str(c) for c in encoder.classes if c)}'s text_embeds are "
            "pooled), so there is nothing to match"
        )


def load_embeddings_folder(folder: Path, encoder: Encoder):
    """(model, tokenizer, config) as mlx-embeddings loads the folder (of ``encoder``'s architecture)."""
    config = json.loads((folder / "config.json").read_text())
    check_classes(config, encoder)
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


def pooled(states: np.ndarray, mask: np.ndarray, pooling: str, normalize: bool = True) -> np.ndarray:
    """transformers.js's pooling of ``states`` [batch, sequence, hidden] (``mean`` over the
    mask, ``cls`` the first position, ``last_token`` the last, ``none`` each token), then
    its L2 normalisation."""
    if pooling == "cls":
        vectors = states[:, 0]
    elif pooling == "last_token":
        vectors = states[:, -1]
    elif pooling == "none":
        vectors = states
    else:
        weights = mask[..., None].astype(np.float32)
        vectors = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    if not normalize:
        return vectors
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def export_embeddings(folder: Path, out: Path, exporter, stage, architecture: Encoder) -> Path:
    """Write the feature-extraction package of the mlx-embeddings folder ``folder`` (see
    module; of the registry's ``architecture``) to ``out`` (already checked), whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with mlx-embeddings"):
        encoder = architecture
        model, _, config = load_embeddings_folder(folder, encoder)
    dynamic = {name: {0: "batch_size", 1: "sequence_length"} for name in encoder.inputs}
    exporter = exporter.with_options(
        input_names=list(encoder.inputs), output_names=list(encoder.output_names), path=None, dynamic=dynamic
    )
    with stage("tracing the model at several sizes and translating it"):
        # partial keeps the parameter names, which the dynamic axes are given by
        graph = exporter.to_ir(functools.partial(encoder.outputs, model), *example_inputs(config, encoder.inputs))
    notes = PackageNotes(task="feature-extraction", pooling=encoder.pooling(config), normalize=encoder.normalize)
    runtime = dict(encoder.runtime_config(config), model_type=encoder.runtime_type or config["model_type"])
    files = {"config.json": noted(dict(config, **runtime), notes)}
    tokenizer = folder_json(folder, "tokenizer_config.json", padding_side=encoder.padding_side)
    if encoder.padding_side and tokenizer is not None:
        files["tokenizer_config.json"] = tokenizer
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, {"onnx/model.onnx": graph}, exporter.check)
        copy_present(folder, package, TOKENIZER_FILES)
        write_json_files(package, files, dtypes)
    return out


CHECK_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "MLX to ONNX",
    "Embeddings of sentences of different lengths, padded in one batch.",
)


def _batch(tokenizer, texts, names: tuple[str, ...], side: str) -> dict[str, np.ndarray]:
    batch = tokenizer(list(texts), padding=True, return_tensors="np", padding_side=side)
    return {
        name: np.asarray(batch[name] if name in batch else np.zeros_like(batch["input_ids"]), np.int64)
        for name in names
    }


def _package_embeddings(notes: PackageNotes, session, encoder: Encoder, feeds: dict) -> dict[str, np.ndarray]:
    """What a transformers.js user gets from the package (its ``notes``): the pipeline's
    pooling of the first output (where it has the pooling), and the ``sentence_embedding``
    output."""
    outputs = dict(zip(encoder.output_names, session.run(list(encoder.output_names), feeds)))
    found = {}
    if notes.pooling is not None:
        pipeline = pooled(
            outputs[encoder.output_names[0]], feeds["attention_mask"], notes.pooling, notes.normalize is not False
        )
        found[f"pipeline pooling {notes.pooling!r}"] = pipeline
    if "sentence_embedding" in outputs:
        found["sentence_embedding output"] = outputs["sentence_embedding"]
    return found


def _real(rows: np.ndarray, mask: np.ndarray, k: int) -> np.ndarray:
    """Row ``k`` of ``rows``; a row of token vectors, its real tokens alone."""
    return rows[k] if rows.ndim == 2 else rows[k][mask[k] == 1]


def check_embeddings(
    package: Path, folder: Path, architecture: Encoder, texts=CHECK_TEXTS, atol=None, rtol=None
) -> dict:
    """The package's embeddings of ``texts`` (one batch padded as the package's tokenizer
    pads, a plain onnxruntime session; pooled as transformers.js pools, and its
    ``sentence_embedding`` output) against mlx-embeddings' ``text_embeds`` of the same
    texts (a right-padded batch, on which mlx-embeddings' decoders give no NaN); a
    half-precision folder's also against its float32 ones
    (:meth:`~..verify.plain.PlainSession.half_compare`)."""
    from ..io.graph_files import graph_path
    from ..verify.plain import half_precision, in_float32, plain_session, reference

    encoder = architecture
    model, tokenizer, config = load_embeddings_folder(folder, encoder)
    plain = plain_session(graph_path(package, "onnx/model.onnx"), atol, rtol)
    side = (folder_json(package, "tokenizer_config.json") or {}).get("padding_side", "right")
    feeds = _batch(tokenizer, texts, encoder.inputs, side)
    notes = read_notes(package)
    found = _package_embeddings(notes, plain.session, encoder, feeds)
    mlx_feeds = _batch(tokenizer, texts, encoder.inputs, "right")
    inputs = [mx.array(mlx_feeds[n]) for n in encoder.inputs]
    want, held = reference(encoder.embeddings(model, *inputs))
    half = half_precision(model)
    if half:
        with in_float32(model):
            float32_want = reference(encoder.embeddings(model, *inputs))[0]
    rows = []
    for detail, got in found.items():
        for k, text in enumerate(texts):
            row_got, row_want = _real(got, feeds["attention_mask"], k), _real(want, mlx_feeds["attention_mask"], k)
            error, bound = plain.compare(row_got, row_want, held)
            row = {"input": repr(text), "detail": detail, "max_abs_error": error, "tolerance": bound}
            row["passed"] = error <= bound
            if half:
                compared = plain.half_compare(
                    row_got, row_want, _real(float32_want, mlx_feeds["attention_mask"], k), held
                )
                row.update(compared, passed=compared.pop("close"))
            rows.append(row)
    return plain.result(
        "feature-extraction",
        package,
        folder,
        rows,
        pooling=notes.pooling,
        padding_side=side,
        **({"half_precision": half} if half else {}),
    )
