"""mlx-vlm's qwen2_vl as an image-text-to-text package (:mod:`.vision_language`).

The processor cuts an image of ``h x w`` patches (``h``, ``w`` even: the image resized to
multiples of ``patch_size * merge_size``) into patches of ``C * temporal_patch_size *
patch_size**2`` numbers, in merge-window order (``h/m`` rows of ``w/m`` windows of
``m x m`` patches), and gives the tower the patches [N, D] and ``grid_thw`` [[1, h, w]].
The tower's rotary position of a patch is its row and column in the grid, which mlx-vlm
computes with Python numbers from ``grid_thw``. The vision graph reads ``h`` and ``w``
from ``grid_thw`` and views the patches as [h/m, w/m, m*m, D] (:func:`vision_graph`: a
Reshape on those values); the traced tower takes h/m and w/m as dynamic dimensions and
computes the positions from them (:func:`encode_function`), so one graph serves every
image size. One image per prompt: the patches of a second image do not fit the first
one's view, and the runtime fails there instead of reading them wrong.

The language model takes mRoPE positions [3, batch, sequence] (time, row, column of an
image token; the text position three times for text), which the runtime computes from
the prompt and the grid (transformers.js's ``get_rope_index``; the check, mlx-vlm's).
Video inputs are not served; onnxruntime-genai has no qwen2_vl type (its qwen2_5_vl
type is another tower).
"""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from .vlm_architecture import Architecture

MEAN = [0.48145466, 0.4578275, 0.40821073]  # the processor's normalisation (CLIP's)
STD = [0.26862954, 0.26130258, 0.27577711]


def embeddings(model):
    return model.language_model.model.embed_tokens


def _merge(model) -> int:
    return model.config.vision_config.spatial_merge_size


def encode_function(model, dtype):
    """``pixel_windows`` [h/m, w/m, m*m, D] (the patches) -> image features [h*w/m**2,
    hidden], as mlx-vlm's tower computes them for one image of ``grid_thw`` [[1, h, w]]:
    the patch positions from the view's dimensions instead of Python numbers, the patches
    cast to the patch embedding's dtype as mlx-vlm casts them (``dtype`` is not used)."""
    tower = model.vision_tower

    def encode(pixel_windows):
        rows, columns, window, width = pixel_windows.shape
        hidden = tower.patch_embed(pixel_windows.reshape(-1, width).astype(tower.patch_embed.proj.weight.dtype))
        freqs = rotary_frequencies(tower.rotary_pos_emb, rows, columns, _merge(model))
        bounds = mx.array([0, hidden.shape[0]])  # one image: one attention segment (cu_seqlens)
        for block in tower.blocks:
            hidden = block(hidden, cu_seqlens=bounds, rotary_pos_emb=freqs)
        return tower.merger(hidden)
    return encode


def rotary_frequencies(rotary, rows, columns, m: int) -> mx.array:
    """The tower's rotary angles [N, dim/2] of the patches of ``rows`` x ``columns`` merge
    windows of ``m`` x ``m`` (merge-window order): each patch's row and column times the
    inverse frequencies, the same float32 products as mlx-vlm's table lookup."""
    block_row = mx.arange(rows)[:, None, None, None] * m
    block_column = mx.arange(columns)[None, :, None, None] * m
    inner_row, inner_column = mx.arange(m).reshape(1, 1, m, 1), mx.arange(m).reshape(1, 1, 1, m)
    shape = (rows, columns, m, m)
    row = mx.broadcast_to(block_row + inner_row, shape).reshape(-1)
    column = mx.broadcast_to(block_column + inner_column, shape).reshape(-1)
    positions = mx.stack([row, column], axis=-1).astype(mx.float32)
    inv_freq = 1.0 / (rotary.theta ** (mx.arange(0, rotary.dim, 2, dtype=mx.float32) / rotary.dim))
    return (positions[..., None] * inv_freq).reshape(positions.shape[0], -1)


