"""mlx-vlm's internvl_chat (InternVL) as an image-text-to-text package
(:mod:`.vision_language`), served through transformers.js's llava type, which has no
InternVL type of its own.

InternVL's tower takes 448-pixel tiles: each tile's patch states without the class token,
pixel-shuffled by ``downsample_ratio`` and projected (``mlp1``), are its
``<IMG_CONTEXT>`` tokens (256 for InternVL's 448 tiles of 14-pixel patches). The vision
graph takes ``pixel_values`` [tiles, 3, S, S] and gives the tiles' features in order.
transformers.js's LlavaProcessor (images first) resizes the image to one S x S tile
(bicubic, ImageNet's normalisation, as InternVL's own processor does with ``max_num=1``:
one tile and no thumbnail) and expands ``<IMG_CONTEXT>`` to (S / p)**2 tokens, where the
package's ``patch_size`` p is the pixels a token stands for; the prompt writes InternVL's
``<img><IMG_CONTEXT></img>`` around it. Several tiles (InternVL's ``max_num`` above 1) are
the graph's to take, not transformers.js's processor's. onnxruntime-genai has no
internvl_chat type.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .image_processors import IMAGENET_MEAN, IMAGENET_STD, RESAMPLE, square_settings
from .vlm_architecture import Architecture
from .vlm_llava import package_config


def _side(model) -> int:
    """Image tokens along a tile's side."""
    vision = model.config.vision_config
    return int(vision.image_size // vision.patch_size * model.downsample_ratio)


def vision_function(model, dtype):
    """pixel_values [tiles, 3, S, S] -> the tiles' features [tiles, tokens, hidden] as
    mlx-vlm writes them over the image tokens (in the embeddings' dtype)."""
    from mlx_vlm.models.base import pixel_shuffle

    def encode(pixel_values):
        tower_dtype = model.vision_model.embeddings.patch_embedding.weight.dtype
        states, _, _ = model.vision_model(
            pixel_values.astype(tower_dtype).transpose(0, 2, 3, 1), output_hidden_states=True
        )
        features = pixel_shuffle(states[:, 1:, :], shuffle_ratio=model.downsample_ratio)
        for layer in model.mlp1:
            features = layer(features)
        return features.astype(dtype)

    return encode


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    size = model.config.vision_config.image_size
    return {"pixel_values": rng.uniform(-2.0, 2.5, (batch, 3, size, size)).astype(np.float32)}


def tile_processor_files(size: int, side: int, image_token: str, mean, std) -> dict[str, dict]:
    """transformers.js's Llava processor files for one tile of a model served through the
    llava type: the image resized to the ``size`` square tile (bicubic, normalised with
    ``mean`` and ``std``), ``image_token`` expanded to the tile's ``side`` x ``side`` tokens."""
    image = square_settings("CLIPImageProcessor", size, mean, std, RESAMPLE["bicubic"])
    return {
        "preprocessor_config.json": dict(image, processor_class="LlavaProcessor"),
        "processor_config.json": {
            "processor_class": "LlavaProcessor",
            "image_token": image_token,
            "patch_size": size // side,
            "num_additional_image_tokens": 0,
            "vision_feature_select_strategy": "full",
        },
    }


def tile_architecture(vision, inputs, processor_configs, side, package_config) -> Architecture:
    """The Architecture of a tile model served through the llava type (InternVL, Aya
    Vision): ``vision`` the tiles' features, ``inputs`` the check's tiles, ``side`` (model ->
    the image tokens along a tile's side)."""
    return Architecture(
        processor="Llava",
        processor_configs=processor_configs,
        image_prompt=lambda model: [model.config.image_token_index] * side(model) ** 2,
        vision=vision,
        vision_inputs=inputs,
        vision_axes={"pixel_values": {0: "tiles"}},
        package_config=package_config,
    )


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """One InternVL tile: bicubic, ImageNet's mean and std, ``<IMG_CONTEXT>`` expanded."""
    size = model.config.vision_config.image_size
    return tile_processor_files(size, _side(model), "<IMG_CONTEXT>", IMAGENET_MEAN, IMAGENET_STD)


def llava_typed(config: dict) -> dict:
    """config.json as transformers.js's llava type reads it: the text settings in
    ``text_config`` (InternVL's own configs call them ``llm_config``) and the image token."""
    from mlx_vlm.models.internvl_chat.config import ModelConfig

    text = config.get("text_config") or config.get("llm_config")
    token = config.get("image_token_index", ModelConfig.image_token_index)
    return package_config(dict(config, text_config=text, image_token_index=token))


ARCHITECTURE = tile_architecture(vision_function, vision_inputs, processor_configs, _side, llava_typed)
