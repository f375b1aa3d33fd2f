"""mlx-vlm's qwen2_5_vl as an image-text-to-text package (:mod:`.vision_language`): the
Qwen2-VL package (:mod:`.vlm_qwen2_vl`: the patches viewed from the grid, mRoPE
positions) with Qwen2.5-VL's tower.

The tower attends within windows of ``window_size`` pixels in its blocks other than
``fullatt_block_indexes``. mlx-vlm reorders the merge windows window by window from the
grid with Python numbers, attends within each window's run, and orders the features back.
Attention within a window does not depend on the order of its tokens, so the traced tower
keeps the patches in their order and gives those blocks a mask that lets a patch see the
patches of its own window (the window of merge window (r, c) is (r // k, c // k), ``k =
window_size / patch_size / merge_size``; the windows at the right and bottom edges are
partial, as mlx-vlm's padded ones): the same sums, read from the grid's dynamic dims.
transformers.js's Qwen2.5-VL model feeds the grid as ``image_grid_thw``, and reads the text
settings from ``config.json``'s ``text_config``, which the package writes where the folder's
config keeps them at the top (as Qwen2.5-VL's does). onnxruntime-genai's qwen2_5_vl type runs
its own staged vision pipeline (patch embedding, windowed attention and merger as separate
models, the window order computed outside them), which this package does not write: declared.
"""

from __future__ import annotations

import mlx.core as mx

from .vlm_qwen2_vl import qwen_architecture, rotary_frequencies


def encode_function(model, dtype):
    """``pixel_windows`` [h/m, w/m, m*m, D] -> image features [h*w/m**2, hidden], as
    mlx-vlm's Qwen2.5-VL tower computes them for one image, its windows as attention masks."""
    from mlx_vlm.models.qwen2_5_vl.vision import apply_rotary_pos_emb_vision

    tower = model.vision_tower
    m, k = tower.spatial_merge_size, tower.window_size // tower.spatial_merge_size // tower.patch_size

    def attend(attention, x, freqs, mask):
        n = x.shape[0]
        qkv = attention.qkv(x).reshape(n, 3, attention.num_heads, -1).transpose(1, 0, 2, 3)
        q, key, v = mx.split(qkv, 3)
        q = apply_rotary_pos_emb_vision(mx.expand_dims(q, 0), freqs)[0]
        key = apply_rotary_pos_emb_vision(mx.expand_dims(key, 0), freqs)[0]
        q, key, v = (a.transpose(0, 2, 1, 3) for a in (q, key, v))
        out = mx.fast.scaled_dot_product_attention(q, key, v, scale=attention.scale, mask=mask)
        return attention.proj(out.transpose(0, 2, 1, 3).reshape(n, -1))

    def encode(pixel_windows):
        rows, columns, window, width = pixel_windows.shape
        hidden = tower.patch_embed(pixel_windows.reshape(-1, width).astype(tower.patch_embed.proj.weight.dtype))
        freqs = rotary_frequencies(tower.rotary_pos_emb, rows, columns, m)
        shape = (rows, columns, window)
        row = mx.broadcast_to((mx.arange(rows) // k)[:, None, None], shape).reshape(-1)  # each patch's window row
        column = mx.broadcast_to((mx.arange(columns) // k)[None, :, None], shape).reshape(-1)
        same_window = (row[:, None] == row[None, :]) & (column[:, None] == column[None, :])
        for index, block in enumerate(tower.blocks):
            mask = None if index in tower.fullatt_block_indexes else same_window
            hidden = hidden + attend(block.attn, block.norm1(hidden), freqs, mask)
            hidden = hidden + block.mlp(block.norm2(hidden))
        return tower.merger(hidden)
    return encode


def package_config(config: dict) -> dict:
    """config.json as transformers.js reads Qwen2.5-VL's: the text settings in ``text_config``
    of model_type ``qwen2_5_vl_text`` (the folder's, or those at its top)."""
    text = config.get("text_config") or {k: v for k, v in config.items() if k != "vision_config"}
    return dict(config, text_config=dict(text, model_type="qwen2_5_vl_text"))


def genai_reason(model, folder, layout, exporter):
    return {}, {}, ("onnxruntime-genai's qwen2_5_vl type runs its own staged vision pipeline (patch embedding, "
                    "windowed attention and merger as separate models, the window order computed outside them), "
                    "which this package does not write")


ARCHITECTURE = qwen_architecture("Qwen2_5_VLProcessor", "image_grid_thw", encode_function, check_grid=16,
                                 package_config=package_config, genai=genai_reason)
