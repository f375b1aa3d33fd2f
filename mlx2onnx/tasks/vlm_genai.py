"""onnxruntime-genai's multimodal layout for the image-text-to-text packages
(:mod:`.vision_language`): its embedding model, which merges the image features into the
text embeddings inside the graph (transformers.js merges them outside its graphs), the
genai_config.json the VLM types share (the package's vision encoder and decoder, that
embedding model) and its image processor file."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np


def merged_embeddings(embed_tokens, image_token: int):
    """``f(input_ids, image_features [..., width]) -> inputs_embeds``: the text embeddings
    with the image token's positions taken by the features in order. After the prompt the
    features are empty: a zero row stands first, so the text positions gather from it."""

    def embedding(input_ids, image_features):
        text = embed_tokens(input_ids)
        width = image_features.shape[-1]
        rows = mx.concatenate([mx.zeros((1, width), image_features.dtype), image_features.reshape(-1, width)])
        is_image = (input_ids == image_token).reshape(-1)
        order = mx.cumsum(is_image.astype(mx.int32)) * is_image.astype(mx.int32)  # 1-based, 0 for text
        picked = mx.take(rows, order, axis=0).reshape(*input_ids.shape, width).astype(text.dtype)
        return mx.where((input_ids == image_token)[..., None], picked, text)

    return embedding


def embedding_graph(exporter, embed_tokens, image_token: int, vocab: int, features_shape: tuple, feature_axes: dict):
    """The genai embedding model: ``input_ids`` [batch, sequence] and ``image_features``
    (``features_shape``, the vision encoder's output, its dynamic ``feature_axes``) ->
    ``inputs_embeds``, traced on a prompt with one image's tokens."""
    rng = np.random.default_rng(3)
    tokens = int(np.prod(features_shape[:-1]))
    ids = rng.integers(0, vocab, (1, 5))
    prompt = np.concatenate([ids[:, :2], np.full((1, tokens), image_token), ids[:, 2:]], axis=1)
    dtype = embed_tokens(mx.zeros((1, 1), mx.int64)).dtype
    features = mx.array(rng.standard_normal(features_shape), dtype=dtype)
    return exporter.with_options(
        input_names=["input_ids", "image_features"],
        output_names=["inputs_embeds"],
        path=None,
        dynamic={"input_ids": {0: "batch_size", 1: "sequence"}, "image_features": feature_axes},
    ).to_ir(merged_embeddings(embed_tokens, image_token), mx.array(prompt.astype(np.int64)), features)


def genai_settings(model, folder: Path, layout: list, genai_type: str, vision: dict) -> tuple[dict | None, str | None]:
    """(genai_config.json, None) of genai type ``genai_type`` over the package's decoder
    (``inputs_embeds`` in place of ``input_ids``), the embedding model of
    :func:`embedding_graph` and the vision section ``vision`` (its inputs, and where it is
    not the package's vision encoder its filename; the processor file is
    genai_processor_config.json); or (None, why genai cannot run the decoder)."""
    from ..llm.configs import genai_config, text_settings
    from ..llm.package import stored_layout

    config = json.loads((folder / "config.json").read_text())
    settings, reason = genai_config(
        text_settings(config), stored_layout(layout), model.config.text_config.vocab_size, folder
    )
    if settings is None:
        return None, reason
    decoder = settings["model"]["decoder"]
    decoder["filename"] = "onnx/decoder_model_merged.onnx"
    decoder["inputs"] = {
        "inputs_embeds": "inputs_embeds",
        **{k: v for k, v in decoder["inputs"].items() if k != "input_ids"},
    }
    settings["model"].update(
        type=genai_type,
        embedding={
            "filename": "onnx/embedding.onnx",
            "inputs": {"input_ids": "input_ids", "image_features": "image_features"},
            "outputs": {"inputs_embeds": "inputs_embeds"},
        },
        vision={
            "filename": "onnx/vision_encoder.onnx",
            "config_filename": "genai_processor_config.json",
            "outputs": {"image_features": "image_features"},
            **vision,
        },
    )
    return settings, None


def processor_file(name: str, steps: list) -> dict:
    """genai_processor_config.json: onnxruntime-extensions' operations ``(name, type,
    attrs)`` in order."""
    return {
        "processor": {
            "name": name,
            "transforms": [{"operation": {"name": step, "type": kind, "attrs": attrs}} for step, kind, attrs in steps],
        }
    }
