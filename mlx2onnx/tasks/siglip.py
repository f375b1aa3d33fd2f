"""Image and text embeddings: an mlx-embeddings SigLIP folder -> a transformers.js package
for ``zero-shot-image-classification``, text embeddings and ``image-feature-extraction``,
and its check.

The package holds three graphs, as transformers.js's SigLIP classes load them:

- ``onnx/model.onnx`` (``SiglipModel``, which the zero-shot pipeline opens): ``input_ids``
  int64 [text_batch_size, max_position_embeddings] and ``pixel_values`` float32
  [batch_size, 3, image_size, image_size] -> ``logits_per_image`` [batch_size,
  text_batch_size], ``logits_per_text``, ``text_embeds`` and ``image_embeds`` (normalised):
  mlx-embeddings' ``Model`` output;
- ``onnx/text_model.onnx`` (``SiglipTextModel``): ``input_ids`` -> ``last_hidden_state``,
  ``pooler_output`` (mlx-embeddings' ``get_text_features``);
- ``onnx/vision_model.onnx`` (``SiglipVisionModel``, the ``image-feature-extraction``
  pipeline's class; ``{pool: true}`` reads ``pooler_output``, ``get_image_features``).

Texts are as long as the model's positions: SigLIP's tokenizer pads to its maximum length
(the pipeline asks for ``max_length`` padding), and the model reads the last position.
``preprocessor_config.json`` is the folder's (SigLIP's image processor: resize to the image
size, rescale, mean and std 0.5), or that processor's defaults at the folder's image size.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UsageError
from ..io.notes import PackageNotes, noted
from .image_processors import folder_processor, siglip_image_settings
from .loading import folder_json, load_with

LOGITS = ("logits_per_image", "logits_per_text", "text_embeds", "image_embeds")
TOWER = ("last_hidden_state", "pooler_output")


def has_both_towers(config: dict) -> bool:
    """Whether the config (of a SigLIP model_type) has both towers' settings, as mlx-embeddings' SigLIP folders do."""
    return {"text_config", "vision_config"} <= set(config)


def load_siglip_folder(folder: Path):
    """(model, config) as mlx-embeddings' ``load_model`` builds them. Its ``load`` reads the
    image and patch sizes from the repository's name (``...-patch16-224``); the name given
    here is the one that says the sizes config.json says, so any folder path loads."""
    config = json.loads((folder / "config.json").read_text())
    vision = config["vision_config"]
    if config.get("num_labels", 0):
        raise UsageError(
            f"{folder} is a SigLIP image classifier (num_labels {config['num_labels']}): the export "
            "handles SigLIP's image and text towers (zero-shot image classification, embeddings)"
        )
    name = f"siglip-patch{vision.get('patch_size', 16)}-{vision.get('image_size', 224)}"
    # its converter records skip_vision in vision_config, which its VisionConfig does not take
    # (a 4-bit folder it writes fails in its own loader): given without it, the vision
    # weights stay float as written (a layer is quantized only where its scales are saved)
    settings = {"vision_config": {k: v for k, v in vision.items() if k != "skip_vision"}}
    model = load_with(
        folder,
        "mlx-embeddings",
        "mlx_embeddings.utils",
        "load_model",
        lambda load_model: load_model(folder, model_config=settings, path_to_repo=name),
        usage=(ValueError, FileNotFoundError),
    )
    return model, config


def _logits(model, input_ids, pixel_values):
    out = model(input_ids=input_ids, pixel_values=pixel_values)
    return out.logits_per_image, out.logits_per_text, out.text_embeds, out.image_embeds


def _text_tower(model, input_ids):
    return model.text_model(input_ids)


def _vision_tower(model, pixel_values):
    # mlx-embeddings' convolution reads channels last; the runtimes' processors give channels first
    return model.vision_model(pixel_values.transpose(0, 2, 3, 1).astype(_pixels_dtype(model)))


def _pixels_dtype(model):
    return model.vision_model.vision_model.embeddings.patch_embedding.weight.dtype


def graph_specs() -> dict:
    """{package file: (function, inputs, outputs, dynamic axes)} of the three graphs."""
    texts = {"input_ids": {0: "text_batch_size"}}
    images = {"pixel_values": {0: "batch_size"}}
    return {
        "onnx/model.onnx": (_logits, ("input_ids", "pixel_values"), LOGITS, {**texts, **images}),
        "onnx/text_model.onnx": (_text_tower, ("input_ids",), TOWER, {"input_ids": {0: "batch_size"}}),
        "onnx/vision_model.onnx": (_vision_tower, ("pixel_values",), TOWER, images),
    }


def example_inputs(config: dict, seed: int = 0) -> dict[str, np.ndarray]:
    """Token ids of three texts at the model's length and two images (channels first)."""
    rng = np.random.default_rng(seed)
    text, vision = config["text_config"], config["vision_config"]
    size = vision.get("image_size", 224)
    return {
        "input_ids": rng.integers(0, text.get("vocab_size", 2), (3, text.get("max_position_embeddings", 64))),
        "pixel_values": rng.uniform(-1, 1, (2, vision.get("num_channels", 3), size, size)).astype(np.float32),
    }


def export_siglip(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the SigLIP package of ``folder`` (see module) to ``out``, whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with mlx-embeddings"):
        model, config = load_siglip_folder(folder)
    examples = {name: mx.array(value) for name, value in example_inputs(config).items()}
    graphs = {}
    for file, (function, inputs, outputs, dynamic) in graph_specs().items():
        with stage(f"tracing and translating {file}"):
            options = exporter.with_options(
                input_names=list(inputs), output_names=list(outputs), path=None, dynamic=dynamic
            )
            graphs[file] = options.to_ir(functools.partial(function, model), *(examples[n] for n in inputs))
    notes = PackageNotes(task="zero-shot-image-classification")
    default = siglip_image_settings(config["vision_config"].get("image_size", 224))
    length = config["text_config"].get("max_position_embeddings", 64)
    files = {"config.json": noted(config, notes), "preprocessor_config.json": folder_processor(folder, default)}
    tokenizer = folder_json(folder, "tokenizer_config.json", model_max_length=length)
    if tokenizer is not None:  # the pipeline pads to the tokenizer's length: the model's
        files["tokenizer_config.json"] = tokenizer
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, graphs, exporter.check)
        copy_present(folder, package, TOKENIZER_FILES)
        write_json_files(package, files, dtypes)
    return out


def check_siglip(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """Each graph of the package in a plain onnxruntime session on fresh token ids and
    pixels against mlx-embeddings' model on the same inputs, output by output."""
    from ..io.graph_files import graph_path
    from ..verify.plain import plain_session, reference

    model, config = load_siglip_folder(folder)
    feeds = example_inputs(config, seed + 1)
    rows, plain = [], None
    for file, (function, inputs, outputs, _) in graph_specs().items():
        plain = plain_session(graph_path(package, file), atol, rtol)
        got = plain.session.run(list(outputs), {name: feeds[name] for name in inputs})
        want = function(model, *(mx.array(feeds[name]) for name in inputs))
        for name, row_got, row_want in zip(outputs, got, want):
            row_want, held = reference(row_want)
            error, bound = plain.compare(row_got, row_want, held)
            rows.append(
                {"input": file, "detail": name, "max_abs_error": error, "tolerance": bound, "passed": error <= bound}
            )
    return plain.result("zero-shot-image-classification", package, folder, rows)
