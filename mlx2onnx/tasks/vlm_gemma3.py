"""mlx-vlm's gemma3 as an image-text-to-text package (:mod:`.vision_language`): its SigLIP
tower and projector with mlx-vlm's 1/sqrt(hidden_size) feature scaling, its text
embeddings with image and padding tokens zeroed (the language model scales both), the
Gemma3 processor files of transformers.js, and onnxruntime-genai's gemma3 type."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np

from .image_processors import siglip_image_settings
from .vlm_architecture import Architecture
from .vlm_architecture import token_table as embeddings
from .vlm_genai import embedding_graph, genai_settings, processor_file


def vision_function(model, dtype):
    """pixel_values [batch, 3, H, W] -> the image features mlx-vlm scatters into the
    embeddings (its vision tower, projector and 1/sqrt(hidden_size) scaling)."""

    def encode(pixel_values):
        hidden, _, _ = model.vision_tower(pixel_values.transpose(0, 2, 3, 1).astype(dtype), output_hidden_states=True)
        features = model.multi_modal_projector(hidden)
        return features / (model.config.hidden_size**0.5)

    return encode


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    size = model.config.vision_config.image_size
    return {"pixel_values": rng.uniform(-1, 1, (batch, 3, size, size)).astype(np.float32)}


def text_function(model):
    """input_ids -> mlx-vlm's text embeddings before the merge (image and padding tokens 0)."""
    embed, config = embeddings(model), model.config
    pad = config.pad_token_id if config.pad_token_id is not None else 0

    def embed_tokens(input_ids):
        keep = (input_ids != config.image_token_index) & (input_ids != pad)
        return mx.where(keep[..., None], embed(input_ids), mx.zeros((), embed.weight.dtype))

    return embed_tokens


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings, as its generate step asks for them."""
    return model.get_input_embeddings(
        input_ids, mx.array(inputs["pixel_values"]), mask=mx.ones_like(input_ids)
    ).inputs_embeds, {}


def processor_configs(model, folder=None) -> dict[str, dict]:
    """transformers.js's Gemma3 processor files: the image processor (mlx-vlm's SigLIP
    input: resize to image_size, 1/255, mean and std 0.5) and the image token count."""
    image = siglip_image_settings(model.config.vision_config.image_size, "Gemma3ImageProcessor")
    return {
        "preprocessor_config.json": dict(image, processor_class="Gemma3Processor"),
        "processor_config.json": {
            "processor_class": "Gemma3Processor",
            "image_seq_length": model.config.text_config.mm_tokens_per_image,
        },
    }


# onnxruntime-genai's gemma3 processor expands every image to this many tokens
GENAI_IMAGE_TOKENS = 256


def genai_files(model, folder: Path, layout: list, exporter, graphs: dict) -> tuple[dict, dict[str, dict], str | None]:
    """(graphs, files, None): onnxruntime-genai's own embedding model, genai_config.json
    (its gemma3 type over the package's vision encoder, that embedding model and the text
    decoder) and its image processor's configuration (onnxruntime-extensions' operations:
    the SigLIP input of :func:`processor_configs`); or ({}, {}, why genai cannot run the
    package)."""
    text = model.config.text_config
    if text.mm_tokens_per_image != GENAI_IMAGE_TOKENS:
        return (
            {},
            {},
            (
                f"onnxruntime-genai's gemma3 processor expands an image to {GENAI_IMAGE_TOKENS} tokens; "
                f"this model's vision tower gives {text.mm_tokens_per_image}"
            ),
        )
    settings, reason = genai_settings(model, folder, layout, "gemma3", {"inputs": {"pixel_values": "pixel_values"}})
    if settings is None:
        return {}, {}, reason
    size = model.config.vision_config.image_size
    # genai's gemma3 processor: DecodeImage gives RGB already; a ConvertRGB after it swaps the channels
    # (measured: the logits then are those of the image in BGR order)
    processor = processor_file(
        "gemma3_image_processor",
        [
            ("decode_image", "DecodeImage", {"color_space": "RGB"}),
            ("resize", "Resize", {"height": size, "width": size, "keep_aspect_ratio": 0}),
            ("rescale", "Rescale", {"rescale_factor": 1 / 255}),
            ("normalize", "Normalize", {"mean": [0.5] * 3, "std": [0.5] * 3}),
            ("to_channel_first", "Permute3D", {"dims": [2, 0, 1]}),
        ],
    )
    embedding = embedding_graph(
        exporter,
        text_function(model),
        model.config.image_token_index,
        text.vocab_size,
        (1, text.mm_tokens_per_image, text.hidden_size),
        {0: "num_images", 1: "num_image_tokens"},
    )
    return (
        {"onnx/embedding.onnx": embedding},
        {"genai_config.json": settings, "genai_processor_config.json": processor},
        None,
    )


ARCHITECTURE = Architecture(
    processor="Gemma3",
    processor_configs=processor_configs,
    image_prompt=lambda model: [model.config.image_token_index] * model.config.text_config.mm_tokens_per_image,
    vision=vision_function,
    vision_inputs=vision_inputs,
    vision_axes={"pixel_values": {0: "batch_size"}},
    text=text_function,
    mlx_embeddings=mlx_embeddings,
    genai=genai_files,
)
