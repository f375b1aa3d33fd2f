"""mlx-vlm's qwen2_vl (and, through :func:`qwen_architecture`, :mod:`.vlm_qwen2_5_vl`) as an
image-text-to-text package (:mod:`.vision_language`).

The processor cuts each image of ``h x w`` patches (h and w multiples of the merge size m:
the image resized to multiples of ``patch_size * m``) into patches of ``C *
temporal_patch_size * patch_size**2`` numbers in merge-window order (h/m rows of w/m
windows of m x m patches), image after image, and gives the tower all patches [N, D] and
the grid [images, 3] of (t, h, w). mlx-vlm computes each patch's rotary position, and the
segments attention keeps to, from the grid with Python numbers. The vision graph computes
them from the grid's values instead (:func:`patch_places`: each patch's image, frame, row
and column), with the number of patches and of images dynamic, so one graph serves every
image size and count; attention keeps to a patch's own image and frame by a mask (the same
sums as mlx-vlm's per-segment attention).

The language model takes mRoPE positions [3, batch, sequence] (time, row, column of an
image token; the text position three times for text), which the runtime computes from the
prompt and the grid (transformers.js's ``get_rope_index``; the check, mlx-vlm's).
transformers.js 4.3's image processor stacks the images of one call as the frames of one,
so its pipeline takes one image per prompt; the graphs take several. Video is not served.
onnxruntime-genai runs both through its qwen2_5_vl type (it has no qwen2_vl type; the
processor, positions and graph inputs are the same): :func:`genai_files`.
"""

from __future__ import annotations

import importlib
import json

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from .image_processors import CLIP_MEAN, CLIP_STD, RESAMPLE, rescaled_settings
from .vlm_architecture import Architecture
from .vlm_architecture import token_table as embeddings

GENAI_GRID = "image_grid_thw"  # the name onnxruntime-genai feeds the grid as
MIN_PIXELS, MAX_PIXELS = 4, 256  # the processors' image area bounds, in merged patches (28 x 28 pixels)


def _merge(model) -> int:
    return model.config.vision_config.spatial_merge_size


