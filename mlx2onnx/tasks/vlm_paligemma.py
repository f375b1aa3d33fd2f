"""mlx-vlm's paligemma (PaliGemma, PaliGemma 2) as an image-text-to-text package
(:mod:`.vision_language`).

mlx-vlm merges the prompt in float32: the SigLIP tower's features through the projector,
divided by sqrt(hidden_size), at the image tokens; the token embeddings elsewhere; zeros at
the pad token. Its prompt attends both ways: every prompt token sees every real prompt
token (the processor's attention mask, outer product), and each generated token sees all
before it. The package's decoder does the same with its first call: a call with an empty
past is the prompt (:attr:`Architecture.prefix_attention`), as transformers.js's
PaliGemma model runs it; later calls see every key before them.

transformers.js's PaliGemmaProcessor (images first) expands ``<image>`` to
``image_seq_length`` tokens at the start of the prompt and puts the BOS token after them
(mlx-vlm writes the features by position, the i-th at the i-th token: the same where the
prompt starts with the image, as the processor's prompts do); its SigLIP image processor
resizes to the tower's size with mean and std 0.5. The tower takes one image a prompt, as
mlx-vlm's does. onnxruntime-genai has no paligemma type.
"""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx

from .image_processors import folder_processor, siglip_image_settings
from .vlm_architecture import Architecture, patch_count
from .vlm_architecture import token_table as embeddings


def vision_function(model, dtype):
    """pixel_values [1, 3, H, W] -> the features mlx-vlm writes over the image tokens
    [1, tokens, hidden]: the tower (in the embeddings' dtype, as mlx-vlm casts the pixels),
    back to float32, the projector, over sqrt(hidden_size)."""
    scale = model.config.hidden_size**0.5

    def encode(pixel_values):
        tower_dtype = embeddings(model)(mx.zeros((1, 1), mx.int32)).dtype
        hidden, _, _ = model.vision_tower(
            pixel_values.transpose(0, 2, 3, 1).astype(tower_dtype), output_hidden_states=True
        )
        features = model.multi_modal_projector(hidden[None].astype(pixel_values.dtype))
        return features / scale

    return encode


def text_function(model):
    """``f(input_ids) -> inputs_embeds`` in float32 as mlx-vlm merges them: the token's
    embedding, zeros at the pad token."""
    embed, pad = embeddings(model), model.config.pad_token_id

    def embed_tokens(input_ids):
        rows = embed(input_ids).astype(mx.float32)
        return mx.where((input_ids == pad)[..., None], mx.zeros_like(rows), rows)

    return embed_tokens


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings and the prompt's two-way mask, as its generate step passes them."""
    out = model.get_input_embeddings(input_ids, mx.array(inputs["pixel_values"]), mask=mx.ones_like(input_ids))
    return out.inputs_embeds, {"mask": out.attention_mask_4d}


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """transformers.js's PaliGemma processor files: the folder's SigLIP image processor (or
    SigLIP's at the tower's size) with the image token count its expansion reads."""
    size = model.config.vision_config.image_size
    image = folder_processor(folder, siglip_image_settings(size))
    return {
        "preprocessor_config.json": dict(
            image, processor_class="PaliGemmaProcessor", image_seq_length=patch_count(model.config.vision_config)
        ),
        "processor_config.json": {"processor_class": "PaliGemmaProcessor"},
    }


ARCHITECTURE = Architecture(
    processor="PaliGemma",
    processor_configs=processor_configs,
    image_prompt=lambda model: [model.config.image_token_index] * patch_count(model.config.vision_config),
    vision=vision_function,
    text=text_function,
    mlx_embeddings=mlx_embeddings,
    prefix_attention=True,
    image_first=True,
)
