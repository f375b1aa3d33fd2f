"""mlx-vlm's qwen3_vl (and qwen3_vl_moe: the same tower, a mixture-of-experts text model) as an image-text-to-text package (:mod:`.vision_language`): the
Qwen2-VL package (:mod:`.vlm_qwen2_vl`: the patches' places computed from the grid in the
graph, mRoPE positions, one graph for every image size) with Qwen3-VL's tower and its
DeepStack features.

The tower adds to each patch a position embedding interpolated from a learned square grid
at the image's own size (mlx-vlm's ``fast_pos_embed_interpolate``: ``linspace`` over the
grid, the four neighbours weighted bilinearly), computed here per patch from its row and
column and its image's height and width, with the same float32 arithmetic. The states
after the blocks of ``deepstack_visual_indexes`` go through their own mergers, and mlx-vlm
adds them to the hidden states of the image tokens after the first text layers.

transformers.js and onnxruntime-genai merge one feature row into each image token's
embedding and pass nothing else to the decoder. So the package's embeddings are wider than
the hidden size: ``[embedding | DeepStack 1 | ... | DeepStack k | image flag]``; the token
embedding gives zeros and flag 0 beside a token's embedding, the vision encoder gives each
image token its features, its k DeepStack rows and flag 1. The decoder takes the first
``hidden_size`` columns as the layers' input and, after layer i < k, adds DeepStack i where
the flag is set (mlx-vlm's addition at the image positions; the others untouched). Both
runtimes' merges and caches are unchanged: genai's ``decoder.hidden_size`` is the width.
"""

from __future__ import annotations

import mlx.core as mx

from .vlm_architecture import text_config_of
from .vlm_qwen2_vl import _merge, _same, block_step, embeddings, patch_places, qwen_architecture, rotary_frequencies

MEAN = STD = (0.5, 0.5, 0.5)  # Qwen3-VL's processor normalisation


def _deepstack_count(model) -> int:
    return len(model.vision_tower.deepstack_visual_indexes)


def position_embeddings(tower, height: mx.array, width: mx.array, row: mx.array, column: mx.array) -> mx.array:
    """Each patch's position embedding [N, hidden]: the learned grid's rows bilinearly
    interpolated at ``linspace(0, side - 1, height)[row]`` and ``linspace(0, side - 1,
    width)[column]`` (each patch's image's height and width in patches), as mlx-vlm's
    ``fast_pos_embed_interpolate`` computes them (its ``linspace``: ``i / (n - 1) * (side -
    1)``; floors by truncation; weights in float32, then the embedding's dtype)."""
    side = tower.num_grid_per_side

    def places(index, count):
        at = index.astype(mx.float32) / (count - 1).astype(mx.float32) * float(side - 1)
        floor = at.astype(mx.int32)
        return floor, mx.minimum(floor + 1, side - 1), at - floor.astype(mx.float32)

    h_floor, h_ceil, dh = places(row, height)
    w_floor, w_ceil, dw = places(column, width)
    corners = [
        (h_floor * side + w_floor, (1 - dh) * (1 - dw)),
        (h_floor * side + w_ceil, (1 - dh) * dw),
        (h_ceil * side + w_floor, dh * (1 - dw)),
        (h_ceil * side + w_ceil, dh * dw),
    ]
    total = None
    for index, weight in corners:
        rows = tower.pos_embed(index)
        term = rows * weight.astype(rows.dtype)[:, None]
        total = term if total is None else total + term
    return total