def vision_graph(model, exporter, dtype, encode=encode_function, grid_name: str = "grid_thw") -> ir.Model:
    """The vision encoder as transformers.js runs it: ``pixel_values`` [N, D] and the grid
    [1, 3] (input ``grid_name``) -> ``image_features``: the tower traced by ``encode``
    behind a Reshape of the patches to [h/m, w/m, m*m, D], h and w read from the grid."""
    from ..capture.dynamic import Dim

    m, width = _merge(model), _patch_width(model)
    example = mx.array(np.random.default_rng(1).uniform(-1, 1, (3, 2, m * m, width)).astype(np.float32))
    traced = exporter.with_options(
        input_names=["pixel_windows"], output_names=["image_features"], path=None,
        dynamic={"pixel_windows": {0: Dim("grid_rows"), 1: Dim("grid_columns")}},
    ).to_ir(encode(model, dtype), example)
    return _behind_view(traced, m, width, grid_name)


def _behind_view(model: ir.Model, m: int, width: int, grid_name: str) -> ir.Model:
    """``model`` whose input ``pixel_windows`` is computed from the inputs ``pixel_values``
    [N, D] and the grid [1, 3] (int64, named ``grid_name``): Reshape to [h/m, w/m, m*m, D]."""
    graph = model.graph
    windows = graph.inputs[0]
    patches = ir.Value(name="pixel_values", shape=ir.Shape(["num_patches", width]), type=windows.type)
    grid = ir.Value(name=grid_name, shape=ir.Shape([1, 3]), type=ir.TensorType(ir.DataType.INT64))
    hw = ir.node("Gather", [grid, _constant(graph, "grid_thw.hw", [1, 2])], {"axis": 1}, name="grid_thw/Gather")
    flat = ir.node("Reshape", [hw.outputs[0], _constant(graph, "grid_thw.two", [2])], name="grid_thw/Reshape")
    blocks = ir.node("Div", [flat.outputs[0], _constant(graph, "grid_thw.merge", [m, m])], name="grid_thw/Div")
    shape = ir.node("Concat", [blocks.outputs[0], _constant(graph, "grid_thw.window", [m * m, width])], {"axis": 0},
                    name="grid_thw/Concat")
    view = ir.node("Reshape", [patches, shape.outputs[0]], name="pixel_values/Reshape")
    graph.insert_before(graph[0], [hw, flat, blocks, shape, view])
    windows.replace_all_uses_with(view.outputs[0])
    view.outputs[0].name = "pixel_windows"
    graph.inputs.clear()
    graph.inputs.extend([patches, grid])
    return model


def _constant(graph: ir.Graph, name: str, array) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.tensor(np.asarray(array, np.int64), name=name),
                     shape=ir.Shape(np.shape(array)), type=ir.TensorType(ir.DataType.INT64))
    graph.initializers.add(value)
    return value


def _patch_width(model) -> int:
    vision = model.config.vision_config
    return vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2


def patches(pixels: np.ndarray, vision, grid_name: str = "grid_thw") -> dict[str, np.ndarray]:
    """The processor's inputs of one normalised channels-first image [C, H, W] (H and W
    multiples of patch_size * merge_size), cut with the vision config ``vision`` (an
    object or a dict): ``pixel_values`` [N, D] in merge-window order and the grid
    [[1, h, w]] (named ``grid_name``), as transformers.js's Qwen2VLImageProcessor cuts them."""
    get = vision.get if isinstance(vision, dict) else lambda name: getattr(vision, name)
    p, m, t = get("patch_size"), get("spatial_merge_size"), get("temporal_patch_size")
    c, height, width = pixels.shape
    h, w = height // p, width // p
    frames = np.broadcast_to(pixels[None], (t, c, height, width))
    cut = frames.reshape(1, t, c, h // m, m, p, w // m, m, p).transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return {"pixel_values": np.ascontiguousarray(cut.reshape(h * w, c * t * p * p)).astype(np.float32),
            grid_name: np.array([[1, h, w]], np.int64)}


def normalised(image: np.ndarray) -> np.ndarray:
    """An RGB uint8 image [H, W, 3] as the processor rescales and normalises it, channels first."""
    return ((image.astype(np.float32) / 255 - np.float32(MEAN)) / np.float32(STD)).transpose(2, 0, 1)


