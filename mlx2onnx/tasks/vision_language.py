"""Vision-language models: an mlx-vlm gemma3 folder -> the three graphs of transformers.js's
image-text-to-text models, and their check.

transformers.js runs a LLaVA-style model (``Gemma3ForConditionalGeneration``) as
``onnx/vision_encoder.onnx`` (``pixel_values`` [batch, 3, H, W] -> ``image_features``
[images, tokens per image, width]), ``onnx/embed_tokens.onnx`` (``input_ids`` ->
``inputs_embeds``) and ``onnx/decoder_model_merged.onnx`` (``inputs_embeds``,
``attention_mask``, ``position_ids``, the caches -> ``logits`` and the caches: the text
package's decoder, :mod:`mlx2onnx.llm.package`, over embeddings), and merges them itself:
the image token's positions take the image features, in order. The graphs give what
mlx-vlm's own generation computes (``get_input_embeddings`` then ``language_model``): its
image features divided by the square root of ``hidden_size``, its text embeddings with
padding zeroed, and the language model's scaling of both.
"""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UnsupportedModelError
from .loading import load_with

VLM_TYPES = ("gemma3",)


def load_vlm_folder(folder: Path):
    """The model as ``mlx_vlm.utils.load_model`` loads the folder."""
    return load_with(folder, "mlx-vlm", "mlx_vlm.utils", "load_model", lambda load_model: load_model(folder))


class _Language:
    """mlx-vlm's language model as the text package's decoder expects a model: called with
    token ids (the cache probe) or embeddings, returning logits; its make_cache."""

    def __init__(self, model):
        self.model, self.language = model, model.language_model
        self.layers = self.language.layers

    def make_cache(self):
        return self.language.make_cache()

    def __call__(self, x, cache=None):
        if x.ndim == 2:  # token ids
            return self.language(x, cache=cache).logits
        return self.language(None, inputs_embeds=x, cache=cache).logits


def embedding_dtype(model):
    """The dtype of the model's token embeddings, which mlx-vlm casts pixels and features to."""
    return model.language_model.model.embed_tokens(mx.zeros((1, 1), mx.int32)).dtype


def vision_function(model):
    """pixel_values [batch, 3, H, W] -> the image features mlx-vlm scatters into the
    embeddings (its vision tower, projector and 1/sqrt(hidden_size) scaling)."""
    dtype = embedding_dtype(model)

    def encode(pixel_values):
        hidden, _, _ = model.vision_tower(pixel_values.transpose(0, 2, 3, 1).astype(dtype), output_hidden_states=True)
        features = model.multi_modal_projector(hidden)
        return features / (model.config.hidden_size ** 0.5)
    return encode


def embed_function(model):
    """input_ids -> mlx-vlm's text embeddings before the merge (image and padding tokens 0)."""
    embed, config = model.language_model.model.embed_tokens, model.config
    pad = config.pad_token_id if config.pad_token_id is not None else 0

    def embed_tokens(input_ids):
        keep = (input_ids != config.image_token_index) & (input_ids != pad)
        return mx.where(keep[..., None], embed(input_ids), mx.zeros((), embed.weight.dtype))
    return embed_tokens


def genai_embedding_function(model):
    """(input_ids, image_features [images, tokens, width]) -> inputs_embeds: the text
    embeddings with the image token's positions taken by the features in order (what
    transformers.js merges outside its graphs, onnxruntime-genai's embedding model does
    inside). After the prompt the features are empty: a zero row stands first, so the
    text positions gather from it."""
    embed_tokens, image_token = embed_function(model), model.config.image_token_index

    def embedding(input_ids, image_features):
        text = embed_tokens(input_ids)
        width = image_features.shape[-1]
        rows = mx.concatenate([mx.zeros((1, width), image_features.dtype), image_features.reshape(-1, width)])
        is_image = (input_ids == image_token).reshape(-1)
        order = mx.cumsum(is_image.astype(mx.int32)) * is_image.astype(mx.int32)  # 1-based, 0 for text
        picked = mx.take(rows, order, axis=0).reshape(*input_ids.shape, width).astype(text.dtype)
        return mx.where((input_ids == image_token)[..., None], picked, text)
    return embedding


