"""Model folders of other tasks than text generation, exported as the packages the
runtimes' own pipelines load, and checked against the MLX package that wrote them:

- ``feature-extraction``: mlx-embeddings folders (BERT, XLM-RoBERTa, ModernBERT),
  :mod:`.embeddings`;
- ``image-classification``: mlx-image weights folders, :mod:`.images`;
- ``automatic-speech-recognition``: mlx-whisper folders, :mod:`.whisper`, and mlx-audio
  Moonshine folders, :mod:`.moonshine` (both through :mod:`.seq2seq`);
- ``image-text-to-text``: mlx-vlm folders with their vision tower's weights (gemma3,
  idefics3 / SmolVLM), :mod:`.vision_language`.

Text generation (mlx-lm folders) is :mod:`mlx2onnx.llm`; :func:`folder_task` tells them
apart."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Callable

def folder_task(folder: str | os.PathLike) -> str:
    """The task of a model folder: ``image-classification`` for a folder of weights
    without config.json (mlx-image), ``automatic-speech-recognition`` for a config.json of
    Whisper's dimensions (mlx-whisper) or of Moonshine (mlx-audio), ``image-text-to-text``
    for an mlx-vlm folder that holds its vision tower's weights (one without them, as
    mlx-lm writes a VLM's text model, is text generation), ``feature-extraction`` for a
    config.json whose model_type is an mlx-embeddings encoder, else ``text-generation``
    (mlx-lm)."""
    from .embeddings import ENCODERS
    from .vision_language import VLM_TYPES
    from .whisper import is_whisper_config

    config = Path(folder) / "config.json"
    if not config.is_file():
        return "image-classification"
    try:
        settings = json.loads(config.read_text())
        model_type = str(settings.get("model_type", "")).replace("_", "-")
    except (ValueError, AttributeError):
        return "text-generation"  # mlx-lm's loader says what is wrong with it
    if is_whisper_config(settings) or model_type == "moonshine":
        return "automatic-speech-recognition"
    if model_type in VLM_TYPES and "vision_config" in settings and _has_vision_weights(Path(folder)):
        return "image-text-to-text"
    return "feature-extraction" if model_type in ENCODERS else "text-generation"


def export_folder(folder: str | os.PathLike, out: str | os.PathLike, *, overwrite: bool = False,
                  stage: Callable[[str], Any] = lambda text: contextlib.nullcontext(), exporter=None) -> Path:
    """Export the model folder ``folder`` as the package of its task (:func:`folder_task`)
    to the folder ``out``, written whole or not at all."""
    from ..exporter import Exporter
    from ..io.packages import check_package_path
    from ..llm.package import export_package

    folder, out = Path(folder), check_package_path(out, overwrite)
    task = folder_task(folder)
    if task == "text-generation":
        return export_package(folder, out, overwrite=overwrite, stage=stage, exporter=exporter)
    exporter = exporter or Exporter()
    if task == "feature-extraction":
        from .embeddings import export_embeddings

        return export_embeddings(folder, out, exporter, stage)
    if task == "image-text-to-text":
        from .vision_language import export_vision_language

        return export_vision_language(folder, out, exporter, stage)
    if task == "automatic-speech-recognition":
        from .moonshine import export_moonshine
        from .whisper import export_whisper

        export = export_moonshine if _model_type(folder) == "moonshine" else export_whisper
        return export(folder, out, exporter, stage)
    from .images import export_classifier

    return export_classifier(folder, out, exporter, stage)


def package_task(package: str | os.PathLike) -> str:
    """The task a package was exported for (config.json records it under ``mlx2onnx``;
    text-generation packages before that record are text generation)."""
    config = Path(package) / "config.json"
    recorded = json.loads(config.read_text()).get("mlx2onnx", {}) if config.is_file() else {}
    return recorded.get("task", "text-generation")


def check_folder_package(package: str | os.PathLike, folder: str | os.PathLike, **options) -> dict:
    """The check of the package's task: :func:`mlx2onnx.llm.check_package` (text
    generation, on :func:`~mlx2onnx.llm.check.check_prompts`),
    :func:`~.embeddings.check_embeddings`, :func:`~.images.check_classifier`,
    :func:`~.whisper.check_whisper` / :func:`~.moonshine.check_moonshine` or
    :func:`~.vision_language.check_vision_language`."""
    from ..targets import UsageError

    package, folder = Path(package), Path(folder)
    if not (package / "onnx").is_dir():
        raise UsageError(f"{package} is not a package: it has no onnx/ folder (write one with "
                         "`mlx2onnx export MODEL_FOLDER -o PACKAGE/`)")
    task, source = package_task(package), folder_task(folder)
    if task != source:
        raise UsageError(f"{package} is a {task} package but {folder} is a {source} folder: give the folder it "
                         "was exported from")
    if task == "text-generation":
        from ..llm.check import check_package, check_prompts

        return check_package(package, folder, check_prompts(package, options.pop("seed", 0)), **options)
    if task == "feature-extraction":
        from .embeddings import check_embeddings

        return check_embeddings(package, folder, **options)
    if task == "image-text-to-text":
        from .vision_language import check_vision_language

        return check_vision_language(package, folder, **options)
    if task == "automatic-speech-recognition":
        from .moonshine import check_moonshine
        from .whisper import check_whisper

        check = check_moonshine if _model_type(folder) == "moonshine" else check_whisper
        return check(package, folder, **options)
    from .images import check_classifier

    return check_classifier(package, folder, **options)


def _model_type(folder: Path) -> str:
    return str(json.loads((folder / "config.json").read_text()).get("model_type", ""))


def _has_vision_weights(folder: Path) -> bool:
    """Whether the folder's safetensors hold a vision tower (read from their headers)."""
    import struct

    for path in folder.glob("*.safetensors"):
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        if any(name.startswith(("vision_tower.", "vision_model.")) for name in header):
            return True
    return False