def text_function(model):
    embed = embeddings(model)

    def embed_tokens(input_ids):
        return embed(input_ids)
    return embed_tokens


def positioned(model):
    """``f(inputs_embeds, cache, position_ids [3, batch, sequence]) -> logits``: mlx-vlm's
    language model given the positions (its own __call__ derives them, with Python
    numbers, when it is not given them)."""
    language = model.language_model

    def forward(inputs_embeds, cache, position_ids):
        out = language.model(None, inputs_embeds=inputs_embeds, cache=cache, position_ids=position_ids)
        return language.model.embed_tokens.as_linear(out) if language.args.tie_word_embeddings else language.lm_head(out)
    return forward


def processor_configs(model, processor: str) -> dict[str, dict]:
    """transformers.js's Qwen2VL processor files (``processor``: its processor class):
    images resized to multiples of patch_size * merge_size between min_pixels and
    max_pixels, rescaled and normalised with CLIP's mean and std, cut into patches."""
    vision = model.config.vision_config
    factor = vision.patch_size * vision.spatial_merge_size
    image = {"image_processor_type": "Qwen2VLImageProcessor", "processor_class": processor,
             "do_resize": True, "resample": 3, "do_rescale": True, "rescale_factor": 1 / 255,
             "do_normalize": True, "image_mean": MEAN, "image_std": STD, "do_convert_rgb": True,
             "min_pixels": 4 * factor * factor, "max_pixels": 256 * factor * factor,
             "patch_size": vision.patch_size, "temporal_patch_size": vision.temporal_patch_size,
             "merge_size": vision.spatial_merge_size}
    return {"preprocessor_config.json": image, "processor_config.json": {"processor_class": processor}}


def qwen_architecture(processor: str, grid_name: str, encode, check_grid: int, package_config=None,
                      genai=None) -> Architecture:
    """The Architecture of a Qwen-VL tower (``encode``, :func:`encode_function`'s
    contract) whose processor class is ``processor`` and whose vision encoder takes the
    grid as ``grid_name``; the check's image is ``check_grid`` x ``check_grid`` patches."""

    def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        size = check_grid * model.config.vision_config.patch_size
        return patches(rng.uniform(-1.5, 1.5, (3, size, size)).astype(np.float32), model.config.vision_config, grid_name)

    def mlx_embeddings(model, input_ids: mx.array, inputs: dict):
        """mlx-vlm's merged embeddings and the prompt's mRoPE positions and deltas, as its
        generation passes them to the language model's first step."""
        out = model.get_input_embeddings(input_ids, mx.array(inputs["pixel_values"]),
                                         image_grid_thw=mx.array(inputs[grid_name]))
        return out.inputs_embeds, {"position_ids": out.position_ids, "rope_deltas": out.rope_deltas}

    def rope_index(model, input_ids: np.ndarray, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
        """The prompt's mRoPE positions [3, batch, sequence] and each row's delta [batch, 1]
        (a decode step's position: its index plus the delta), by mlx-vlm's get_rope_index."""
        positions, deltas = model.language_model.get_rope_index(mx.array(input_ids), mx.array(inputs[grid_name]))
        return np.array(positions).astype(np.int64), np.array(deltas).astype(np.int64)

    def image_prompt(model) -> list[int]:
        """One image of the check's size in a prompt: the vision start token, then its image tokens."""
        config = model.config
        return [config.vision_start_token_id] + [config.image_token_id] * (check_grid ** 2 // _merge(model) ** 2)

    return Architecture(processor.removesuffix("Processor"), embeddings, None, vision_inputs, {}, text_function,
                        mlx_embeddings, lambda model: processor_configs(model, processor), genai, image_prompt,
                        vision_graph=lambda model, exporter, dtype: vision_graph(model, exporter, dtype, encode,
                                                                                 grid_name),
                        rope_index=rope_index, positioned=positioned, package_config=package_config)


ARCHITECTURE = qwen_architecture("Qwen2VLProcessor", "grid_thw", encode_function, check_grid=8)