def decoder_graph(model, exporter):
    """The text package's decoder over ``inputs_embeds`` (its layout, its names)."""
    from ..capture.dynamic import Dim
    from ..llm.package import attention_mask_rank, carried_arrays, traced_decoder
    from ..llm.states import has_states, package_layout, slot_names

    language = _Language(model)
    layout = package_layout(language, model.config.model_type)
    if has_states(layout):
        raise UnsupportedModelError(f"model_type {model.config.model_type!r}: its language model has recurrent "
                                    "states, which the vision-language package does not carry (attention caches only)")
    mask_rank = attention_mask_rank(language, layout)
    width = model.config.text_config.hidden_size
    rng = np.random.default_rng(0)
    arrays = [mx.array(rng.standard_normal((2, 3, width)), dtype=embedding_dtype(model)),
              mx.ones((2, 7), dtype=mx.int64),
              mx.array(np.tile(np.arange(4, 7), (2, 1)).astype(np.int64))] + carried_arrays(layout, 2, 4, rng)
    slots = slot_names(layout)
    names = ["inputs_embeds", "attention_mask", "position_ids"] + [past for past, _ in slots]
    dynamic = {"input_ids": {0: "batch_size", 1: "sequence"}, "attention_mask": {0: "batch_size", 1: "total_sequence"},
               "position_ids": {0: "batch_size", 1: "sequence"},
               **{f"past_{k}": {0: "batch_size", 2: Dim("past_sequence")} for k in range(len(slots))}}
    exporter = exporter.with_options(input_names=names, output_names=["logits"] + [p for _, p in slots], path=None,
                                     dynamic=dynamic)
    graph, _, _ = traced_decoder(exporter, language, layout, mask_rank, arrays)
    return graph, layout


def export_graphs(model, exporter) -> dict:
    size = model.config.vision_config.image_size
    pixels = mx.array(np.random.default_rng(1).standard_normal((2, 3, size, size)), dtype=mx.float32)
    ids = mx.array(np.random.default_rng(2).integers(0, model.config.text_config.vocab_size, (2, 5)).astype(np.int64))
    vision = exporter.with_options(input_names=["pixel_values"], output_names=["image_features"], path=None,
                                   dynamic={"pixel_values": {0: "batch_size"}}).to_ir(vision_function(model), pixels)
    embed = exporter.with_options(input_names=["input_ids"], output_names=["inputs_embeds"], path=None,
                                  dynamic={"input_ids": {0: "batch_size", 1: "sequence"}}).to_ir(
        embed_function(model), ids)
    decoder, layout = decoder_graph(model, exporter)
    tokens = model.config.text_config.mm_tokens_per_image
    features = mx.array(np.random.default_rng(3).standard_normal((1, tokens, model.config.text_config.hidden_size)),
                        dtype=embedding_dtype(model))
    prompt = mx.concatenate([ids[:1, :2], mx.full((1, tokens), model.config.image_token_index, mx.int64), ids[:1, 2:]],
                            axis=1)
    merged = exporter.with_options(input_names=["input_ids", "image_features"], output_names=["inputs_embeds"],
                                   path=None, dynamic={"input_ids": {0: "batch_size", 1: "sequence"},
                                                       "image_features": {0: "num_images", 1: "num_image_tokens"}}
                                   ).to_ir(genai_embedding_function(model), prompt, features)
    graphs = {"onnx/vision_encoder.onnx": vision, "onnx/embed_tokens.onnx": embed,
              "onnx/decoder_model_merged.onnx": decoder, "onnx/embedding.onnx": merged}
    return graphs, layout


# onnxruntime-genai's gemma3 processor expands every image to this many tokens
GENAI_IMAGE_TOKENS = 256


