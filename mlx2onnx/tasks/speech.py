"""Speech recognition: an mlx-whisper model folder -> a transformers.js
``automatic-speech-recognition`` package, and its check.

The package holds, under ``onnx/``:

- ``encoder_model.onnx``: ``input_features`` float32 [batch_size, mels, 3000] (the
  log-mel features, mels first as the runtimes' feature extractors give them) ->
  ``last_hidden_state`` [batch_size, audio positions, width];
- ``decoder_model_merged.onnx``: ``input_ids`` int64 [batch_size, decoder_sequence_length],
  ``encoder_hidden_states``, ``past_key_values.<i>.decoder.key``/``.value`` [batch_size,
  heads, past, head width], ``past_key_values.<i>.encoder.key``/``.value`` and
  ``use_cache_branch`` (bool [1]) -> ``logits`` and the ``present.*`` of each. At the
  first step (``use_cache_branch`` false) the cross-attention keys and values are
  computed from ``encoder_hidden_states``; afterwards they are the past ones, passed
  through (:mod:`.branches`).

and beside them config.json, generation_config.json, preprocessor_config.json and the
tokenizer (:mod:`.whisper_files`). mlx-whisper's greedy decode (``decode`` with
``fp16=False``, without timestamps) and transformers.js's
``pipeline("automatic-speech-recognition", PACKAGE)`` give the same tokens.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..capture.dynamic import Dim
from ..targets import UsageError, UserCodeError


def is_whisper_config(config: dict) -> bool:
    return {"n_mels", "n_audio_ctx", "n_text_ctx"} <= set(config)


def load_whisper_folder(folder: Path):
    """The model as ``mlx_whisper.load_models.load_model`` loads the folder."""
    try:
        from mlx_whisper.load_models import load_model
    except ImportError as exc:
        raise UsageError(f"{folder} is an mlx-whisper model folder: install mlx-whisper to load it "
                         f"(pip install mlx-whisper): {exc}") from None
    if not any((folder / name).is_file() for name in ("weights.safetensors", "weights.npz")):
        raise UsageError(f"{folder} has no weights.safetensors or weights.npz, which mlx-whisper loads")
    try:
        return load_model(str(folder))
    except Exception as exc:
        raise UserCodeError(f"loading the mlx-whisper folder {folder}", exc) from exc


def _heads(x: mx.array, heads: int) -> mx.array:
    """[batch, sequence, width] -> [batch, heads, sequence, width / heads]."""
    return x.reshape(*x.shape[:2], heads, -1).transpose(0, 2, 1, 3)


def _merged(x: mx.array) -> mx.array:
    """[batch, heads, sequence, head width] -> [batch, sequence, width] (mlx-whisper's cache layout)."""
    return x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])


class _WholeMask:
    """A mask that mlx-whisper's attention may slice (it slices its own square causal
    mask to the queries) and still gets whole: the step's [new, past + new] mask."""

    def __init__(self, mask: mx.array):
        self.mask = mask

    def __getitem__(self, _):
        return self.mask


def encoder_function(model):
    """float32 features [batch, mels, frames] -> the encoder's states, as mlx-whisper's
    decode runs it with ``fp16=False`` (features channels last, in float32)."""
    def encode(input_features):
        return model.encoder(input_features.transpose(0, 2, 1))
    return encode


def encoder_with_cross(model):
    """features -> (the encoder's states, then each layer's cross keys and values)."""
    encode, cross = encoder_function(model), cross_function(model)

    def encode_and_cross(input_features):
        states = encode(input_features)
        return (states, *cross(states))
    return encode_and_cross


def cross_function(model):
    """encoder states -> each decoder layer's cross-attention keys and values."""
    heads = model.dims.n_text_head

    def cross(encoder_hidden_states):
        out = []
        for block in model.decoder.blocks:
            out += [_heads(block.cross_attn.key(encoder_hidden_states), heads),
                    _heads(block.cross_attn.value(encoder_hidden_states), heads)]
        return tuple(out)
    return cross


