"""What one mlx-vlm architecture's image-text-to-text package needs
(:mod:`.vision_language`): its modules :mod:`.vlm_gemma3` and :mod:`.vlm_idefics3` each
give one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Architecture:
    """What one mlx-vlm architecture's package needs."""

    processor: str  # transformers.js's processor class prefix (its files name it)
    embeddings: Callable  # model -> its token embedding module
    vision: Callable  # (model, dtype) -> f(**pixel inputs) -> image features
    vision_inputs: Callable  # (model, batch, rng) -> {name: float32/bool array}: the processor's pixel inputs
    vision_axes: dict  # their dynamic axes
    text: Callable  # model -> f(input_ids) -> the text embeddings mlx-vlm merges into
    mlx_embeddings: Callable  # (model, input_ids, pixel inputs) -> mlx-vlm's merged embeddings
    processor_configs: Callable  # model -> {file: content} for transformers.js's processor
    genai: Callable | None  # (model, folder, layout, exporter) -> (graphs, files, reason) or None
    image_tokens: Callable  # model -> the image tokens one image takes in the prompt
