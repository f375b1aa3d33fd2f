"""mlx-vlm's mistral3 (Mistral Small 3.x, Devstral, Magistral) and pixtral as
image-text-to-text packages (:mod:`.vision_language`), both over the Pixtral tower.

The Pixtral tower takes an image of any size (h x w patches): its rotary angles are rows
of a table of the tower's largest grid, looked up at ``row * max_width + column``. The
vision graph takes ``pixel_values`` [1, 3, H, W] with H and W dynamic (multiples of the
patch size times the merge size), computes each patch's row and column from the
convolution's output shape and attends over the whole image (mlx-vlm's block mask of one
image adds zeros). mistral3's projector then normalises, merges each m x m window of
patches into one vector (mlx-vlm's ``unfold``, as one reshape and transpose: the same
numbers in the same order) and projects; pixtral's projects each patch.

transformers.js runs both as its llava family (mistral3 is its ``Mistral3`` model, pixtral
its ``llava`` type) with its ``PixtralProcessor``: the image resized to fit ``longest_edge``,
each row of ``[IMG]`` tokens ended by ``[IMG_BREAK]`` and the last by ``[IMG_END]``, which
keep their own embeddings. onnxruntime-genai runs both through its mistral3 type
(:func:`genai_files`), which expands the prompt alike and runs the vision encoder once an
image.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedVariantError
from .image_processors import CLIP_MEAN, CLIP_STD, RESAMPLE, folder_processor
from .vlm_architecture import Architecture, image_token_id, token_lookup
from .vlm_genai import embedding_graph, genai_settings, processor_file
from .vlm_llava import package_config as llava_typed

CHECK_GRID = (2, 3)  # the check's image, in merged tokens (rows, columns): not square, so rows and columns differ


def merge_size(model) -> int:
    """Patches per side of one image token (mistral3's ``spatial_merge_size``; pixtral: 1)."""
    return getattr(model.config, "spatial_merge_size", 1)


def _tower_states(model, pixel_values):
    """The Pixtral tower's hidden states of ``vision_feature_layer`` for one image
    [1, H, W, C] (channels last), flattened to [h * w, hidden] row by row."""
    tower = model.vision_tower.vision_model
    layer = model.vision_feature_layer
    if not isinstance(layer, int):
        raise UnsupportedVariantError(
            f"vision_feature_layer {layer}: the Pixtral export handles one feature layer (an int)"
        )
    from mlx_vlm.models.pixtral.vision import position_ids_in_meshgrid

    patches = tower.patch_conv(pixel_values.astype(tower.patch_conv.weight.dtype))
    _, h, w, width = patches.shape
    hidden = tower.ln_pre(patches.reshape(1, h * w, width))
    positions = position_ids_in_meshgrid([patches[0]], tower.config.image_size // tower.config.patch_size)
    rotary = tower.patch_positional_embedding(hidden, positions)
    states = [hidden]
    for block in tower.transformer.layers[: len(tower.transformer.layers) + 1 + layer if layer < 0 else layer]:
        states.append(block(states[-1], position_embeddings=rotary))
    return states[-1][0], (h, w)


def merged(features: mx.array, grid: tuple, m: int) -> mx.array:
    """mlx-vlm's Mistral3PatchMerger before its linear layer, for one image: [h * w, d]
    patches -> [(h/m) * (w/m), d * m * m], each window's values channel by channel, row
    by row within a channel (``unfold``'s order)."""
    h, w = grid
    d = features.shape[-1]
    windows = features.reshape(h // m, m, w // m, m, d).transpose(0, 2, 4, 1, 3)
    return windows.reshape((h // m) * (w // m), d * m * m)


def vision_function(model, dtype):
    """pixel_values [1, 3, H, W] -> image features [tokens, hidden] in mlx-vlm's order
    (cast to the embeddings' dtype, as the merge with them gives)."""
    projector, m = model.multi_modal_projector, merge_size(model)

    def encode(pixel_values):
        features, grid = _tower_states(model, pixel_values.transpose(0, 2, 3, 1))
        if hasattr(projector, "patch_merger"):  # mistral3
            features = projector.patch_merger.merging_layer(merged(projector.norm(features), grid, m))
        features = projector.linear_2(projector.gelu(projector.linear_1(features)))
        return features.astype(dtype)

    return encode


def vision_graph(model, exporter, dtype):
    """The vision encoder with the image's height and width dynamic (multiples of the
    patch size times the merge size, at most the tower's ``image_size``)."""
    from ..capture.dynamic import Dim

    step = model.config.vision_config.patch_size * merge_size(model)
    pixels = np.random.default_rng(1).uniform(-1.5, 1.5, (1, 3, 2 * step, 3 * step)).astype(np.float32)
    largest = model.config.vision_config.image_size // step * step
    side = {"multiple_of": step, "max": largest}
    return exporter.with_options(
        input_names=["pixel_values"],
        output_names=["image_features"],
        path=None,
        dynamic={"pixel_values": {2: Dim("height", **side), 3: Dim("width", **side)}},
    ).to_ir(vision_function(model, dtype), mx.array(pixels))


def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The check's image: CHECK_GRID image tokens (not square)."""
    step = model.config.vision_config.patch_size * merge_size(model)
    rows, columns = CHECK_GRID
    return {"pixel_values": rng.uniform(-1.8, 2.1, (1, 3, rows * step, columns * step)).astype(np.float32)}


def image_sizes(pixel_values: np.ndarray) -> mx.array:
    return mx.array([list(pixel_values.shape[-2:])])


def mlx_embeddings(model, input_ids: mx.array, inputs: dict) -> tuple[mx.array, dict]:
    """mlx-vlm's merged embeddings, as its generate step asks for them (the image's size
    given, as its processor gives it)."""
    pixels = inputs["pixel_values"]
    out = model.get_input_embeddings(input_ids, mx.array(pixels), image_sizes=image_sizes(pixels))
    return out.inputs_embeds, {}


def special_tokens(folder: Path | None) -> dict[str, str]:
    """The image, row-break and image-end tokens, as the folder's processor names them."""
    from .loading import folder_json

    names = {"image_token": "[IMG]", "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]"}
    found = (folder_json(folder, "processor_config.json") if folder is not None else None) or {}
    return {k: found.get(k, v) for k, v in names.items()}


def processor_configs(model, folder: Path | None = None) -> dict[str, dict]:
    """transformers.js's Pixtral processor files: the folder's image processor (or
    Pixtral's: longest edge the tower's image size, bicubic, CLIP's normalisation) with the
    patch and merge sizes its resize reads, and the tokens its expansion writes."""
    vision, m = model.config.vision_config, merge_size(model)
    default = {
        "image_processor_type": "PixtralImageProcessor",
        "do_resize": True,
        "size": {"longest_edge": vision.image_size},
        "resample": RESAMPLE["bicubic"],
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": list(CLIP_MEAN),
        "image_std": list(CLIP_STD),
        "do_convert_rgb": True,
    }
    image = dict(
        folder_processor(folder, default),
        processor_class="PixtralProcessor",
        patch_size=vision.patch_size,
        spatial_merge_size=m,
    )
    return {
        "preprocessor_config.json": image,
        "processor_config.json": {
            "processor_class": "PixtralProcessor",
            "patch_size": vision.patch_size,
            "spatial_merge_size": m,
            **special_tokens(folder),
        },
    }


def image_prompt(model) -> list[int]:
    """The check's image in a prompt: each row of image tokens ended by another token, as
    the processor ends rows with ``[IMG_BREAK]`` and the image with ``[IMG_END]`` (config.json
    does not name their ids: the check takes the tokens after the image token's id, which
    keep their own embeddings alike)."""
    config = model.config
    rows, columns = CHECK_GRID
    image, vocab = image_token_id(config), config.text_config.vocab_size
    row_break, end = (image + 1) % vocab, (image + 2) % vocab
    return [t for r in range(rows) for t in [image] * columns + [row_break if r < rows - 1 else end]]


def genai_files(model, folder: Path, layout: list, exporter, graphs: dict) -> tuple[dict, dict[str, dict], str | None]:
    """(graphs, files, None): onnxruntime-genai's mistral3 type over the package's vision
    encoder and decoder, its own embedding model, and its Pixtral image processor (resized
    to multiples of the patch size times the merge size within the tower's largest image,
    CLIP's normalisation, the image's size for the prompt's expansion); or ({}, {}, why
    not). genai's processor resizes by area (Qwen's smart resize), not by the longest edge
    as transformers.js's does: the two agree on an image whose sides are such multiples
    and fit the tower."""
    vision, text, m = model.config.vision_config, model.config.text_config, merge_size(model)
    settings, reason = genai_settings(
        model,
        folder,
        layout,
        "mistral3",
        {"inputs": {"pixel_values": "pixel_values"}, "patch_size": vision.patch_size, "spatial_merge_size": m},
    )
    if settings is None:
        return {}, {}, reason
    step, largest = vision.patch_size * m, vision.image_size
    processor = processor_file(
        "pixtral_image_processor",
        [
            ("decode_image", "DecodeImage", {"color_space": "RGB"}),
            (
                "resize",
                "Resize",
                {
                    "height": largest,
                    "width": largest,
                    "smart_resize": 1,
                    "min_pixels": step * step,
                    "max_pixels": largest * largest,
                    "patch_size": vision.patch_size,
                    "merge_size": m,
                },
            ),
            ("rescale", "Rescale", {"rescale_factor": 1 / 255}),
            ("normalize", "Normalize", {"mean": list(CLIP_MEAN), "std": list(CLIP_STD)}),
            ("to_channel_first", "Permute3D", {"dims": [2, 0, 1]}),
            ("pixtral_image_sizes", "PixtralImageSizes", {}),
        ],
    )
    embedding = embedding_graph(
        exporter,
        token_lookup(model),
        image_token_id(model.config),
        text.vocab_size,
        (6, text.hidden_size),
        {0: "num_image_tokens"},
    )
    return (
        {"onnx/embedding.onnx": embedding},
        {"genai_config.json": settings, "genai_processor_config.json": processor},
        None,
    )


ARCHITECTURE = Architecture(
    processor="Pixtral",
    processor_configs=processor_configs,
    image_prompt=image_prompt,
    vision_graph=vision_graph,
    vision_inputs=vision_inputs,
    mlx_embeddings=mlx_embeddings,
    genai=genai_files,
)
# Pixtral alone (no merger): transformers.js has no pixtral type and runs it as its llava type
PIXTRAL = replace(ARCHITECTURE, package_config=llava_typed)