def step_function(model):
    """(input_ids, then per layer: past self key, value, cross key, value) -> (logits,
    then per layer the self key and value after the new tokens): mlx-whisper's
    TextDecoder with a [new, past + new] causal mask, so that any number of new tokens
    can follow any past."""
    decoder, heads = model.decoder, model.dims.n_text_head

    def step(input_ids, *past):
        n, before = input_ids.shape[1], past[0].shape[2]
        x = decoder.token_embedding(input_ids) + decoder.positional_embedding[before:before + n]
        query = mx.arange(before, before + n)[:, None]
        key = mx.arange(before + n)[None]
        mask = mx.where(key > query, mx.array(-1e9, decoder._mask.dtype), mx.array(0, decoder._mask.dtype))
        present = []
        for i, block in enumerate(decoder.blocks):
            own, cross = past[4 * i:4 * i + 2], past[4 * i + 2:4 * i + 4]
            cross = tuple(_merged(c) for c in cross)
            x, (kv, _), _ = block(x, cross[0], mask=_WholeMask(mask), kv_cache=(tuple(_merged(c) for c in own), cross))
            present += [_heads(kv[0], heads), _heads(kv[1], heads)]
        return (decoder.token_embedding.as_linear(decoder.ln(x)), *present)
    return step


@dataclass(frozen=True)
class Names:
    """One runtime's names for the graphs' values (``{i}``: the decoder layer)."""

    features: str
    states: str
    self_past: tuple[str, str]  # past self-attention key, value
    self_present: tuple[str, str]
    cross: tuple[str, str]  # cross-attention key, value as the step reads them
    cross_past: tuple[str, str] | None = None  # where a merged decoder takes them after its first step

    def step(self, layers: int) -> tuple[list[str], list[str]]:
        """The step graph's inputs after input_ids and outputs after logits."""
        inputs = [n.format(i=i) for i in range(layers) for n in (*self.self_past, *self.cross)]
        return inputs, [n.format(i=i) for i in range(layers) for n in self.self_present]


# transformers.js: an encoder, and a merged decoder that computes the cross keys and values
# itself at its first step (:mod:`.branches`)
TRANSFORMERS_JS = Names("input_features", "last_hidden_state",
                        ("past_key_values.{i}.decoder.key", "past_key_values.{i}.decoder.value"),
                        ("present.{i}.decoder.key", "present.{i}.decoder.value"), ("cross.{i}.key", "cross.{i}.value"),
                        ("past_key_values.{i}.encoder.key", "past_key_values.{i}.encoder.value"))
# onnxruntime-genai: the encoder outputs the cross keys and values, the decoder takes them
GENAI = Names("audio_features", "hidden_states", ("past_key_self_{i}", "past_value_self_{i}"),
              ("present_key_self_{i}", "present_value_self_{i}"), ("past_key_cross_{i}", "past_value_cross_{i}"))
GENAI_CROSS_OUTPUTS = ("present_key_cross_{i}", "present_value_cross_{i}")


def encoder_graph(model, exporter, names: Names, cross_outputs: tuple[str, str] | None = None):
    """features [batch, mels, 3000] -> the encoder's states (and, with ``cross_outputs``,
    each layer's cross-attention keys and values)."""
    dims = model.dims
    features = mx.array(np.random.default_rng(0).standard_normal((2, dims.n_mels, 2 * dims.n_audio_ctx)),
                        dtype=mx.float32)
    encode, outputs = encoder_function(model), [names.states]
    if cross_outputs:
        encode = encoder_with_cross(model)
        outputs += [n.format(i=i) for i in range(dims.n_text_layer) for n in cross_outputs]
    return exporter.with_options(input_names=[names.features], output_names=outputs, path=None,
                                 dynamic={"input_features": {0: "batch_size"}}).to_ir(encode, features)


def cross_graph(model, exporter, names: Names):
    """encoder states -> each layer's cross-attention keys and values, named ``names.cross``."""
    dims = model.dims
    states = mx.array(np.random.default_rng(1).standard_normal((2, dims.n_audio_ctx, dims.n_audio_state)),
                      dtype=mx.float32)
    outputs = [n.format(i=i) for i in range(dims.n_text_layer) for n in names.cross]
    return exporter.with_options(input_names=["encoder_hidden_states"], output_names=outputs, path=None,
                                 dynamic={"encoder_hidden_states": {0: "batch_size"}}).to_ir(
        cross_function(model), states)