def genai_files(model, folder: Path, layout: list) -> tuple[dict[str, dict], str | None]:
    """genai_config.json (its gemma3 type over the package's vision encoder, its own
    embedding model and the text decoder) and its image processor's configuration
    (onnxruntime-extensions' operations: the SigLIP input of :func:`processor_configs`),
    or why genai cannot run the package."""
    from ..llm.configs import genai_config, text_settings
    from ..llm.package import stored_layout

    tokens = model.config.text_config.mm_tokens_per_image
    if tokens != GENAI_IMAGE_TOKENS:
        return {}, (f"onnxruntime-genai's gemma3 processor expands an image to {GENAI_IMAGE_TOKENS} tokens; this "
                    f"model's vision tower gives {tokens}")
    config = json.loads((folder / "config.json").read_text())
    settings, reason = genai_config(text_settings(config), stored_layout(layout), model.config.text_config.vocab_size,
                                    folder)
    if settings is None:
        return {}, reason
    decoder = settings["model"]["decoder"]
    decoder["filename"] = "onnx/decoder_model_merged.onnx"
    decoder["inputs"] = {"inputs_embeds": "inputs_embeds", **{k: v for k, v in decoder["inputs"].items()
                                                              if k != "input_ids"}}
    settings["model"].update(type="gemma3", embedding={
        "filename": "onnx/embedding.onnx", "inputs": {"input_ids": "input_ids", "image_features": "image_features"},
        "outputs": {"inputs_embeds": "inputs_embeds"}}, vision={
        "filename": "onnx/vision_encoder.onnx", "config_filename": "genai_processor_config.json",
        "inputs": {"pixel_values": "pixel_values"}, "outputs": {"image_features": "image_features"}})
    size = model.config.vision_config.image_size
    # DecodeImage gives RGB already: a ConvertRGB after it swaps the channels (measured: the logits then are those
    # of the image in BGR order)
    steps = [("decode_image", "DecodeImage", {"color_space": "RGB"}),
             ("resize", "Resize", {"height": size, "width": size, "keep_aspect_ratio": 0}),
             ("rescale", "Rescale", {"rescale_factor": 1 / 255}),
             ("normalize", "Normalize", {"mean": [0.5] * 3, "std": [0.5] * 3}),
             ("to_channel_first", "Permute3D", {"dims": [2, 0, 1]})]
    processor = {"processor": {"name": "gemma3_image_processor", "transforms": [
        {"operation": {"name": name, "type": kind, "attrs": attrs}} for name, kind, attrs in steps]}}
    return {"genai_config.json": settings, "genai_processor_config.json": processor}, None


def processor_configs(model) -> dict[str, dict]:
    """transformers.js's Gemma3 processor files: the image processor (mlx-vlm's SigLIP
    input: resize to image_size, 1/255, mean and std 0.5) and the image token count."""
    size = model.config.vision_config.image_size
    image = {"image_processor_type": "Gemma3ImageProcessor", "processor_class": "Gemma3Processor",
             "do_resize": True, "size": {"height": size, "width": size}, "resample": 2, "do_rescale": True,
             "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5] * 3, "image_std": [0.5] * 3,
             "do_convert_rgb": True}
    return {"preprocessor_config.json": image,
            "processor_config.json": {"processor_class": "Gemma3Processor",
                                      "image_seq_length": model.config.text_config.mm_tokens_per_image}}


