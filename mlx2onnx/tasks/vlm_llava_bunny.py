"""mlx-vlm's llava_bunny (Bunny) as an image-text-to-text package (:mod:`.vision_language`),
served through transformers.js's llava type, which has no Bunny type.

Bunny's prompts carry the image as the id -200, which no tokenizer writes: mlx-vlm puts the
SigLIP tower's 27 x 27 projected patch states where the prompt has it, lengthening the
sequence there (in float32: the features are float32 and the merge promotes the token
embeddings to them). The package gives its tokenizer an ``<image>`` token with the first id
past the text model's embedding table (config.json's ``image_token_index``), which the token
embedding graph reads as id 0 (the runtimes' merge writes the features over those positions),
and transformers.js's Llava processor (images first) expands ``<image>`` to the patches
beforehand: the same embeddings at the same positions. The check gives mlx-vlm the prompt
with each run of image tokens as one -200. onnxruntime-genai has no llava_bunny type.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedModelError
from .image_processors import folder_processor, siglip_image_settings
from .vlm_architecture import Architecture, collapsed, patch_count, text_config_of
from .vlm_architecture import token_table as embeddings
from .vlm_llava import package_config

IMAGE = "<image>"  # the token the package's tokenizer gains


def image_token(model) -> int:
    """The package's image token id: the first past the text model's embedding table."""
    return model.config.text_config.vocab_size


def vision_function(model, dtype):
    """pixel_values [1, 3, S, S] -> the projected patch states mlx-vlm writes at the image
    (float32, as its merge gives them)."""

    def encode(pixel_values):
        *_, states = model.vision_tower(pixel_values.transpose(0, 2, 3, 1), output_hidden_states=True)
        return model.mm_projector(states[-1].astype(pixel_values.dtype))

    return encode


def text_function(model):
    """``f(input_ids) -> inputs_embeds`` in float32 (mlx-vlm's merge promotes them); the
    package's image token reads row 0 (the merge writes the features over it)."""
    embed, last = embeddings(model), model.config.text_config.vocab_size - 1

    def embed_tokens(input_ids):
        return embed(mx.minimum(input_ids, last)).astype(mx.float32)

    return embed_tokens


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings for the prompt whose runs of the package's image token
    are each one -200 (mlx-vlm writes the patches there): as long as ``input_ids``."""
    token = image_token(model)
    ids = collapsed(input_ids, token)
    prompt = np.where(ids == token, model.config.image_token_index, ids)
    return model.get_input_embeddings(mx.array(prompt[None]), mx.array(inputs["pixel_values"])).inputs_embeds, {}


def _tokenizer_files(model, folder: Path) -> dict[str, dict]:
    """The folder's tokenizer files with ``<image>`` added at :func:`image_token`."""
    token = image_token(model)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    vocab = tokenizer.get("model", {}).get("vocab") or {}
    used = max([*(vocab.values() if isinstance(vocab, dict) else []), *(t["id"] for t in tokenizer["added_tokens"])])
    if used >= token:
        raise UnsupportedModelError(
            f"the tokenizer uses id {used}, at or past the text model's {token} embedding rows: the package "
            f"cannot give {IMAGE} an id of its own"
        )
    entry = {
        "content": IMAGE,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
    tokenizer["added_tokens"] = [*tokenizer["added_tokens"], {"id": token, **entry}]
    files = {"tokenizer.json": tokenizer}
    config = folder / "tokenizer_config.json"
    if config.is_file():
        settings = json.loads(config.read_text())
        decoder = dict(settings.get("added_tokens_decoder") or {}, **{str(token): entry})
        files["tokenizer_config.json"] = dict(settings, added_tokens_decoder=decoder)
    return files


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """transformers.js's Llava processor files (the folder's SigLIP image processor, else
    SigLIP's at the tower's size; ``<image>`` expanded to the patches) and the tokenizer
    with ``<image>``."""
    vision = model.config.vision_config
    image = folder_processor(folder, siglip_image_settings(vision.image_size))
    files = {
        "preprocessor_config.json": dict(image, processor_class="LlavaProcessor"),
        "processor_config.json": {
            "processor_class": "LlavaProcessor",
            "image_token": IMAGE,
            "patch_size": vision.patch_size,
            "num_additional_image_tokens": 0,
            "vision_feature_select_strategy": "full",
        },
    }
    return files if folder is None else {**files, **_tokenizer_files(model, folder)}


def llava_typed(config: dict) -> dict:
    """config.json as transformers.js's llava type reads it: the text settings in
    ``text_config`` (Bunny's are at the top) and the package's image token."""
    text = text_config_of(config)
    vocab = text.get("vocab_size", config.get("vocab_size"))
    return package_config(dict(config, text_config=text, image_token_index=vocab))


ARCHITECTURE = Architecture(
    processor="Llava",
    processor_configs=processor_configs,
    image_prompt=lambda model: [image_token(model)] * patch_count(model.config.vision_config),
    vision=vision_function,
    text=text_function,
    mlx_embeddings=mlx_embeddings,
    package_config=llava_typed,
    image_token=image_token,
)
