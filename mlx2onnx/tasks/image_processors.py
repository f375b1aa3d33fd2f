"""The image processor options a package writes in ``preprocessor_config.json``, as
transformers.js's image processors read them: the normalisations the MLX packages' models
were trained with, SigLIP's resize-only processor and the resize-and-centre-crop
processors (BiT, CLIP), and the folder's own file where it has one."""

from __future__ import annotations

import json
from pathlib import Path

RESAMPLE = {"nearest": 0, "bilinear": 2, "bicubic": 3}  # PIL's codes, which transformers.js reads
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def rescaled_settings(mean, std) -> dict:
    """1/255, then ``mean`` and ``std``, from RGB."""
    return {
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": list(mean),
        "image_std": list(std),
        "do_convert_rgb": True,
    }


def siglip_image_settings(size: int, processor_type: str = "SiglipImageProcessor") -> dict:
    """SigLIP's image processor: resize to ``size`` square (bilinear), 1/255, mean and std 0.5."""
    return {
        "image_processor_type": processor_type,
        "do_resize": True,
        "size": {"height": size, "width": size},
        "resample": RESAMPLE["bilinear"],
        **rescaled_settings([0.5] * 3, [0.5] * 3),
    }


def centre_crop_settings(processor_type: str, size: dict, crop: int, mean, std, resample: int) -> dict:
    """A resize-then-centre-crop processor (BiT's, CLIP's): resize to ``size`` (transformers'
    ``{"height", "width"}`` or ``{"shortest_edge"}``), crop ``crop`` square, 1/255, ``mean``
    and ``std``."""
    return {
        "image_processor_type": processor_type,
        "do_resize": True,
        "size": size,
        "resample": resample,
        "do_center_crop": True,
        "crop_size": {"height": crop, "width": crop},
        **rescaled_settings(mean, std),
    }


def square_settings(processor_type: str, size: int, mean, std, resample: int) -> dict:
    """A processor resizing to ``size`` square (no crop), 1/255, ``mean`` and ``std``."""
    return {
        "image_processor_type": processor_type,
        "do_resize": True,
        "size": {"height": size, "width": size},
        "resample": resample,
        "do_center_crop": False,
        **rescaled_settings(mean, std),
    }


def folder_processor(folder: Path | None, default: dict) -> dict:
    """The folder's preprocessor_config.json (its converter copies the repository's), else ``default``."""
    path = None if folder is None else folder / "preprocessor_config.json"
    return json.loads(path.read_text()) if path is not None and path.is_file() else default
