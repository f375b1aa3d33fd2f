"""Vision-language models: an mlx-vlm folder -> the three graphs of transformers.js's
image-text-to-text models (and, where onnxruntime-genai has the type, its multimodal
layout), and their check.

transformers.js runs a LLaVA-style model as ``onnx/vision_encoder.onnx`` (the processor's
pixel inputs -> ``image_features``), ``onnx/embed_tokens.onnx`` (``input_ids`` ->
``inputs_embeds``) and ``onnx/decoder_model_merged.onnx`` (``inputs_embeds``,
``attention_mask``, ``position_ids``, the caches -> ``logits`` and the caches: the text
package's decoder, :mod:`mlx2onnx.llm.package`, over embeddings), and merges them itself:
the image token's positions take the image features, in order. The graphs give what
mlx-vlm's own generation computes (``get_input_embeddings`` then ``language_model``); what
differs between architectures is an :class:`Architecture`, one a ``vlm_*`` module, which
the registry of folder kinds (:mod:`mlx2onnx.tasks`) names by model_type and gives the
export and check (their onnxruntime-genai layout, :mod:`.vlm_genai`).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedModelError
from ..io.notes import PackageNotes, noted
from .loading import load_with
from .vlm_architecture import Architecture, image_token_id


def load_vlm_folder(folder: Path):
    """The model as ``mlx_vlm.utils.load_model`` loads the folder."""
    return load_with(folder, "mlx-vlm", "mlx_vlm.utils", "load_model", lambda load_model: load_model(folder))


class _Language:
    """mlx-vlm's language model as the text package's decoder expects a model: called with
    token ids (the cache probe: taken through ``text``, the package's token embedding, so
    the caches it finds are those the decoder's embeddings make) or embeddings, returning
    logits; its make_cache."""

    def __init__(self, model, positioned=None, prefix: bool = False, text=None):
        self.language = model.language_model
        self.text = text  # Architecture.text(model)
        self.layers = self.language.layers
        self.positioned = positioned  # mRoPE: f(inputs_embeds, cache, position_ids) (Architecture.positioned)
        self.positions = None  # the position_ids [3, batch, sequence] of the call being traced
        self.prefix = prefix  # the prompt attends both ways (Architecture.prefix_attention)

    def make_cache(self):
        """mlx-vlm's own caches for its generation (make_prompt_cache: the model's, or a
        KVCache per layer)."""
        from mlx_vlm.models.cache import make_prompt_cache

        return make_prompt_cache(self.language)

    def __call__(self, x, cache=None):
        if x.ndim == 2:  # a probe's token ids
            x = self.text(x)
        if self.positioned is not None:  # the probes at text positions; the traced call's positions
            positions = (
                self.positions
                if self.positions is not None
                else mx.broadcast_to(mx.arange(x.shape[1])[None, None], (3, *x.shape[:2]))
            )
            return self.positioned(x, cache, positions)
        if self.prefix and cache and hasattr(cache[0], "key_mask"):  # the package's caches
            return self.language(None, inputs_embeds=x, cache=cache, mask=prompt_mask(cache[0], x.shape[1])).logits
        return self.language(None, inputs_embeds=x, cache=cache).logits


def prompt_mask(cache, n: int) -> mx.array:
    """The package cache's mask for ``n`` new tokens [batch, 1, n, past + n], where a call
    on an empty past (the prompt) sees every real key of the call: a prefix that attends
    both ways, each later token every key before it."""
    mask = cache.make_mask(n, return_array=True)
    past = cache.keys.shape[2]
    prompt = mx.arange(past, past + n, dtype=mx.int32)[:1] == 0  # [1]: the past is empty
    return mask | (prompt & cache.key_mask[:, None, None, :])


def embedding_dtype(model, arch: Architecture):
    """The dtype of the model's text embeddings, which mlx-vlm casts pixels and features to."""
    return arch.text(model)(mx.zeros((1, 1), mx.int64)).dtype