def encode_function(model, dtype):
    """``f(pixel_values [N, D], grid_thw [images, 3]) -> image features [N/m**2, W]``:
    Qwen3-VL's tower as mlx-vlm runs it (its position embeddings at each image's size,
    attention kept to a patch's own image and frame), each image token's row
    ``[features | DeepStack features | 1]`` in the embeddings' dtype."""
    tower, m = model.vision_tower, _merge(model)
    stacks = tower.deepstack_visual_indexes

    def encode(pixel_values, grid_thw):
        image, frame, row, column = patch_places(grid_thw, pixel_values.shape[0], m)
        hidden = tower.patch_embed(pixel_values.astype(tower.patch_embed.proj.weight.dtype))
        hidden = hidden + position_embeddings(tower, grid_thw[image, 1], grid_thw[image, 2], row, column)
        freqs = rotary_frequencies(tower.rotary_pos_emb, row, column)
        segment = _same(image) & _same(frame)
        deep = []
        for index, block in enumerate(tower.blocks):
            hidden = block_step(tower, block, hidden, freqs, segment)
            if index in stacks:
                deep.append(tower.deepstack_merger_list[stacks.index(index)](hidden))
        features = tower.merger(hidden)
        flag = mx.ones((features.shape[0], 1), features.dtype)
        return mx.concatenate([features, *deep, flag], axis=-1).astype(dtype)

    return encode


def text_function(model):
    """``f(input_ids) -> [embedding | zeros for the DeepStack features | flag 0]``."""
    embed = embeddings(model)
    extra = _deepstack_count(model) * model.config.text_config.hidden_size + 1

    def embed_tokens(input_ids):
        rows = embed(input_ids)
        return mx.concatenate([rows, mx.zeros((*input_ids.shape, extra), rows.dtype)], axis=-1)

    return embed_tokens


class _PastLength:
    """A package cache read by a layer whose ``offset`` is its past's length, a number of
    the trace: mlx-vlm's Qwen3-VL-MoE attention turns the offset into a Python number to
    cut its mask to ``offset + 1 + new`` keys (a cut that keeps every key), where the
    package's per-row offset array cannot be one. The positions come from position_ids,
    so nothing else reads the offset."""

    def __init__(self, cache):
        self._cache = cache

    def __getattr__(self, name):
        return getattr(self._cache, name)

    @property
    def offset(self):
        offset = self._cache.offset
        return offset if isinstance(offset, int) else self._cache.keys.shape[2]


def language(model):
    """``f(inputs_embeds, cache, position_ids) -> logits``: mlx-vlm's language model given
    the positions, the DeepStack features (and the image flag) read from the wide
    embeddings and added after the first layers where the flag is set. Embeddings of the
    hidden size alone (the cache probes' tokens) carry none."""
    language_model, hidden = model.language_model, model.config.text_config.hidden_size
    count = _deepstack_count(model)

    def added(states, flag, features):  # mlx-vlm's _deepstack_process, at the flagged positions
        return mx.where(flag, states + features, states)

    def forward(inputs_embeds, cache, position_ids):
        extra = {}
        if inputs_embeds.shape[-1] > hidden:
            flag = inputs_embeds[..., -1:] != 0
            deep = [inputs_embeds[..., hidden * (i + 1) : hidden * (i + 2)] for i in range(count)]
            extra = {"visual_pos_masks": flag, "deepstack_visual_embeds": deep}
            inputs_embeds = inputs_embeds[..., :hidden]
        inner = language_model.model
        inner._deepstack_process = added  # the instance's, for this call only
        cache = None if cache is None else [None if c is None else _PastLength(c) for c in cache]
        try:
            out = inner(None, inputs_embeds=inputs_embeds, cache=cache, position_ids=position_ids, **extra)
        finally:
            del inner._deepstack_process
        return (
            inner.embed_tokens.as_linear(out)
            if language_model.args.tie_word_embeddings
            else language_model.lm_head(out)
        )

    return forward


def package_config(config: dict) -> dict:
    """config.json as transformers.js reads Qwen3-VL's: the text settings in ``text_config``
    (of model_type ``qwen3_vl_text``)."""
    text = text_config_of(config)
    return dict(config, text_config=dict(text, model_type=f"{config['model_type']}_text"))


ARCHITECTURE = qwen_architecture(
    "Qwen3VLProcessor",
    "image_grid_thw",
    check_grid=16,
    package_config=package_config,
    genai_type="qwen3_vl",
    mean=MEAN,
    std=STD,
    encode=encode_function,
    text=text_function,
    language=language,
)