def encode_function(model, dtype):
    """``f(pixel_values [N, D], grid_thw [images, 3]) -> image features [N/m**2, hidden]``,
    as mlx-vlm's tower computes them for those images: each patch's image, frame, row and
    column computed from the grid in the graph (:func:`patch_places`), the rotary angles
    from the row and column, and attention kept to a patch's own image and frame (mlx-vlm's
    segments) and, in a Qwen2.5-VL tower's windowed blocks, to its own window (mlx-vlm's
    reordering by window: attention within a window does not depend on the order of its
    tokens, so a mask gives the same sums). The patches are cast to the patch embedding's
    dtype, as mlx-vlm casts them (``dtype`` is not used)."""
    tower, m = model.vision_tower, _merge(model)
    windows = getattr(tower, "fullatt_block_indexes", None)  # Qwen2.5-VL: the blocks that attend over the image
    span = None if windows is None else tower.window_size // tower.patch_size  # a window's side, in patches

    def encode(pixel_values, grid_thw):
        image, frame, row, column = patch_places(grid_thw, pixel_values.shape[0], m)
        hidden = tower.patch_embed(pixel_values.astype(tower.patch_embed.proj.weight.dtype))
        freqs = rotary_frequencies(tower.rotary_pos_emb, row, column)
        segment = _same(image) & _same(frame)
        window = None if windows is None else segment & _same(row // span) & _same(column // span)
        for index, block in enumerate(tower.blocks):
            mask = window if windows is not None and index not in windows else segment
            hidden = block_step(tower, block, hidden, freqs, mask)
        return tower.merger(hidden)

    return encode


def block_step(tower, block, hidden: mx.array, freqs: mx.array, mask: mx.array) -> mx.array:
    """One block of a Qwen-VL tower over all patches, attention kept to ``mask``."""
    attention = block.attn
    rotate = importlib.import_module(type(tower).__module__).apply_rotary_pos_emb_vision
    x = block.norm1(hidden)
    n = x.shape[0]
    qkv = attention.qkv(x).reshape(n, 3, attention.num_heads, -1).transpose(1, 0, 2, 3)
    q, k, v = mx.split(qkv, 3)
    q, k = (rotate(mx.expand_dims(a, 0), freqs)[0] for a in (q, k))
    q, k, v = (a.transpose(0, 2, 1, 3) for a in (q, k, v))
    out = mx.fast.scaled_dot_product_attention(q, k, v, scale=attention.scale, mask=mask)
    hidden = hidden + attention.proj(out.transpose(0, 2, 1, 3).reshape(n, -1))
    return hidden + block.mlp(block.norm2(hidden))


def _same(labels: mx.array) -> mx.array:
    return labels[:, None] == labels[None, :]


def patch_places(grid_thw: mx.array, count: int, m: int):
    """``(image, frame, row, column)`` [count] of each patch of the images of ``grid_thw``
    [images, 3] (t, h, w), laid out as the processor cuts them: image after image, frame
    after frame, in merge-window order (h/m rows of w/m windows of m x m patches)."""
    index = mx.arange(count)
    frame_size = grid_thw[:, 1] * grid_thw[:, 2]
    sizes = grid_thw[:, 0] * frame_size
    starts = mx.cumsum(sizes) - sizes
    image = (index[:, None] >= starts[None, :]).astype(mx.int32).sum(
        axis=1
    ) - 1  # the last image starting at or before it
    local = index - starts[image]
    frame, local = local // frame_size[image], local % frame_size[image]
    window, inner = local // (m * m), local % (m * m)
    across = grid_thw[image, 2] // m  # merge windows in a row of the image
    return image, frame, (window // across) * m + inner // m, (window % across) * m + inner % m


def rotary_frequencies(rotary, row: mx.array, column: mx.array) -> mx.array:
    """The tower's rotary angles [N, dim/2] of patches at ``row``, ``column``: each times
    the inverse frequencies, the same float32 products as mlx-vlm's table lookup."""
    positions = mx.stack([row, column], axis=-1).astype(mx.float32)
    inv_freq = 1.0 / (rotary.theta ** (mx.arange(0, rotary.dim, 2, dtype=mx.float32) / rotary.dim))
    return (positions[..., None] * inv_freq).reshape(positions.shape[0], -1)


def vision_graph(model, exporter, dtype, grid_name: str = "grid_thw", encode=encode_function) -> ir.Model:
    """The vision encoder as transformers.js runs it: ``pixel_values`` [N, D] and the grid
    [images, 3] (input ``grid_name``) -> ``image_features`` (``encode``:
    :func:`encode_function` or a tower's own), every number of patches and images dynamic."""
    from ..capture.dynamic import Dim

    m, width = _merge(model), _patch_width(model)
    grid = np.array([[1, 4, 4], [1, 2, 6]], np.int64)  # two images, 28 patches
    pixels = np.random.default_rng(1).uniform(-1, 1, (int((grid[:, 1] * grid[:, 2]).sum()), width)).astype(np.float32)
    return exporter.with_options(
        input_names=["pixel_values", grid_name],
        output_names=["image_features"],
        path=None,
        dynamic={"pixel_values": {0: Dim("num_patches", multiple_of=m * m)}, "grid_thw": {0: "num_images"}},
    ).to_ir(encode(model, dtype), mx.array(pixels), mx.array(grid))


def _patch_width(model) -> int:
    vision = model.config.vision_config
    return vision.in_channels * vision.temporal_patch_size * vision.patch_size**2


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
    return {
        "pixel_values": np.ascontiguousarray(cut.reshape(h * w, c * t * p * p)).astype(np.float32),
        grid_name: np.array([[1, h, w]], np.int64),
    }


def normalised(image: np.ndarray, mean=CLIP_MEAN, std=CLIP_STD) -> np.ndarray:
    """An RGB uint8 image [H, W, 3] as the processor rescales and normalises it (with
    ``mean`` and ``std``: CLIP's unless the model's processor says otherwise), channels first."""
    return ((image.astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)


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
        return (
            language.model.embed_tokens.as_linear(out) if language.args.tie_word_embeddings else language.lm_head(out)
        )

    return forward


def processor_configs(
    model, processor: str, mean=CLIP_MEAN, std=CLIP_STD, image_processor: str = "Qwen2VLImageProcessor"
) -> dict[str, dict]:
    """transformers.js's Qwen2VL processor files (``processor``: its processor class,
    ``image_processor`` its image processor's, Qwen2VLImageProcessor or one over it):
    images resized to multiples of patch_size * merge_size between min_pixels and
    max_pixels, rescaled and normalised with ``mean`` and ``std``, cut into patches."""
    vision = model.config.vision_config
    factor = vision.patch_size * vision.spatial_merge_size
    image = {
        "image_processor_type": image_processor,
        "processor_class": processor,
        "do_resize": True,
        "resample": RESAMPLE["bicubic"],
        **rescaled_settings(mean, std),
        "min_pixels": MIN_PIXELS * factor * factor,
        "max_pixels": MAX_PIXELS * factor * factor,
        "patch_size": vision.patch_size,
        "temporal_patch_size": vision.temporal_patch_size,
        "merge_size": vision.spatial_merge_size,
    }
    return {"preprocessor_config.json": image, "processor_config.json": {"processor_class": processor}}


def genai_files(
    model,
    folder,
    layout: list,
    exporter,
    package_graphs: dict,
    grid_name: str,
    genai_type: str = "qwen2_5_vl",
    mean=CLIP_MEAN,
    std=CLIP_STD,
    text=None,
) -> tuple[dict, dict[str, dict], str | None]:
    """(graphs, files, None): onnxruntime-genai's qwen2_5_vl type over the package's vision
    encoder (its grid input ``grid_name``) and decoder (mRoPE positions [3, batch,
    sequence], which genai computes from the prompt and the grid as transformers.js does),
    its own embedding model, and its Qwen image processor (smart resize to multiples of
    patch_size * merge_size, CLIP's normalisation, the same patches); or ({}, {}, why not).
    genai has no qwen2_vl type: its qwen2_5_vl type runs a qwen2_vl package alike (the
    same processor and positions), but feeds the grid as ``image_grid_thw`` whatever the
    config names, where transformers.js's Qwen2-VL feeds ``grid_thw``: such a package
    holds the vision encoder twice, ``onnx/genai_vision.onnx`` for genai. ``text``: the
    architecture's text embedding (``Architecture.text``); genai's buffers for the
    embeddings and image features are as wide as it gives them (``decoder.hidden_size``)."""
    from .vlm_genai import embedding_graph, genai_settings, processor_file

    vision, config = model.config.vision_config, model.config
    vision_encoder = package_graphs["onnx/vision_encoder.onnx"]
    graphs = (
        {}
        if grid_name == GENAI_GRID
        else {"onnx/genai_vision.onnx": _renamed_input(vision_encoder, grid_name, GENAI_GRID)}
    )
    settings, reason = genai_settings(
        model,
        folder,
        layout,
        genai_type,
        {
            "filename": next(iter(graphs), "onnx/vision_encoder.onnx"),
            "inputs": {"pixel_values": "pixel_values", "image_grid_thw": GENAI_GRID},
            "spatial_merge_size": vision.spatial_merge_size,
            "patch_size": vision.patch_size,
            "window_size": getattr(vision, "window_size", vision.patch_size * vision.spatial_merge_size),
            "tokens_per_second": float(getattr(vision, "tokens_per_second", 2)),
        },
    )
    if settings is None:
        return {}, {}, reason
    text = text or text_function
    width = text(model)(mx.zeros((1, 1), mx.int64)).shape[-1]
    settings["model"]["decoder"]["hidden_size"] = width
    settings["model"].update(
        image_token_id=config.image_token_id,
        video_token_id=config.video_token_id,
        vision_start_token_id=config.vision_start_token_id,
    )
    factor = vision.patch_size * vision.spatial_merge_size
    # genai's Qwen processor needs the ConvertRGB (measured: without it its patches are those of the image in
    # BGR order), unlike its gemma3 one
    processor = processor_file(
        "qwen2_5_image_processor",
        [
            ("decode_image", "DecodeImage", {"color_space": "RGB"}),
            ("convert_to_rgb", "ConvertRGB", {}),
            (
                "resize",
                "Resize",
                {
                    "smart_resize": 1,
                    "min_pixels": MIN_PIXELS * factor * factor,
                    "max_pixels": MAX_PIXELS * factor * factor,
                    "patch_size": vision.patch_size,
                    "merge_size": vision.spatial_merge_size,
                },
            ),
            ("rescale", "Rescale", {"rescale_factor": 1 / 255}),
            ("normalize", "Normalize", {"mean": list(mean), "std": list(std), "qwen2_5_vl": 1}),
            (
                "patch_image",
                "PatchImage",
                {
                    "patch_size": vision.patch_size,
                    "temporal_patch_size": vision.temporal_patch_size,
                    "merge_size": vision.spatial_merge_size,
                },
            ),
        ],
    )
    embedding = embedding_graph(
        exporter,
        text(model),
        config.image_token_id,
        config.text_config.vocab_size,
        (16, width),
        {0: "num_image_tokens"},
    )
    return (
        {**graphs, "onnx/embedding.onnx": embedding},
        {"genai_config.json": settings, "genai_processor_config.json": processor},
        None,
    )


def _renamed_input(model: ir.Model, old: str, new: str) -> ir.Model:
    """A copy of ``model`` whose graph input ``old`` is named ``new`` (its metadata too)."""
    from ..io.metadata import IO_METADATA_KEY

    copy = ir.serde.deserialize_model(ir.serde.serialize_model(model))
    next(v for v in copy.graph.inputs if v.name == old).name = new
    io = json.loads(copy.metadata_props[IO_METADATA_KEY])
    io["inputs"] = [dict(e, name=new) if e["name"] == old else e for e in io["inputs"]]
    copy.metadata_props[IO_METADATA_KEY] = json.dumps(io, sort_keys=True)
    return copy


def qwen_architecture(
    processor: str,
    grid_name: str,
    check_grid: int,
    package_config=None,
    *,
    genai_type: str | None = "qwen2_5_vl",
    mean=CLIP_MEAN,
    std=CLIP_STD,
    image_processor: str = "Qwen2VLImageProcessor",
    encode=encode_function,
    text=text_function,
    language=positioned,
) -> Architecture:
    """The Architecture of a Qwen-VL model whose processor class is ``processor`` and
    whose vision encoder takes the grid as ``grid_name``; the check's image is
    ``check_grid`` x ``check_grid`` patches. A later Qwen-VL (or a model over the same
    patches and positions) differs in its processor's ``mean``, ``std`` and
    ``image_processor``, its genai type (None: genai has none), and where its tower or
    language model does: ``encode`` (:func:`encode_function`), ``text`` and ``language``
    (:func:`positioned`)."""

    def vision_inputs(model, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        size = check_grid * model.config.vision_config.patch_size
        return patches(
            rng.uniform(-1.5, 1.5, (3, size, size)).astype(np.float32), model.config.vision_config, grid_name
        )

    def mlx_embeddings(model, input_ids: mx.array, inputs: dict):
        """mlx-vlm's merged embeddings and what its generation passes the language model's
        first step with them: the prompt's mRoPE positions and deltas (and, where the model
        has them, the image positions and the features it adds to early layers' states)."""
        out = model.get_input_embeddings(
            input_ids, mx.array(inputs["pixel_values"]), image_grid_thw=mx.array(inputs[grid_name])
        )
        extra = ("visual_pos_masks", "deepstack_visual_embeds")
        first = {name: getattr(out, name) for name in extra if getattr(out, name, None) is not None}
        return out.inputs_embeds, {"position_ids": out.position_ids, "rope_deltas": out.rope_deltas, **first}

    def rope_index(model, input_ids: np.ndarray, inputs: dict) -> tuple[np.ndarray, np.ndarray]:
        """The prompt's mRoPE positions [3, batch, sequence] and each row's delta [batch, 1]
        (a decode step's position: its index plus the delta), by mlx-vlm's get_rope_index."""
        positions, deltas = model.language_model.get_rope_index(mx.array(input_ids), mx.array(inputs[grid_name]))
        return np.array(positions).astype(np.int64), np.array(deltas).astype(np.int64)

    def image_prompt(model) -> list[int]:
        """One image of the check's size in a prompt: the vision (or image) start token, then its image tokens."""
        config = model.config
        start = getattr(config, "vision_start_token_id", None) or config.image_start_token_id
        return [start] + [config.image_token_id] * (check_grid**2 // _merge(model) ** 2)

    def genai(model, folder, layout, exporter, graphs):
        return genai_files(model, folder, layout, exporter, graphs, grid_name, genai_type, mean, std, text)

    return Architecture(
        processor=processor.removesuffix("Processor"),
        processor_configs=lambda model, folder: processor_configs(model, processor, mean, std, image_processor),
        image_prompt=image_prompt,
        vision_graph=lambda model, exporter, dtype: vision_graph(model, exporter, dtype, grid_name, encode),
        vision_inputs=vision_inputs,
        text=text,
        mlx_embeddings=mlx_embeddings,
        genai=None if genai_type is None else genai,
        rope_index=rope_index,
        positioned=language,
        package_config=package_config,
    )


ARCHITECTURE = qwen_architecture("Qwen2VLProcessor", "grid_thw", check_grid=8)