def decoder_graph(model, exporter, arch: Architecture):
    """The text package's decoder over ``inputs_embeds`` (its layout, its names)."""
    from ..capture.dynamic import Dim
    from ..llm.package import attention_mask_rank, carried_arrays, decoder_function, traced_decoder
    from ..llm.states import has_states, package_layout, slot_names

    text = arch.text(model)
    # the embeddings the decoder takes: their dtype, and their width (the hidden size, or wider where
    # they carry more than the first layer's input: vlm_qwen3_vl)
    sample = text(mx.zeros((1, 1), mx.int64))
    positioned = None if arch.positioned is None else arch.positioned(model)
    language = _Language(model, positioned, arch.prefix_attention, text)
    layout = package_layout(language, model.config.model_type)
    if has_states(layout):
        raise UnsupportedModelError(
            f"model_type {model.config.model_type!r}: its language model has recurrent "
            "states, which the vision-language package does not carry (attention caches only)"
        )
    mask_rank = attention_mask_rank(language, layout)
    width = sample.shape[-1]
    rng = np.random.default_rng(0)
    positions = np.tile(np.arange(4, 7), (2, 1)).astype(np.int64)
    rows = 1 if arch.positioned is None else 3  # mRoPE: [3, batch, sequence]
    arrays = [
        mx.array(rng.standard_normal((2, 3, width)), dtype=sample.dtype),
        mx.ones((2, 7), dtype=mx.int64),
        mx.array(positions if rows == 1 else np.stack([positions] * rows)),
    ] + carried_arrays(layout, 2, 4, rng)
    slots = slot_names(layout)
    names = ["inputs_embeds", "attention_mask", "position_ids"] + [past for past, _ in slots]
    dynamic = {
        "input_ids": {0: "batch_size", 1: "sequence"},
        "attention_mask": {0: "batch_size", 1: "total_sequence"},
        "position_ids": {0: "batch_size", 1: "sequence"} if rows == 1 else {1: "batch_size", 2: "sequence"},
        **{f"past_{k}": {0: "batch_size", 2: Dim("past_sequence")} for k in range(len(slots))},
    }
    exporter = exporter.with_options(
        input_names=names, output_names=["logits"] + [p for _, p in slots], path=None, dynamic=dynamic
    )
    if arch.positioned is None:
        graph, _, _ = traced_decoder(exporter, language, layout, mask_rank, arrays)
        return graph, layout
    inner = decoder_function(language, layout, mask_rank)

    def forward(input_ids, attention_mask, position_ids, *past):  # input_ids: the embeddings, as in inner
        language.positions = position_ids  # read by the language model; the caches' offsets from the first row
        return inner(input_ids, attention_mask, position_ids[0], *past)

    return exporter.to_ir(forward, *arrays), layout


def export_graphs(model, exporter, arch: Architecture):
    """({file: graph} of transformers.js's three graphs, the decoder's cache layout)."""
    rng = np.random.default_rng(1)
    dtype = embedding_dtype(model, arch)
    if arch.vision_graph is not None:
        vision = arch.vision_graph(model, exporter, dtype)
    else:
        pixels = {k: mx.array(v) for k, v in arch.vision_inputs(model, 2, rng).items()}
        vision = exporter.with_options(
            input_names=list(pixels), output_names=["image_features"], path=None, dynamic=arch.vision_axes
        ).to_ir(arch.vision(model, dtype), *pixels.values())
    ids = mx.array(rng.integers(0, model.config.text_config.vocab_size, (2, 5)).astype(np.int64))
    embed = exporter.with_options(
        input_names=["input_ids"],
        output_names=["inputs_embeds"],
        path=None,
        dynamic={"input_ids": {0: "batch_size", 1: "sequence"}},
    ).to_ir(arch.text(model), ids)
    decoder, layout = decoder_graph(model, exporter, arch)
    return {
        "onnx/vision_encoder.onnx": vision,
        "onnx/embed_tokens.onnx": embed,
        "onnx/decoder_model_merged.onnx": decoder,
    }, layout


