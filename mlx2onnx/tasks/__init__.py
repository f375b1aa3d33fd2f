"""Model folders of other tasks than text generation, exported as the packages the
runtimes' own pipelines load, and checked against the MLX package that wrote them:

- ``feature-extraction``: mlx-embeddings folders (BERT, XLM-RoBERTa, ModernBERT and the
  decoder embedding models), :mod:`.embeddings`;
- ``zero-shot-image-classification`` (and both towers' embeddings): mlx-embeddings SigLIP
  folders, :mod:`.siglip`;
- ``image-classification``: mlx-image weights folders, :mod:`.images`;
- ``image-feature-extraction``: mlx-vlm DINOv2 folders, :mod:`.dinov2`;
- ``automatic-speech-recognition``: mlx-whisper folders, :mod:`.whisper`, mlx-audio's
  Whisper folders, :mod:`.whisper_audio`, and mlx-audio Moonshine folders,
  :mod:`.moonshine` (all through :mod:`.seq2seq`);
- ``image-text-to-text``: mlx-vlm folders with their vision tower's weights (gemma3,
  idefics3 / SmolVLM, the Qwen-VL family and GLM-OCR, the LLaVA family, Mistral 3 and
  Pixtral, PaliGemma, InternVL, Aya Vision: ``VISION_LANGUAGE`` below, one ``vlm_*``
  module each), :mod:`.vision_language`.

Text generation (mlx-lm folders, the fallback kind) is :mod:`mlx2onnx.llm`. Each kind is
registered below, once, in :mod:`.kinds`' registry, which tells them apart, with the
architectures it exports: the one place an architecture is named."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Callable

from . import (
    dinov2,
    embedding_encoders,
    embeddings,
    images,
    moonshine,
    siglip,
    vision_language,
    vlm_aya_vision,
    vlm_gemma3,
    vlm_glm_ocr,
    vlm_idefics3,
    vlm_internvl,
    vlm_llava,
    vlm_llava_bunny,
    vlm_llava_next,
    vlm_mistral3,
    vlm_paligemma,
    vlm_qwen2_5_vl,
    vlm_qwen2_vl,
    vlm_qwen3_vl,
    whisper,
    whisper_audio,
)
from .kinds import FolderKind, kind_named, named, recognise, register, spec_of

# -- the architectures: config.json's model_type -> what the kind's export is given for it --------------
EMBEDDINGS = {
    "bert": embedding_encoders.BERT,
    "xlm-roberta": embedding_encoders.BERT,
    "modernbert": embedding_encoders.MODERNBERT,
    "qwen3": embedding_encoders.LAST_TOKEN,  # Qwen3-Embedding
    "gemma3_text": embedding_encoders.DENSE_AFTER_MEAN,  # EmbeddingGemma
    "llama_bidirec": embedding_encoders.LLAMA_BIDIRECTIONAL,
    "lfm2": embedding_encoders.LATE_INTERACTION,  # LFM2-ColBERT
}
# mlxim model name prefix -> transformers.js model type (its image-classification class only runs
# the session: any type of the family's layout serves); mlx-image folders have no config.json
IMAGE_CLASSIFIERS = {
    "resnet": "resnet",
    "wide_resnet": "resnet",
    "vit": "vit",
    "swin_tiny": "swin",
    "swin_small": "swin",
    "swin_base": "swin",
    "efficientnet": "efficientnet",
    "mobilenet_v2": "mobilenet_v2",
    "mobilenet_v3": "mobilenet_v3",
}
WHISPER = {"whisper": None}
VISION_LANGUAGE = {
    "gemma3": vlm_gemma3.ARCHITECTURE,
    "idefics3": vlm_idefics3.ARCHITECTURE,
    "smolvlm": vlm_idefics3.ARCHITECTURE,
    "qwen2_vl": vlm_qwen2_vl.ARCHITECTURE,
    "qwen2_5_vl": vlm_qwen2_5_vl.ARCHITECTURE,
    "qwen3_vl": vlm_qwen3_vl.ARCHITECTURE,
    "qwen3_vl_moe": vlm_qwen3_vl.ARCHITECTURE,
    "glm_ocr": vlm_glm_ocr.ARCHITECTURE,
    "llava": vlm_llava.ARCHITECTURE,
    "llava_next": vlm_llava_next.ARCHITECTURE,
    "bunny-llama": vlm_llava_bunny.ARCHITECTURE,  # mlx-vlm's llava_bunny (Bunny), by its checkpoints' model types
    "llava-qwen2": vlm_llava_bunny.ARCHITECTURE,
    "internvl_chat": vlm_internvl.ARCHITECTURE,
    "aya_vision": vlm_aya_vision.ARCHITECTURE,
    "paligemma": vlm_paligemma.ARCHITECTURE,
    "mistral3": vlm_mistral3.ARCHITECTURE,
    "pixtral": vlm_mistral3.PIXTRAL,
}


def _has_vision_weights(folder: Path) -> bool:
    """Whether the folder's safetensors hold a vision tower (read from their headers; a
    file without one is the export's to refuse, :func:`~mlx2onnx.io.folders.check_model_folder`)."""
    from ..io.folders import safetensors_header

    for path in folder.glob("*.safetensors"):
        try:
            names = safetensors_header(path)[0]
        except ValueError:
            continue
        if any(name.startswith(("vision_tower.", "vision_model.")) for name in names):
            return True
    return False


