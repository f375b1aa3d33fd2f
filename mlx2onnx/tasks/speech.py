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


def graph_names(layers: int) -> tuple[list[str], list[str], dict[str, str]]:
    """(step inputs after input_ids, step outputs after logits, the cross inputs' past names)."""
    inputs, outputs, past = [], [], {}
    for i in range(layers):
        inputs += [f"past_key_values.{i}.decoder.key", f"past_key_values.{i}.decoder.value",
                   f"cross.{i}.key", f"cross.{i}.value"]
        outputs += [f"present.{i}.decoder.key", f"present.{i}.decoder.value"]
        past.update({f"cross.{i}.key": f"past_key_values.{i}.encoder.key",
                     f"cross.{i}.value": f"past_key_values.{i}.encoder.value"})
    return inputs, outputs, past


def export_graphs(model, exporter):
    """(encoder graph, merged decoder graph) of ``model``."""
    from .branches import cached_or_computed

    dims = model.dims
    rng = np.random.default_rng(0)
    width = dims.n_text_state // dims.n_text_head
    frames = 2 * dims.n_audio_ctx
    features = mx.array(rng.standard_normal((2, dims.n_mels, frames)).astype(np.float32))
    encoder = exporter.with_options(input_names=["input_features"], output_names=["last_hidden_state"], path=None,
                                    dynamic={"input_features": {0: "batch_size"}}).to_ir(
        encoder_function(model), features)
    states = mx.array(rng.standard_normal((2, dims.n_audio_ctx, dims.n_audio_state)).astype(np.float32))
    names = [f"cross.{i}.{kv}" for i in range(dims.n_text_layer) for kv in ("key", "value")]
    cross = exporter.with_options(input_names=["encoder_hidden_states"], output_names=names, path=None,
                                  dynamic={"encoder_hidden_states": {0: "batch_size"}}).to_ir(
        cross_function(model), states)
    inputs, outputs, past = graph_names(dims.n_text_layer)
    arrays = [mx.array(rng.integers(0, dims.n_vocab, (2, 3)).astype(np.int64))]
    # the learned positions cover n_text_ctx tokens: past and new tokens are traced within them
    half = dims.n_text_ctx // 2
    new, before = Dim("decoder_sequence_length", max=half), Dim("past_decoder_sequence_length", max=half)
    dynamic = {"input_ids": {0: "batch_size", 1: new}}
    for k, name in enumerate(inputs):
        length = 5 if "decoder" in name else dims.n_audio_ctx
        arrays.append(mx.array(rng.standard_normal((2, dims.n_text_head, length, width)).astype(np.float32)))
        dynamic[f"past_{k}"] = {0: "batch_size", 2: before if "decoder" in name else "encoder_sequence_length"}
    step = exporter.with_options(input_names=["input_ids", *inputs], output_names=["logits", *outputs], path=None,
                                 dynamic=dynamic).to_ir(step_function(model), *arrays)
    return encoder, cached_or_computed(step, cross, past)


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
        encoder, decoder = export_graphs(model, exporter)
    with stage(f"checking and writing {out}"), package_folder(out) as package:
        save_model(encoder, package / "onnx" / "encoder_model.onnx", check=exporter.check,
                   data_name="encoder_model.onnx_data")
        save_model(decoder, package / "onnx" / "decoder_model_merged.onnx", check=exporter.check,
                   data_name="decoder_model_merged.onnx_data")
        config = dict(files.model_config(model.dims, tokenizer),
                      mlx2onnx={"task": "automatic-speech-recognition"})
        external = [p.name for p in (package / "onnx").glob("*.onnx_data")]
        if external:
            config["transformers.js_config"] = {"use_external_data_format": True}
        (package / "config.json").write_text(json_text(config))
        (package / "generation_config.json").write_text(json_text(files.generation_config(model, tokenizer)))
        (package / "preprocessor_config.json").write_text(json.dumps(files.preprocessor_config(model.dims.n_mels)))
        files.write_tokenizer(tokenizer, package)
    return out


def mlx_features(audio: np.ndarray, n_mels: int) -> mx.array:
    """mlx-whisper's log-mel features of a clip of at most 30 s, as its transcribe
    computes them: [3000, mels]."""
    from mlx_whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

    return pad_or_trim(log_mel_spectrogram(audio, n_mels=n_mels, padding=N_SAMPLES), N_FRAMES, axis=-2)


