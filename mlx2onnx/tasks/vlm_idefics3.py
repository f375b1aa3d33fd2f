"""mlx-vlm's idefics3 (SmolVLM) as an image-text-to-text package (:mod:`.vision_language`):
its SigLIP tower over each image, the pixel-shuffle connector, the plain text
embeddings, and transformers.js's Idefics3 processor files: images split into tiles of
the tower's size plus one global image where the folder's processor splits them
(SmolVLM's ``do_image_splitting``), else the global image alone. onnxruntime-genai has no
idefics3 type.

Whole images only: mlx-vlm drops images whose pixels are all zero and buckets the patch
positions of partly masked ones with Python numbers read from the mask (``int()`` of an
array, which no exported graph can follow). Every tile and global image transformers.js
gives for one prompt is whole (it resizes to multiples of the tile size before cutting;
its pixel mask is all true), where mlx-vlm's tower equals its unmasked path; the graph
takes ``pixel_attention_mask`` and does not read it. A batch of prompts with different
tile or image counts (padded with zero images) is outside what the package serves."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from .vlm_architecture import Architecture, embedding_lookup


def embeddings(model):
    return model.language_model.embed_tokens


def vision_function(model, dtype):
    """(pixel_values [batch, images, 3, H, W], pixel_attention_mask [batch, images, H, W])
    -> image features [batch * images * tokens, width], as mlx-vlm's get_input_embeddings
    computes them for whole images (see the module; ``dtype`` is not used: mlx-vlm gives
    its tower the pixels as they come)."""

    def encode(pixel_values, pixel_attention_mask):
        b, n, c, h, w = pixel_values.shape
        pixels = pixel_values.reshape(b * n, c, h, w)
        hidden, *_ = model.vision_model(pixels.transpose(0, 2, 3, 1), output_hidden_states=True)
        features = model.connector(hidden.astype(pixels.dtype))
        return features.reshape(-1, features.shape[-1])

    return encode


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    size = model.config.vision_config.image_size
    return {
        "pixel_values": rng.uniform(-1, 1, (batch, 1, 3, size, size)).astype(np.float32),
        "pixel_attention_mask": np.ones((batch, 1, size, size), bool),
    }


text_function = embedding_lookup(embeddings)


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    return model.get_input_embeddings(
        input_ids, mx.array(inputs["pixel_values"]), pixel_attention_mask=mx.array(inputs["pixel_attention_mask"])
    ).inputs_embeds, {}


def image_tokens(model) -> int:
    """The image tokens one image takes in a prompt."""
    vision = model.config.vision_config
    return (vision.image_size // vision.patch_size) ** 2 // model.config.scale_factor**2


def splitting(model, folder: Path | None) -> dict:
    """The image processor's splitting options: the folder's own (SmolVLM's
    preprocessor_config.json: ``do_image_splitting``, ``size.longest_edge`` the longest edge
    an image is resized to before it is cut into tiles of the tower's size, ``resample``),
    else one global image at the tower's size."""
    size = model.config.vision_config.image_size
    path = None if folder is None else folder / "preprocessor_config.json"
    source = json.loads(path.read_text()) if path is not None and path.is_file() else {}
    longest = (source.get("size") or {}).get("longest_edge")
    if not (source.get("do_image_splitting") and longest):
        return {"do_image_splitting": False, "size": {"longest_edge": size}, "resample": 2}
    return {"do_image_splitting": True, "size": {"longest_edge": longest}, "resample": source.get("resample", 2)}


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """transformers.js's Idefics3 processor files: tiles of the tower's image_size (and one
    global image resized to it), or the global image alone (:func:`splitting`), scaled to
    [-1, 1] (SigLIP's mean and std 0.5), and the image token count of each."""
    size = model.config.vision_config.image_size
    image = {
        "image_processor_type": "Idefics3ImageProcessor",
        "processor_class": "Idefics3Processor",
        "do_resize": True,
        "max_image_size": {"longest_edge": size},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5] * 3,
        "image_std": [0.5] * 3,
        "do_pad": True,
        "do_convert_rgb": True,
        **splitting(model, folder),
    }
    return {
        "preprocessor_config.json": image,
        "processor_config.json": {"processor_class": "Idefics3Processor", "image_seq_len": image_tokens(model)},
    }


ARCHITECTURE = Architecture(
    processor="Idefics3",
    processor_configs=processor_configs,
    image_prompt=lambda model: [model.config.image_token_index] * image_tokens(model),
    vision=vision_function,
    vision_inputs=vision_inputs,
    vision_axes={
        "pixel_values": {0: "batch_size", 1: "num_images"},
        "pixel_attention_mask": {0: "batch_size", 1: "num_images"},
    },
    text=text_function,
    mlx_embeddings=mlx_embeddings,
)