def export_vision_language(folder: Path, out: Path, exporter, stage, architecture: Architecture) -> Path:
    """Write the image-text-to-text package of the mlx-vlm folder ``folder`` (of the
    registry's ``architecture``) to ``out`` (already checked), whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, package_folder, save_graphs, write_json_files

    config, arch = json.loads((folder / "config.json").read_text()), architecture
    with stage(f"loading {folder} with mlx-vlm"):
        model = load_vlm_folder(folder)
    with stage("tracing the vision encoder, the token embedding and the decoder, and translating them"):
        graphs, layout = export_graphs(model, exporter, arch)
        genai_graphs, genai, genai_reason = (
            ({}, {}, f"onnxruntime-genai has no {config['model_type']} type")
            if arch.genai is None
            else arch.genai(model, folder, layout, exporter, graphs)
        )
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, {**graphs, **genai_graphs}, exporter.check)
        js_reason = None
        if arch.processor == "Gemma3" and not (folder / "chat_template.jinja").is_file():
            js_reason = "the folder has no chat_template.jinja, which transformers.js's Gemma3 processor loads"
        notes = PackageNotes(
            task="image-text-to-text",
            onnxruntime_genai=genai_reason and f"cannot run: {genai_reason}",
            transformers_js=js_reason and f"cannot run: {js_reason}",
        )
        written = config if arch.package_config is None else arch.package_config(config)
        copy_present(folder, package, ("generation_config.json", *TOKENIZER_FILES))  # an architecture may change them
        write_json_files(
            package,
            {"config.json": noted(written, notes), **arch.processor_configs(model, folder), **genai},
            dtypes,
        )
    return out


def mlx_vlm_tokens(
    model, arch: Architecture, input_ids: mx.array, pixels: dict, new_tokens: int
) -> tuple[list[int], mx.array]:
    """mlx-vlm's greedy generation as its generate step runs it: the merged embeddings of
    ``get_input_embeddings`` (``arch``'s), then the language model over its own cache:
    (tokens, the first step's logits)."""
    cache = _Language(model).make_cache()
    embeds, first_step = arch.mlx_embeddings(model, input_ids, pixels)
    logits = model.language_model(input_ids, inputs_embeds=embeds, cache=cache, **first_step).logits
    first, tokens = logits[0, -1], []
    for _ in range(new_tokens):
        tokens.append(int(logits[0, -1].argmax()))
        logits = model.language_model(mx.array([[tokens[-1]]]), cache=cache).logits
    return tokens, first


def package_vlm_tokens(
    package: Path,
    input_ids: np.ndarray,
    pixels: dict,
    new_tokens: int,
    image_token: int,
    rope: tuple[np.ndarray, np.ndarray] | None = None,
):
    """Greedy tokens of the package's three graphs in plain onnxruntime sessions, merged
    as transformers.js merges them: (tokens, first logits, the decoder's PlainSession).
    ``rope``: an mRoPE model's prompt positions [3, 1, sequence] and delta [1, 1]
    (Architecture.rope_index); a later step's position is its index plus the delta."""
    from ..io.graph_files import graph_path
    from ..verify.plain import plain_session

    vision, embed, decoder = (
        plain_session(graph_path(package, f"onnx/{name}.onnx"))
        for name in ("vision_encoder", "embed_tokens", "decoder_model_merged")
    )
    features = vision.session.run(["image_features"], pixels)[0]
    embeds = embed.session.run(["inputs_embeds"], {"input_ids": input_ids})[0]
    embeds[input_ids == image_token] = features.reshape(-1, features.shape[-1])
    carried = decoder.session.get_inputs()[3:]
    past = {v.name: np.zeros([1, v.shape[1], 0, v.shape[3]], np.float32) for v in carried}
    tokens, first, total = [], None, input_ids.shape[1]
    for step in range(new_tokens):
        n = embeds.shape[1]
        positions = np.arange(total - n, total, dtype=np.int64)[None]
        if rope is not None:
            positions = rope[0] if step == 0 else np.stack([positions + rope[1]] * 3)
        feeds = {
            "inputs_embeds": embeds,
            "attention_mask": np.ones((1, total), np.int64),
            "position_ids": positions,
            **past,
        }
        outputs = decoder.session.run(None, feeds)
        first = outputs[0][0, -1] if first is None else first
        tokens.append(int(outputs[0][0, -1].argmax()))
        past = {v.name: array for v, array in zip(carried, outputs[1:])}
        embeds = embed.session.run(["inputs_embeds"], {"input_ids": np.array([[tokens[-1]]], np.int64)})[0]
        total += 1
    return tokens, first, decoder


def check_vision_language(
    package: Path, folder: Path, architecture: Architecture, seed: int = 0, new_tokens: int = 12
) -> dict:
    """The package's greedy tokens and first logits for a random image and a prompt of
    random text tokens around the image tokens, against mlx-vlm's generation (of the
    registry's ``architecture``)."""
    model = load_vlm_folder(folder)
    config, arch = model.config, architecture
    rng = np.random.default_rng(seed)
    pixels = arch.vision_inputs(model, 1, rng)
    image = arch.image_prompt(model)
    text = [int(t) for t in rng.integers(3, config.text_config.vocab_size, 12) if t not in image]
    ids = np.array([image + text if arch.image_first else text[:4] + image + text[4:]], np.int64)
    rope = None if arch.rope_index is None else arch.rope_index(model, ids, pixels)
    token = image_token_id(config) if arch.image_token is None else arch.image_token(model)
    got, logits, decoder = package_vlm_tokens(package, ids, pixels, new_tokens, token, rope)
    want, want_logits = mlx_vlm_tokens(model, arch, mx.array(ids), pixels, new_tokens)
    row = decoder.tokens_row(f"a random image in {ids.shape[1]} tokens", got, want, logits, want_logits)
    return decoder.result("image-text-to-text", package, folder, [row])