def step_graph(model, exporter, names: Names):
    """The decoder step (:func:`step_function`) with the runtime's names: new tokens and
    past self keys and values of any length within the model's learned positions."""
    dims = model.dims
    rng = np.random.default_rng(2)
    width = dims.n_text_state // dims.n_text_head
    inputs, outputs = names.step(dims.n_text_layer)
    half = dims.n_text_ctx // 2  # past and new tokens are traced within the learned positions
    new, before = Dim("decoder_sequence_length", max=half), Dim("past_decoder_sequence_length", max=half)
    arrays = [mx.array(rng.integers(0, dims.n_vocab, (2, 3)).astype(np.int64))]
    dynamic = {"input_ids": {0: "batch_size", 1: new}}
    for k in range(len(inputs)):
        own = k % 4 < 2
        arrays.append(mx.array(rng.standard_normal((2, dims.n_text_head, 5 if own else dims.n_audio_ctx, width)),
                               dtype=mx.float32))
        dynamic[f"past_{k}"] = {0: "batch_size", 2: before if own else "encoder_sequence_length"}
    return exporter.with_options(input_names=["input_ids", *inputs], output_names=["logits", *outputs], path=None,
                                 dynamic=dynamic).to_ir(step_function(model), *arrays)


def transformers_js_graphs(model, exporter):
    """(encoder_model, decoder_model_merged) for transformers.js."""
    from .branches import cached_or_computed

    names = TRANSFORMERS_JS
    past = {c.format(i=i): p.format(i=i) for i in range(model.dims.n_text_layer)
            for c, p in zip(names.cross, names.cross_past)}
    return (encoder_graph(model, exporter, names),
            cached_or_computed(step_graph(model, exporter, names), cross_graph(model, exporter, names), past))


def genai_graphs(model, exporter):
    """(encoder, decoder) for onnxruntime-genai's whisper type."""
    return encoder_graph(model, exporter, GENAI, GENAI_CROSS_OUTPUTS), step_graph(model, exporter, GENAI)


def export_whisper(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the automatic-speech-recognition package of the mlx-whisper folder
    ``folder`` (see module) to ``out`` (already checked), whole or not at all."""
    from ..io.packages import json_text, package_folder
    from ..io.saving import save_model
    from . import whisper_files as files

    with stage(f"loading {folder} with mlx-whisper"):
        model = load_whisper_folder(folder)
        tokenizer = files.whisper_tokenizer(model)
    with stage("tracing the encoder, the cross-attention projections and the decoder step, and translating them"):
        graphs = {"onnx/encoder_model.onnx": None, "onnx/decoder_model_merged.onnx": None}
        graphs.update(zip(graphs, transformers_js_graphs(model, exporter)))
        graphs.update(zip(("encoder.onnx", "decoder.onnx"), genai_graphs(model, exporter)))
    with stage(f"checking and writing {out}"), package_folder(out) as package:
        for name, graph in graphs.items():
            save_model(graph, package / name, check=exporter.check, data_name=f"{Path(name).name}_data")
        config = dict(files.model_config(model.dims, tokenizer), mlx2onnx={"task": "automatic-speech-recognition"})
        if any((package / "onnx").glob("*.onnx_data")):
            config["transformers.js_config"] = {"use_external_data_format": True}
        (package / "config.json").write_text(json_text(config))
        (package / "generation_config.json").write_text(json_text(files.generation_config(model, tokenizer)))
        (package / "preprocessor_config.json").write_text(json.dumps(files.preprocessor_config(model.dims.n_mels)))
        (package / "genai_config.json").write_text(json_text(files.genai_config(model, tokenizer)))
        (package / "audio_processor_config.json").write_text(json_text(files.audio_processor_config(model.dims.n_mels)))
        files.write_tokenizer(tokenizer, package)
    return out
