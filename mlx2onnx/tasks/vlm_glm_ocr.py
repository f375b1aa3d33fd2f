"""mlx-vlm's glm_ocr (GLM-OCR) as an image-text-to-text package (:mod:`.vision_language`),
over the Qwen-VL package (:mod:`.vlm_qwen2_vl`): the processor cuts the image into the
same patches in merge-window order with the same grid, and the language model takes mRoPE
positions [3, batch, sequence], which transformers.js's GlmOcr model computes as mlx-vlm
does (image tokens grouped by the image token; after an image, the position moves on by
its longer side in merged patches).

GLM-OCR's tower differs: each block normalises the query and key heads (RMSNorm) and
rotates them in float32 by angles of the patch's row and column (the same float32
products as mlx-vlm's table); after the blocks, a norm, a convolution over each merge
window of m x m patches, and the merger. Attention is kept to a patch's own image and
frame by a mask (mlx-vlm's per-segment attention, the same sums). transformers.js's
Glm46V processor expands ``<|image|>``; onnxruntime-genai has no glm_ocr type.
"""

from __future__ import annotations

import importlib

import mlx.core as mx

from .vlm_qwen2_vl import _merge, _same, patch_places, qwen_architecture, rotary_frequencies


def _attend(tower, attention, x: mx.array, cos: mx.array, sin: mx.array, mask: mx.array) -> mx.array:
    """GLM-OCR's vision attention over all patches, kept to ``mask``."""
    rotate = importlib.import_module(type(tower).__module__).apply_rotary_pos_emb_vision
    n = x.shape[0]
    qkv = attention.qkv(x).reshape(n, 3, attention.num_heads, -1).transpose(1, 0, 2, 3)
    q, k, v = (a.squeeze(0) for a in mx.split(qkv, 3, axis=0))
    q, k = rotate(attention.q_norm(q), attention.k_norm(k), cos, sin)
    q, k, v = (a.transpose(1, 0, 2)[None] for a in (q, k, v))
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=attention.scale, mask=mask)
    return attention.proj(out.transpose(0, 2, 1, 3).reshape(n, -1))


def encode_function(model, dtype):
    """``f(pixel_values [N, D], grid_thw [images, 3]) -> image features [N/m**2, hidden]``,
    as mlx-vlm's GLM-OCR tower computes them for those images (the patches' places from
    the grid, :func:`.vlm_qwen2_vl.patch_places`)."""
    tower, m = model.vision_tower, _merge(model)

    def encode(pixel_values, grid_thw):
        image, frame, row, column = patch_places(grid_thw, pixel_values.shape[0], m)
        hidden = tower.patch_embed(pixel_values.astype(tower.patch_embed.proj.weight.dtype))
        angles = rotary_frequencies(tower.rotary_pos_emb, row, column)
        angles = mx.concatenate([angles, angles], axis=-1)
        cos, sin = mx.cos(angles), mx.sin(angles)
        segment = _same(image) & _same(frame)
        for block in tower.blocks:
            hidden = hidden + _attend(tower, block.attn, block.norm1(hidden), cos, sin, segment)
            hidden = hidden + block.mlp(block.norm2(hidden))
        hidden = tower.post_layernorm(hidden)
        windows = tower.downsample(hidden.reshape(-1, m, m, hidden.shape[-1]))
        return tower.merger(windows.reshape(-1, tower.config.out_hidden_size))

    return encode


ARCHITECTURE = qwen_architecture(
    "Glm46VProcessor",
    "image_grid_thw",
    check_grid=8,
    genai_type=None,
    image_processor="Glm46VImageProcessor",
    encode=encode_function,
)