def _export_text(folder: Path, out: Path, exporter, stage, **options) -> Path:
    from ..llm.package import export_package

    return export_package(folder, out, stage=stage, exporter=exporter, **options)


def _check_text(package: Path, folder: Path, **options) -> dict:
    from ..llm.check import check_package, check_prompts

    return check_package(package, folder, check_prompts(package, options.pop("seed", 0)), **options)


# -- the folder kinds: each MLX package's folders, as that package writes them -----------------------
register(
    FolderKind(
        "mlx-embeddings",
        "feature-extraction",
        embeddings.export_embeddings,
        embeddings.check_embeddings,
        recognises=lambda folder, config: embeddings.has_sentence_files(folder, spec_of(EMBEDDINGS, config)),
        tokenizer_for="transformers.js",
        architectures=EMBEDDINGS,
    )
)
register(
    FolderKind(
        "mlx-embeddings siglip",
        "zero-shot-image-classification",
        siglip.export_siglip,
        siglip.check_siglip,
        recognises=lambda folder, config: siglip.has_both_towers(config),
        tokenizer_for="transformers.js",
        architectures={"siglip": None},
    )
)
register(
    FolderKind(
        "mlx-vlm dinov2",
        "image-feature-extraction",
        dinov2.export_dinov2,
        dinov2.check_dinov2,
        recognises=lambda folder, config: "text_config" not in config,
        architectures={"dinov2": None, "dinov2_with_registers": None},  # an image encoder alone
    )
)
register(
    FolderKind(
        "mlx-image",
        "image-classification",
        images.export_classifier,
        images.check_classifier,
        recognises=lambda folder, config: (
            config is None and (any(folder.glob("*.safetensors")) or any(folder.glob("*.npz")))
        ),
        architectures=IMAGE_CLASSIFIERS,
        keyed=False,  # identified by its weights' names and shapes
    )
)
register(
    FolderKind(
        "mlx-whisper",
        "automatic-speech-recognition",
        whisper.export_whisper,
        whisper.check_whisper,
        recognises=lambda folder, config: (
            config is not None
            and whisper.is_whisper_config(config)
            and not whisper.is_mlx_audio_whisper(folder, config, named(WHISPER, config))
        ),
        architectures=WHISPER,
        keyed=False,  # a config of Whisper's dimensions, without model_type
    )
)
register(
    FolderKind(
        "mlx-audio whisper",
        "automatic-speech-recognition",
        whisper_audio.export_mlx_audio_whisper,
        whisper_audio.check_mlx_audio_whisper,
        recognises=lambda folder, config: (
            config is not None and whisper.is_mlx_audio_whisper(folder, config, named(WHISPER, config))
        ),
        architectures=WHISPER,
        keyed=False,  # Transformers' Whisper keys, or Whisper's dimensions beside model.safetensors
    )
)
register(
    FolderKind(
        "mlx-audio moonshine",
        "automatic-speech-recognition",
        moonshine.export_moonshine,
        moonshine.check_moonshine,
        recognises=lambda folder, config: True,
        architectures={"moonshine": None},
    )
)
register(
    FolderKind(
        "mlx-vlm",
        "image-text-to-text",
        vision_language.export_vision_language,
        vision_language.check_vision_language,
        # a VLM folder without its vision tower's weights, as mlx-lm writes a VLM's text model, is mlx-lm's
        recognises=lambda folder, config: "vision_config" in config and _has_vision_weights(folder),
        tokenizer_for="transformers.js and onnxruntime-genai",
        architectures=VISION_LANGUAGE,
    )
)
register(
    FolderKind(
        "mlx-lm",
        "text-generation",
        _export_text,
        _check_text,
        recognises=lambda folder, config: True,
        tokenizer_for="onnxruntime-genai and transformers.js",
    ),
    fallback=True,
)