def export_vision_language(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the image-text-to-text package of the mlx-vlm folder ``folder`` to ``out``
    (already checked), whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, json_text, package_folder
    from .seq2seq import save_graphs

    config = json.loads((folder / "config.json").read_text())
    if config.get("model_type") not in VLM_TYPES:
        raise UnsupportedModelError(f"model_type {config.get('model_type')!r}: the image-text-to-text export handles "
                                    f"mlx-vlm's {', '.join(VLM_TYPES)}")
    with stage(f"loading {folder} with mlx-vlm"):
        model = load_vlm_folder(folder)
    with stage("tracing the vision encoder, the token embedding and the decoder, and translating them"):
        graphs, layout = export_graphs(model, exporter)
        genai, genai_reason = genai_files(model, folder, layout)
    with stage(f"checking and writing {out}"), package_folder(out) as package:
        save_graphs(graphs, package, exporter.check)
        notes = {"task": "image-text-to-text"}
        if genai_reason:
            notes["onnxruntime-genai"] = f"cannot run: {genai_reason}"
        if not (folder / "chat_template.jinja").is_file():
            notes["transformers.js"] = ("cannot run: the folder has no chat_template.jinja, which transformers.js's "
                                        "Gemma3 processor loads")
        settings = dict(config, mlx2onnx=notes)
        if any((package / "onnx").glob("*.onnx_data")):
            settings["transformers.js_config"] = {"use_external_data_format": True}
        (package / "config.json").write_text(json_text(settings))
        for name, content in {**processor_configs(model), **genai}.items():
            (package / name).write_text(json_text(content))
        copy_present(folder, package, ("generation_config.json", *TOKENIZER_FILES))
    return out


def mlx_vlm_tokens(model, input_ids: mx.array, pixel_values: mx.array, new_tokens: int) -> list[int]:
    """mlx-vlm's greedy generation as its generate step runs it: the merged embeddings of
    ``get_input_embeddings``, then the language model over its own cache."""
    cache = model.language_model.make_cache()
    embeds = model.get_input_embeddings(input_ids, pixel_values, mask=mx.ones_like(input_ids)).inputs_embeds
    logits = model.language_model(input_ids, inputs_embeds=embeds, cache=cache).logits
    tokens = []
    for _ in range(new_tokens):
        tokens.append(int(logits[0, -1].argmax()))
        logits = model.language_model(mx.array([[tokens[-1]]]), cache=cache).logits
    return tokens


def first_logits(model, input_ids, pixel_values) -> mx.array:
    embeds = model.get_input_embeddings(input_ids, pixel_values, mask=mx.ones_like(input_ids)).inputs_embeds
    return model.language_model(input_ids, inputs_embeds=embeds, cache=model.language_model.make_cache()).logits[0, -1]



def package_vlm_tokens(package: Path, input_ids: np.ndarray, pixel_values: np.ndarray, new_tokens: int,
                       image_token: int):
    """Greedy tokens of the package's three graphs in plain onnxruntime sessions, merged
    as transformers.js merges them: (tokens, first logits, the decoder's PlainSession)."""
    from ..verify.plain import plain_session

    vision, embed, decoder = (plain_session(package / "onnx" / f"{name}.onnx")
                              for name in ("vision_encoder", "embed_tokens", "decoder_model_merged"))
    features = vision.session.run(["image_features"], {"pixel_values": pixel_values})[0]
    embeds = embed.session.run(["inputs_embeds"], {"input_ids": input_ids})[0]
    embeds[input_ids == image_token] = features.reshape(-1, features.shape[-1])
    carried = decoder.session.get_inputs()[3:]
    past = {v.name: np.zeros([1, v.shape[1], 0, v.shape[3]], np.float32) for v in carried}
    tokens, first, total = [], None, input_ids.shape[1]
    for step in range(new_tokens):
        n = embeds.shape[1]
        feeds = {"inputs_embeds": embeds, "attention_mask": np.ones((1, total), np.int64),
                 "position_ids": np.arange(total - n, total, dtype=np.int64)[None], **past}
        outputs = decoder.session.run(None, feeds)
        first = outputs[0][0, -1] if first is None else first
        tokens.append(int(outputs[0][0, -1].argmax()))
        past = {v.name: array for v, array in zip(carried, outputs[1:])}
        embeds = embed.session.run(["inputs_embeds"], {"input_ids": np.array([[tokens[-1]]], np.int64)})[0]
        total += 1
    return tokens, first, decoder


def check_vision_language(package: Path, folder: Path, seed: int = 0, new_tokens: int = 12) -> dict:
    """The package's greedy tokens and first logits for a random image and a prompt of
    random text tokens around the image tokens, against mlx-vlm's generation."""
    from ..verify.plain import held_dtype

    model = load_vlm_folder(folder)
    config = model.config
    rng = np.random.default_rng(seed)
    size = config.vision_config.image_size
    pixels = rng.uniform(-1, 1, (1, 3, size, size)).astype(np.float32)
    text = [int(t) for t in rng.integers(3, config.text_config.vocab_size, 12) if t != config.image_token_index]
    ids = np.array([text[:4] + [config.image_token_index] * config.text_config.mm_tokens_per_image + text[4:]],
                   np.int64)
    got, logits, decoder = package_vlm_tokens(package, ids, pixels, new_tokens, config.image_token_index)
    want = mlx_vlm_tokens(model, mx.array(ids), mx.array(pixels), new_tokens)
    want_logits = first_logits(model, mx.array(ids), mx.array(pixels))
    held, want_logits = held_dtype(want_logits), np.array(want_logits.astype(mx.float32))
    error, bound = float(np.abs(logits - want_logits).max()), decoder.bound(want_logits, held)
    row = {"input": f"a random {size} x {size} image in {ids.shape[1]} tokens", "detail":
           f"tokens {got} (MLX {want}), first logits", "tokens": got, "mlx_tokens": want, "max_abs_error": error,
           "tolerance": bound, "passed": got == want and error <= bound}
    return {"task": "image-text-to-text", "package": str(package), "folder": str(folder), **decoder.describe(),
            "rows": [row], "passed": row["passed"]}