def mlx_transcription(model, features: mx.array) -> list[int]:
    """mlx-whisper's greedy decode (English, without timestamps, float32): its tokens."""
    from mlx_whisper.decoding import DecodingOptions, decode

    options = DecodingOptions(language="en" if model.is_multilingual else None, without_timestamps=True, fp16=False)
    return list(decode(model, features, options).tokens)


def package_transcription(encoder, decoder, package: Path, features: np.ndarray, new_tokens: int):
    """Greedy tokens of the package's two graphs (onnxruntime sessions) on ``features``
    [mels, frames], with the package's generation_config (its prompt, the tokens it
    suppresses): (tokens after the prompt, the first step's logits)."""
    settings = json.loads((package / "generation_config.json").read_text())
    prompt = [settings["decoder_start_token_id"]]
    if settings.get("is_multilingual"):
        prompt += [settings["lang_to_id"]["<|en|>"], settings["task_to_id"]["transcribe"]]
    prompt.append(settings["no_timestamps_token_id"])
    states = encoder.run(["last_hidden_state"], {"input_features": features[None].astype(np.float32)})[0]
    carried = [v for v in decoder.get_inputs() if v.name.startswith("past_key_values")]
    past = {v.name: np.zeros([1, v.shape[1], 0, v.shape[3]], np.float32) for v in carried}
    ids, tokens, first = prompt, [], None
    for step in range(new_tokens):
        feeds = {"input_ids": np.array([ids], np.int64), "encoder_hidden_states": states,
                 "use_cache_branch": np.array([step > 0]), **past}
        outputs = dict(zip([o.name for o in decoder.get_outputs()], decoder.run(None, feeds)))
        logits = outputs["logits"][0, -1].astype(np.float64)
        first = logits.copy() if first is None else first
        logits[settings["suppress_tokens"]] = -np.inf
        if step == 0:
            logits[settings["begin_suppress_tokens"]] = -np.inf
        tokens.append(int(logits.argmax()))
        if tokens[-1] == settings["eos_token_id"]:
            break
        for v in carried:  # the cross keys and values are computed once, at the first step
            if "decoder" in v.name or step == 0:
                past[v.name] = outputs[v.name.replace("past_key_values", "present", 1)]
        ids = tokens[-1:]
    return tokens, first


def check_whisper(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """The package's greedy transcription of a synthesised clip (onnxruntime, plain
    sessions, the package's prompt and suppressed tokens, mlx-whisper's features) against
    mlx-whisper's greedy decode of the same features, and the first step's logits."""
    from ..verify.plain import plain_session

    model = load_whisper_folder(folder)
    rng = np.random.default_rng(seed)
    t = np.arange(2 * 16000) / 16000
    audio = sum(np.sin(2 * np.pi * f * t) for f in rng.uniform(150, 1200, 4)) / 20 + 0.01 * rng.standard_normal(t.size)
    features = mlx_features(audio.astype(np.float32), model.dims.n_mels)
    want = mlx_transcription(model, features)
    encoder = plain_session(package / "onnx" / "encoder_model.onnx", atol, rtol)
    decoder = plain_session(package / "onnx" / "decoder_model_merged.onnx", atol, rtol)
    got, logits = package_transcription(encoder.session, decoder.session, package,
                                        np.array(features).T, model.dims.n_text_ctx // 2)
    got = got[:-1] if got and got[-1] == json.loads((package / "config.json").read_text())["eos_token_id"] else got
    prompt = mx.array([[*whisper_prompt(model)]])
    want_logits = np.array(model.decoder(prompt, model.encoder(features[None]))[0][0, -1].astype(mx.float32))
    error, bound = float(np.abs(logits - want_logits).max()), decoder.bound(want_logits)
    row = {"input": "2 s of tones and noise", "detail": f"tokens {got} (MLX {want}), first logits",
           "tokens": got, "mlx_tokens": want, "max_abs_error": error, "tolerance": bound,
           "passed": got == want and error <= bound}
    return {"task": "automatic-speech-recognition", "package": str(package), "folder": str(folder),
            **decoder.describe(), "rows": [row], "passed": row["passed"]}


def whisper_prompt(model) -> tuple[int, ...]:
    from .whisper_files import whisper_tokenizer

    tokenizer = whisper_tokenizer(model)
    return (*tokenizer.sot_sequence, tokenizer.no_timestamps)
