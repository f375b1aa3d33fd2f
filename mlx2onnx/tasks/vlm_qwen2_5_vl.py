"""mlx-vlm's qwen2_5_vl as an image-text-to-text package (:mod:`.vision_language`): the
Qwen2-VL package (:mod:`.vlm_qwen2_vl`: the patches' places computed from the grid in the
graph, mRoPE positions) with Qwen2.5-VL's tower, whose blocks other than
``fullatt_block_indexes`` attend within windows of ``window_size`` pixels. mlx-vlm reorders
the merge windows window by window with Python numbers, attends within each window's run and
orders the features back; the traced tower keeps the patches in order and masks attention
to a patch's own window (:func:`.vlm_qwen2_vl.encode_function`; partial windows at the right
and bottom edges as mlx-vlm's padded ones). transformers.js's Qwen2.5-VL model feeds the grid
as ``image_grid_thw`` and reads the text settings from ``config.json``'s ``text_config``,
which the package writes where the folder keeps them at the top; onnxruntime-genai runs it
as its qwen2_5_vl type over the whole vision encoder (:func:`.vlm_qwen2_vl.genai_files`).
"""

from __future__ import annotations

from .vlm_architecture import text_config_of
from .vlm_qwen2_vl import qwen_architecture


def package_config(config: dict) -> dict:
    """config.json as transformers.js reads Qwen2.5-VL's: the text settings in ``text_config``
    of model_type ``qwen2_5_vl_text`` (the folder's, or those at its top)."""
    text = text_config_of(config)
    return dict(config, text_config=dict(text, model_type="qwen2_5_vl_text"))


ARCHITECTURE = qwen_architecture("Qwen2_5_VLProcessor", "image_grid_thw", check_grid=16, package_config=package_config)
