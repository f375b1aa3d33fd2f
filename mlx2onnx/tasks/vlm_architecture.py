"""What one mlx-vlm architecture's image-text-to-text package needs
(:mod:`.vision_language`): each ``vlm_*`` module gives one :class:`Architecture`, and the
helpers they share (the image token, a model's own merge, the token table's lookup)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import mlx.core as mx
import numpy as np


def token_table(model):
    """The text model's token embedding of most mlx-vlm models."""
    return model.language_model.model.embed_tokens


def patch_count(vision) -> int:
    """Patches of a square tower of ``vision``'s image and patch sizes."""
    return (vision.image_size // vision.patch_size) ** 2


def one_image(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``Architecture.vision_inputs`` of a tower that takes one square image a prompt."""
    size = model.config.vision_config.image_size
    return {"pixel_values": rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)}


def text_config_of(config: dict) -> dict:
    """The ``text_config`` a package's config.json gives transformers.js: the folder's, or
    the settings at its top where it keeps them there (Qwen2-VL's, Bunny's). (Not
    :func:`mlx2onnx.llm.configs.text_settings`, the merged view genai's settings read.)"""
    return config.get("text_config") or {k: v for k, v in config.items() if k != "vision_config"}


def image_token_id(config) -> int:
    """The token whose positions take the image features (its name differs between configs)."""
    index = getattr(config, "image_token_index", None)
    return config.image_token_id if index is None else index


def model_merge(model, input_ids, inputs: dict):
    """``Architecture.mlx_embeddings`` of a model whose ``get_input_embeddings`` takes the
    ids and ``pixel_values`` alone: (its merged embeddings, nothing more for the first step)."""
    return model.get_input_embeddings(input_ids, mx.array(inputs["pixel_values"])).inputs_embeds, {}


def collapsed(input_ids, token: int):
    """The ids [1, sequence] as a NumPy row with each run of ``token`` as one: the prompt
    of a model that expands one image token itself (mlx-vlm's LLaVA-NeXT, Bunny) for the
    package's prompt, which the runtime's processor expanded beforehand."""
    ids = np.array(input_ids).reshape(-1)
    return ids[[i for i, t in enumerate(ids) if t != token or i == 0 or ids[i - 1] != token]]


def embedding_lookup(embeddings: Callable) -> Callable:
    """``Architecture.text`` of a model whose text embeddings are its token table's rows as
    they are (the image token's positions are overwritten by the merge): model ->
    f(input_ids), given ``embeddings`` (model -> its token embedding module)."""

    def text(model):
        embed = embeddings(model)

        def embed_tokens(input_ids):
            return embed(input_ids)

        return embed_tokens

    return text


token_lookup = embedding_lookup(token_table)  # Architecture.text's default: the text model's token table


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """What one mlx-vlm architecture's package needs: a spec named field by field, where a
    field left out is the family's default (the token table's rows as the text embeddings,
    mlx-vlm's own merge of ``pixel_values``, one square image, no onnxruntime-genai type);
    a family's spec is a function or a spec (``dataclasses.replace``) that later members
    override only where they differ (:func:`.vlm_qwen2_vl.qwen_architecture`,
    :func:`.vlm_internvl.tile_architecture`, LLaVA-NeXT over LLaVA)."""

    processor: str  # transformers.js's processor class prefix (its files name it)
    processor_configs: Callable  # (model, folder) -> {file: content} for transformers.js's processor
    image_prompt: Callable  # model -> the token ids one image of the check's pixel inputs takes in a prompt
    # (model, dtype) -> f(**pixel inputs) -> image features; or vision_graph: (model, exporter, dtype)
    # -> the vision encoder, where it is not traced whole
    vision: Callable | None = None
    vision_graph: Callable | None = None
    vision_inputs: Callable = one_image  # (model, batch, rng) -> {name: array}: the check's pixel inputs
    vision_axes: dict = field(default_factory=dict)  # their dynamic axes
    text: Callable = token_lookup  # model -> f(input_ids) -> the text embeddings mlx-vlm merges into
    # (model, input_ids, pixel inputs) -> (mlx-vlm's merged embeddings, what its generation
    # passes the language model's first step besides them)
    mlx_embeddings: Callable = model_merge
    # (model, folder, layout, exporter, the package's graphs) -> (graphs, files, reason): genai's files
    genai: Callable | None = None
    # mRoPE models: (model, input_ids, pixel inputs) -> (positions [3, batch, sequence], deltas
    # [batch, 1]) as the runtime computes them, and model -> f(inputs_embeds, cache,
    # position_ids) -> logits, the language model given those positions
    rope_index: Callable | None = None
    positioned: Callable | None = None
    package_config: Callable | None = None  # the folder's config -> the package's config.json, where they differ
    prefix_attention: bool = False  # the prompt (a call on an empty past) attends both ways, as PaliGemma's
    image_first: bool = False  # the processor puts the image tokens first (mlx-vlm's merge assumes it: PaliGemma)
    image_token: Callable | None = None  # model -> the package's image token id, where config.json's is not one
