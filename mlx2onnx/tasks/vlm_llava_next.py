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

from dataclasses import replace

import mlx.core as mx

from .vlm_architecture import collapsed
from .vlm_llava import ARCHITECTURE as LLAVA
from .vlm_llava import package_config


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings for the prompt whose runs of image tokens are each one
    ``<image>`` (mlx-vlm expands it with the image's patches): as long as ``input_ids``."""
    ids = collapsed(input_ids, model.config.image_token_index)
    pixels = mx.array(inputs["pixel_values"])[None]  # the processor's images [1, tiles, 3, H, W]
    return model.get_input_embeddings(mx.array(ids[None]), pixels).inputs_embeds, {}


ARCHITECTURE = replace(LLAVA, mlx_embeddings=mlx_embeddings, package_config=package_config)
