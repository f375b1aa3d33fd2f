"""mlx-vlm's llava as an image-text-to-text package (:mod:`.vision_language`): its CLIP
tower's hidden states of ``vision_feature_layer`` (the class token dropped under the
``default`` strategy) through the projector, the token embeddings as they are (the image
token's positions take the features), and transformers.js's Llava processor files. Its
processor expands ``<image>`` to (height / patch) x (width / patch) tokens plus
``num_additional_image_tokens``: the package writes 0 where the class token is dropped
(Transformers' Python processor subtracts it, transformers.js's does not). onnxruntime-genai
has no llava type."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import UnsupportedVariantError
from .image_processors import CLIP_MEAN, CLIP_STD, RESAMPLE, centre_crop_settings, folder_processor
from .vlm_architecture import Architecture, patch_count


def _selected(model, pixel_values):
    """The hidden states mlx-vlm projects (its get_input_embeddings)."""
    *_, hidden_states = model.vision_tower(pixel_values, output_hidden_states=True)
    layer = model.vision_feature_layer
    if not isinstance(layer, int):
        raise UnsupportedVariantError(
            f"vision_feature_layer {layer}: the llava export handles one feature layer (an int), as LLaVA 1.5 has"
        )
    selected = hidden_states[layer]
    return selected[:, 1:] if model.vision_feature_select_strategy == "default" else selected


def vision_function(model, dtype):
    """pixel_values [batch, 3, H, W] -> the image features mlx-vlm writes over the image
    tokens (cast to the embeddings' dtype, as it casts them)."""

    def encode(pixel_values):
        features = model.multi_modal_projector(_selected(model, pixel_values.transpose(0, 2, 3, 1)))
        return features.astype(dtype)

    return encode


def image_tokens(model) -> int:
    vision = model.config.vision_config
    patches = patch_count(vision)
    return patches if model.vision_feature_select_strategy == "default" else patches + 1


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    size = model.config.vision_config.image_size
    return {"pixel_values": rng.uniform(-1.8, 2.1, (batch, 3, size, size)).astype(np.float32)}


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """transformers.js's Llava processor files: the folder's CLIP image processor (or CLIP's
    at the tower's size), and the image token with its count."""
    vision = model.config.vision_config
    clip = centre_crop_settings(
        "CLIPImageProcessor",
        {"shortest_edge": vision.image_size},
        vision.image_size,
        CLIP_MEAN,
        CLIP_STD,
        RESAMPLE["bicubic"],
    )
    return {
        "preprocessor_config.json": folder_processor(folder, dict(clip, processor_class="LlavaProcessor")),
        "processor_config.json": {
            "processor_class": "LlavaProcessor",
            "image_token": "<image>",
            "patch_size": vision.patch_size,
            "num_additional_image_tokens": 0 if model.vision_feature_select_strategy == "default" else 1,
            "vision_feature_select_strategy": model.vision_feature_select_strategy,
        },
    }


def package_config(config: dict) -> dict:
    """config.json as transformers.js's llava type reads it: a folder of another
    architecture served through it (LLaVA-NeXT, Pixtral, InternVL, Aya Vision, Bunny)."""
    return dict(config, model_type="llava")


ARCHITECTURE = Architecture(
    processor="Llava",
    processor_configs=processor_configs,
    image_prompt=lambda model: [model.config.image_token_index] * image_tokens(model),
    vision=vision_function,
    vision_inputs=vision_inputs,
    vision_axes={"pixel_values": {0: "batch_size"}},
)
