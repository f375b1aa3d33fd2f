"""Model folders of other tasks than text generation, exported as the packages the
runtimes' own pipelines load, and checked against the MLX package that wrote them:

- ``feature-extraction``: mlx-embeddings folders (BERT, XLM-RoBERTa, ModernBERT),
  :mod:`.embeddings`;
- ``image-classification``: mlx-image weights folders, :mod:`.images`;
- ``automatic-speech-recognition``: mlx-whisper folders, :mod:`.whisper`, mlx-audio's
  Whisper folders, :mod:`.whisper_audio`, and mlx-audio Moonshine folders,
  :mod:`.moonshine` (all through :mod:`.seq2seq`);
- ``image-text-to-text``: mlx-vlm folders with their vision tower's weights (gemma3,
  idefics3 / SmolVLM, qwen2_vl, qwen2_5_vl), :mod:`.vision_language`.

Text generation (mlx-lm folders) is :mod:`mlx2onnx.llm`; :func:`folder_kind` tells them
apart."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
from pathlib import Path
from typing import Any, Callable

# folder kind -> (task, module under mlx2onnx.tasks, its export function, its check function)
KINDS = {
    "mlx-lm": ("text-generation", None, None, None),
    "mlx-embeddings": ("feature-extraction", "embeddings", "export_embeddings", "check_embeddings"),
    "mlx-image": ("image-classification", "images", "export_classifier", "check_classifier"),
    "mlx-whisper": ("automatic-speech-recognition", "whisper", "export_whisper", "check_whisper"),
    "mlx-audio whisper": ("automatic-speech-recognition", "whisper_audio", "export_mlx_audio_whisper",
                          "check_mlx_audio_whisper"),
    "mlx-audio moonshine": ("automatic-speech-recognition", "moonshine", "export_moonshine", "check_moonshine"),
    "mlx-vlm": ("image-text-to-text", "vision_language", "export_vision_language", "check_vision_language"),
}

# folder kinds whose package's runtimes read the folder's tokenizer -> those runtimes
TOKENIZED = {"mlx-lm": "onnxruntime-genai and transformers.js", "mlx-embeddings": "transformers.js",
             "mlx-vlm": "transformers.js and onnxruntime-genai"}


def folder_kind(folder: str | os.PathLike) -> str:
    """Which MLX package wrote the folder (a key of :data:`KINDS`): mlx-image for weights
    without config.json, mlx-audio's Whisper for Whisper's Transformers config or
    model.safetensors, mlx-whisper for a config.json of Whisper's
    dimensions, mlx-audio for Moonshine, mlx-vlm for a VLM folder that holds its vision tower's weights (one
    without them, as mlx-lm writes a VLM's text model, is mlx-lm's), mlx-embeddings for
    its encoders' model types, else mlx-lm."""
    from .embeddings import ENCODERS
    from .vision_language import VLM_TYPES
    from .whisper import is_mlx_audio_whisper, is_whisper_config

    config = Path(folder) / "config.json"
    if not config.is_file():
        return "mlx-image"
    try:
        settings = json.loads(config.read_text())
        model_type = str(settings.get("model_type", ""))
    except (ValueError, AttributeError):
        return "mlx-lm"  # mlx-lm's loader says what is wrong with it
    if is_mlx_audio_whisper(Path(folder), settings):
        return "mlx-audio whisper"
    if is_whisper_config(settings):
        return "mlx-whisper"
    if model_type == "moonshine":
        return "mlx-audio moonshine"
    if model_type in VLM_TYPES and "vision_config" in settings and _has_vision_weights(Path(folder)):
        return "mlx-vlm"
    return "mlx-embeddings" if model_type.replace("_", "-") in ENCODERS else "mlx-lm"


def folder_task(folder: str | os.PathLike) -> str:
    """The task of a model folder's package (:func:`folder_kind`)."""
    return KINDS[folder_kind(folder)][0]


def _function(kind: str, which: int) -> Callable:
    _, module, export, check = KINDS[kind]
    return getattr(importlib.import_module(f"{__name__}.{module}"), (export, check)[which])


def export_folder(folder: str | os.PathLike, out: str | os.PathLike, *, overwrite: bool = False,
                  stage: Callable[[str], Any] = lambda text: contextlib.nullcontext(), exporter=None,
                  revision: str | None = None, dtypes=("fp32",)) -> Path:
    """Export the model folder ``folder`` (or the hub model ``ORG/NAME`` at ``revision``,
    from huggingface_hub's cache) as the package of its task (:func:`folder_kind`) to the
    folder ``out``, written whole or not at all; ``dtypes``: a text-generation package's
    graph files (:mod:`mlx2onnx.llm.dtype_files`)."""
    from ..exporter import Exporter
    from ..io.folders import check_model_folder, check_tokenizer, hub_folder, is_hub_id
    from ..io.packages import check_folder_path
    from ..llm.package import export_package
    from ..targets import UsageError

    if is_hub_id(folder):
        folder = hub_folder(str(folder), revision)
    folder, out = Path(folder), check_folder_path(out, overwrite, folder)
    if not folder.is_dir():
        raise UsageError(f"no such model folder: {str(folder)!r}")
    check_model_folder(folder)
    kind = folder_kind(folder)
    if kind in TOKENIZED:
        check_tokenizer(folder, TOKENIZED[kind], graph_alone=kind == "mlx-lm")
    if kind == "mlx-lm":
        return export_package(folder, out, overwrite=overwrite, stage=stage, exporter=exporter, dtypes=dtypes)
    if set(dtypes) != {"fp32"}:
        from ..errors import ExportOptionError

        raise ExportOptionError(f"{folder} is a {KINDS[kind][0]} folder: its package holds the fp32 graphs (the "
                                "folder's own computation) alone; other dtype files are written for text-generation "
                                "packages")
    return _function(kind, 0)(folder, out, exporter or Exporter(), stage)


def package_task(package: str | os.PathLike) -> str:
    """The task a package was exported for (config.json records it under ``mlx2onnx``;
    text-generation packages before that record are text generation)."""
    config = Path(package) / "config.json"
    recorded = json.loads(config.read_text()).get("mlx2onnx", {}) if config.is_file() else {}
    return recorded.get("task", "text-generation")


def check_folder_package(package: str | os.PathLike, folder: str | os.PathLike, **options) -> dict:
    """The check of the package's task against the folder it was exported from:
    :func:`mlx2onnx.llm.check_package` for text generation (on
    :func:`~mlx2onnx.llm.check.check_prompts`), else the check function of the folder's
    kind (:data:`KINDS`)."""
    from ..targets import UsageError

    package, folder = Path(package), Path(folder)
    if not (package / "onnx").is_dir():
        raise UsageError(f"{package} is not a package: it has no onnx/ folder (write one with "
                         "`mlx2onnx export MODEL_FOLDER -o PACKAGE/`)")
    kind = folder_kind(folder)
    task, source = package_task(package), KINDS[kind][0]
    if task != source:
        raise UsageError(f"{package} is a {task} package but {folder} is a {source} folder: give the folder it "
                         "was exported from")
    if kind == "mlx-lm":
        from ..llm.check import check_package, check_prompts

        return check_package(package, folder, check_prompts(package, options.pop("seed", 0)), **options)
    return _function(kind, 1)(package, folder, **options)


def _has_vision_weights(folder: Path) -> bool:
    """Whether the folder's safetensors hold a vision tower (read from their headers)."""
    import struct

    for path in folder.glob("*.safetensors"):
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        if any(name.startswith(("vision_tower.", "vision_model.")) for name in header):
            return True
    return False
