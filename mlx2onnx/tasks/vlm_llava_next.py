"""mlx-vlm's llava_next (LLaVA-NeXT, LLaVA 1.6) as an image-text-to-text package
(:mod:`.vision_language`), served through transformers.js's llava type, which has no
llava_next type.

mlx-vlm's LLaVA-NeXT encodes the processor's first image (the whole image resized to the
tower's size; not the any-resolution crops after it, nor the row newlines) and puts its
projected patches where the prompt has one ``<image>``, lengthening the sequence there. The
package is the LLaVA package (:mod:`.vlm_llava`: the same tower features and projector,
transformers.js's Llava processor expanding ``<image>`` to those patches beforehand): the
same embeddings at the same positions. The check gives mlx-vlm the prompt with each run of
image tokens as the one ``<image>`` it expands. onnxruntime-genai has no llava_next type.
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np

from .vlm_architecture import Architecture
from .vlm_llava import embeddings, image_tokens, processor_configs, text_function, vision_function, vision_inputs


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings for the prompt whose runs of image tokens are each one
    ``<image>`` (mlx-vlm expands it with the image's patches): as long as ``input_ids``."""
    image = model.config.image_token_index
    ids = np.array(input_ids).reshape(-1)
    kept = [i for i, t in enumerate(ids) if t != image or i == 0 or ids[i - 1] != image]
    pixels = mx.array(inputs["pixel_values"])[None]  # the processor's images [1, tiles, 3, H, W]
    return model.get_input_embeddings(mx.array(ids[kept][None]), pixels).inputs_embeds, {}


def package_config(config: dict) -> dict:
    """config.json as transformers.js reads it: a llava_next folder as its llava type."""
    return dict(config, model_type="llava")


ARCHITECTURE = Architecture(
    "Llava",
    embeddings,
    vision_function,
    vision_inputs,
    {"pixel_values": {0: "batch_size"}},
    text_function,
    mlx_embeddings,
    processor_configs,
    None,
    lambda model: [model.config.image_token_index] * image_tokens(model),
    package_config=package_config,
)
