"""mlx-vlm's aya_vision (Aya Vision) as an image-text-to-text package
(:mod:`.vision_language`), served through transformers.js's llava type, which has no
Aya Vision type.

Aya Vision's SigLIP tower takes square tiles; each tile's patch states, pixel-shuffled by
``downsample_factor``, normalised and projected (SwiGLU), are its ``<|IMG_PATCH|>`` tokens.
The vision graph takes ``pixel_values`` [tiles, 3, S, S] and gives the tiles' features in
order; the decoder is mlx-vlm's Cohere2 text model. transformers.js's LlavaProcessor
(images first) resizes the image to one tile (bicubic, the folder's normalisation: Aya
Vision's processor with ``max_patches=1``, its global tile alone) and expands
``<|IMG_PATCH|>`` to the tile's tokens; the prompt writes Aya Vision's
``<|START_OF_IMG|>TILE_GLOBAL<|IMG_PATCH|><|END_OF_IMG|>`` around it. onnxruntime-genai has
no aya_vision type.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .vlm_internvl import tile_architecture, tile_processor_files
from .vlm_llava import package_config


def _side(model) -> int:
    """Image tokens along a tile's side."""
    vision = model.config.vision_config
    return vision.image_size // vision.patch_size // model.config.downsample_factor


def vision_function(model, dtype):
    """pixel_values [tiles, 3, S, S] -> the tiles' features [tiles, side, side, hidden] as
    mlx-vlm writes them over the image tokens (in the embeddings' dtype)."""

    def encode(pixel_values):
        *_, states = model.vision_tower(pixel_values.transpose(0, 2, 3, 1), output_hidden_states=True)
        selected = states[model.vision_feature_layer]
        if model.vision_feature_select_strategy == "default":
            selected = selected[:, 1:]
        return model.multi_modal_projector(selected).astype(dtype)

    return encode


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    size = model.config.vision_config.image_size
    return {"pixel_values": rng.uniform(-1, 1, (batch, 3, size, size)).astype(np.float32)}


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """One Aya Vision tile: the folder's mean and std (Aya Vision's 0.5), ``<|IMG_PATCH|>`` expanded."""
    found = folder / "preprocessor_config.json" if folder is not None else None
    settings = json.loads(found.read_text()) if found is not None and found.is_file() else {}
    mean, std = settings.get("image_mean", [0.5] * 3), settings.get("image_std", [0.5] * 3)
    return tile_processor_files(model.config.vision_config.image_size, _side(model), "<|IMG_PATCH|>", mean, std)


ARCHITECTURE = tile_architecture(vision_function, vision_inputs, processor_configs, _side, package_config)