def folder_kind(folder: str | os.PathLike) -> str:
    """The name of the kind of ``folder`` (:func:`~.kinds.recognise`)."""
    return recognise(Path(folder)).name


def architecture_of(folder: str | os.PathLike):
    """The spec the registry holds for ``folder``'s architecture (its kind's, by model_type)."""
    from .kinds import folder_config

    return recognise(Path(folder)).architecture(folder_config(Path(folder)))


def folder_task(folder: str | os.PathLike) -> str:
    """The task of a model folder's package (:func:`~.kinds.recognise`)."""
    return recognise(Path(folder)).task


def export_folder(
    folder: str | os.PathLike,
    out: str | os.PathLike,
    *,
    overwrite: bool = False,
    stage: Callable[[str], Any] = lambda text: contextlib.nullcontext(),
    exporter=None,
    revision: str | None = None,
    dtypes=(),
) -> Path:
    """Export the model folder ``folder`` (or the hub model ``ORG/NAME`` at ``revision``,
    from huggingface_hub's cache) as the package of its kind's task (:mod:`.kinds`) to the
    folder ``out``, written whole or not at all; ``dtypes``: a text-generation package's
    graph files beside the folder's own (:mod:`mlx2onnx.llm.dtype_files`)."""
    from ..errors import ExportOptionError, NotAModelFolderError
    from ..exporter import Exporter
    from ..io.folders import check_model_folder, check_tokenizer, hub_folder, is_hub_id
    from ..io.packages import check_folder_path

    if is_hub_id(folder):
        folder = hub_folder(str(folder), revision)
    folder, out = Path(folder), check_folder_path(out, overwrite, folder)
    if not folder.is_dir():
        raise NotAModelFolderError(f"no such model folder: {str(folder)!r}")
    check_model_folder(folder)
    kind = recognise(folder)
    if kind.tokenizer_for:
        check_tokenizer(folder, kind.tokenizer_for, graph_alone=kind.task == "text-generation")
    if kind.task == "text-generation":
        return kind.export(folder, out, exporter, stage, overwrite=overwrite, dtypes=dtypes)
    if dtypes:
        raise ExportOptionError(
            f"{folder} is a {kind.task} folder: its package holds the folder's own graphs "
            "alone; other dtype files are written for text-generation packages"
        )
    return kind.export_package(folder, out, exporter or Exporter(), stage)


def package_task(package: str | os.PathLike) -> str:
    """The task a package was exported for (its notes, :mod:`mlx2onnx.io.notes`; a
    text-generation package records none)."""
    from ..io.notes import read_notes

    return read_notes(package).task


def check_folder_package(package: str | os.PathLike, folder: str | os.PathLike, **options) -> dict:
    """The check of the package's task against the folder it was exported from, by the
    folder's kind (:mod:`.kinds`; text generation on :func:`~mlx2onnx.llm.check.check_prompts`)."""
    from ..errors import UsageError

    package, folder = Path(package), Path(folder)
    if not (package / "onnx").is_dir():
        raise UsageError(
            f"{package} is not a package: it has no onnx/ folder (write one with "
            "`mlx2onnx export MODEL_FOLDER -o PACKAGE/`)"
        )
    kind = recognise(folder)
    task = package_task(package)
    if task != kind.task:
        raise UsageError(
            f"{package} is a {task} package but {folder} is a {kind.task} folder: give the folder it was exported from"
        )
    return kind.check_package(package, folder, **options)


__all__ = [
    "FolderKind",
    "architecture_of",
    "check_folder_package",
    "export_folder",
    "folder_kind",
    "folder_task",
    "kind_named",
    "package_task",
]
