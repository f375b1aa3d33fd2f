"""Image features: an mlx-vlm DINOv2 folder -> a transformers.js
``image-feature-extraction`` package, and its check.

The package holds ``onnx/model.onnx`` (input ``pixel_values`` float32 [batch_size, 3,
crop, crop], channels first as the runtimes' image processors give them, at the image
processor's crop size; outputs ``last_hidden_state`` [batch_size, 1 + registers +
patches, hidden], the normed token sequence, and ``pooler_output`` [batch_size, hidden],
its class token: mlx-vlm's ``Model`` output), the folder's config.json (transformers.js's
``dinov2`` type; ``dinov2_with_registers`` for a model with register tokens) and its
``preprocessor_config.json`` (DINOv2's image processor: resize the shortest edge to 256,
centre crop 224, ImageNet mean and std), or that processor's defaults. The position
embeddings are interpolated to the crop's patch grid as mlx-vlm interpolates them (the
graph holds them at that size). ``pipeline("image-feature-extraction", PACKAGE)(image)``
gives ``last_hidden_state``; ``{pool: true}`` ``pooler_output``."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..io.notes import PackageNotes, noted
from .image_processors import IMAGENET_MEAN, IMAGENET_STD, RESAMPLE, centre_crop_settings, folder_processor
from .loading import load_with

OUTPUTS = ("last_hidden_state", "pooler_output")


def load_dinov2_folder(folder: Path):
    """The model as ``mlx_vlm.utils.load_model`` loads the folder."""
    return load_with(folder, "mlx-vlm", "mlx_vlm.utils", "load_model", lambda load_model: load_model(folder))


def image_processor(folder: Path, config: dict) -> dict:
    """The folder's preprocessor_config.json, or DINOv2's image processor (its crop at the
    model's image size where that is smaller than 224)."""
    crop = min(224, int(config.get("image_size", 224)))
    default = centre_crop_settings(
        "BitImageProcessor", {"shortest_edge": crop * 8 // 7}, crop, IMAGENET_MEAN, IMAGENET_STD, RESAMPLE["bicubic"]
    )
    return folder_processor(folder, default)


def crop_size(processor: dict) -> tuple[int, int]:
    """(height, width) of the processor's output images."""
    crop = processor.get("crop_size") if processor.get("do_center_crop", True) else processor.get("size")
    if isinstance(crop, int):
        return crop, crop
    if "shortest_edge" in crop:
        return crop["shortest_edge"], crop["shortest_edge"]
    return crop["height"], crop["width"]


def encoder(model):
    """pixel_values [batch, 3, H, W] -> (last_hidden_state, pooler_output) as mlx-vlm
    gives them (its convolution reads channels last)."""

    def encode(pixel_values):
        out = model(pixel_values.transpose(0, 2, 3, 1))
        return out["last_hidden_state"], out["pooler_output"]

    return encode


def example_pixels(processor: dict, batch: int, seed: int) -> np.ndarray:
    """Normalised pixels of ``batch`` images at the processor's crop size."""
    height, width = crop_size(processor)
    return np.random.default_rng(seed).uniform(-2.1, 2.6, (batch, 3, height, width)).astype(np.float32)


def export_dinov2(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the image-feature-extraction package of ``folder`` (see module) to ``out``,
    whole or not at all."""
    from ..io.packages import package_folder, save_graphs, write_json_files

    config = json.loads((folder / "config.json").read_text())
    with stage(f"loading {folder} with mlx-vlm"):
        model = load_dinov2_folder(folder)
    processor = image_processor(folder, config)
    with stage("tracing the encoder and translating it"):
        graph = exporter.with_options(
            input_names=["pixel_values"],
            output_names=list(OUTPUTS),
            path=None,
            dynamic={"pixel_values": {0: "batch_size"}},
        ).to_ir(encoder(model), mx.array(example_pixels(processor, 2, 0)))
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, {"onnx/model.onnx": graph}, exporter.check)
        notes = PackageNotes(task="image-feature-extraction")
        write_json_files(package, {"config.json": noted(config, notes), "preprocessor_config.json": processor}, dtypes)
    return out


def check_dinov2(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """The package's outputs for fresh pixels in a plain onnxruntime session against
    mlx-vlm's DINOv2 on the same pixels."""
    from ..io.graph_files import graph_path
    from ..verify.plain import plain_session, reference

    model = load_dinov2_folder(folder)
    processor = json.loads((package / "preprocessor_config.json").read_text())
    pixels = example_pixels(processor, 2, seed + 1)
    plain = plain_session(graph_path(package, "onnx/model.onnx"), atol, rtol)
    got = plain.session.run(list(OUTPUTS), {"pixel_values": pixels})
    rows = []
    for name, row_got, row_want in zip(OUTPUTS, got, encoder(model)(mx.array(pixels))):
        row_want, held = reference(row_want)
        error, bound = plain.compare(row_got, row_want, held)
        rows.append({"input": "2 random images", "detail": name, "max_abs_error": error, "tolerance": bound})
        rows[-1]["passed"] = error <= bound
    return plain.result("image-feature-extraction", package, folder, rows)
