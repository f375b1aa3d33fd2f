"""Speech recognition from Whisper folders: the package of :mod:`.seq2seq` for
transformers.js and onnxruntime-genai, the files beside it (:mod:`.whisper_files`), and
its check, for each MLX package that runs Whisper (a :class:`WhisperSource`):
mlx-whisper's folders here (config.json of the model's dimensions,
``weights.safetensors`` or ``weights.npz``; its greedy ``decode`` with ``fp16=False``),
mlx-audio's in :mod:`.whisper_audio` (float16, Transformers' tokenizer). The source's
greedy decode without timestamps, transformers.js's
``pipeline("automatic-speech-recognition", PACKAGE)`` and onnxruntime-genai give the same
tokens."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import numpy as np

from ..errors import UsageError
from ..io.notes import PackageNotes, noted
from . import whisper_files as files
from .loading import load_with
from .seq2seq import Seq2Seq, check_clip, genai_graphs, package_greedy, transformers_js_graphs

MLX_WHISPER_WEIGHTS = ("weights.safetensors", "weights.npz")  # what mlx-whisper's loader reads


@dataclass(frozen=True)
class WhisperSource:
    """What one MLX package's Whisper gives its package and its check."""

    name: str  # the pip package
    load: Callable[[Path], Any]  # folder -> its Whisper model (dims, encoder, decoder, alignment_heads)
    tokenizer: Callable[[Any], Any]  # model -> its tokenizer (sot, eot, sot_sequence, non_speech_tokens ...)
    languages: Callable[[Any], dict]  # tokenizer -> {"<|en|>": id, ...}
    features: Callable[[np.ndarray, int], mx.array]  # (audio, mels) -> its log-mel features [3000, mels]
    transcription: Callable[[Any, mx.array], list]  # (model, features) -> its greedy tokens
    mel_filters: Callable[[int], np.ndarray]  # mels -> its filters [mels, frequency bins]
    write_tokenizer: Callable[[Any, Path], None]  # (tokenizer, package): tokenizer.json and its config
    compute: Callable[[Any], Any] = lambda model: None  # the dtype its encoder reads features in (None: float32)


def is_whisper_config(config: dict) -> bool:
    return {"n_mels", "n_audio_ctx", "n_text_ctx"} <= set(config)


def is_mlx_audio_whisper(folder: Path, config: dict, named: bool) -> bool:
    """Whether the folder is mlx-audio's Whisper (``named``: a Whisper model_type, the
    registry's, with Transformers' config keys; or mlx-whisper's dimensions beside
    ``model.safetensors`` instead of mlx-whisper's weights file)."""
    if named and {"d_model", "encoder_layers"} & set(config):
        return True
    return is_whisper_config(config) and (folder / "model.safetensors").is_file() and not _has_weights(folder)


def _has_weights(folder: Path) -> bool:
    return any((folder / name).is_file() for name in MLX_WHISPER_WEIGHTS)


def load_whisper_folder(folder: Path):
    """The model as ``mlx_whisper.load_models.load_model`` loads the folder."""
    if not _has_weights(folder):
        raise UsageError(f"{folder} has no weights.safetensors or weights.npz, which mlx-whisper loads")
    return load_with(folder, "mlx-whisper", "mlx_whisper.load_models", "load_model", lambda load: load(str(folder)))


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


def computed(features: mx.array, dtype) -> mx.array:
    """The features as the source's encoder reads them: cast to ``dtype`` (None: as given)."""
    return features if dtype is None else features.astype(dtype)


def whisper_parts(model, dtype=None) -> Seq2Seq:
    """The Whisper model's encoder (float32 features [batch, mels, frames], channels last
    inside, cast to ``dtype`` first where the source computes in it), each layer's cross
    projections, and its TextDecoder as one step with a [new, past + new] causal mask, so
    that any number of new tokens can follow any past; the caches in ``dtype``."""
    dims, decoder, heads = model.dims, model.decoder, model.dims.n_text_head
    cache = dtype or mx.float32

    def encode(features):
        return model.encoder(computed(features.transpose(0, 2, 1), dtype))

    def cross(states):
        return tuple(
            _heads(proj(states), heads)
            for block in decoder.blocks
            for proj in (block.cross_attn.key, block.cross_attn.value)
        )

    def step(input_ids, *past):
        n, before = input_ids.shape[1], past[0].shape[2]
        x = decoder.token_embedding(input_ids) + decoder.positional_embedding[before : before + n]
        query, key = mx.arange(before, before + n)[:, None], mx.arange(before + n)[None]
        mask_dtype = decoder._mask.dtype
        mask = mx.where(key > query, mx.array(-1e9, mask_dtype), mx.array(0, mask_dtype))
        present = []
        for i, block in enumerate(decoder.blocks):
            own, crossed = (tuple(_merged(c) for c in past[4 * i + j : 4 * i + j + 2]) for j in (0, 2))
            x, (kv, _), _ = block(x, crossed[0], mask=_WholeMask(mask), kv_cache=(own, crossed))
            present += [_heads(kv[0], heads), _heads(kv[1], heads)]
        return (decoder.token_embedding.as_linear(decoder.ln(x)), *present)

    rng = np.random.default_rng(0)
    return Seq2Seq(
        encode,
        cross,
        step,
        mx.array(rng.standard_normal((2, dims.n_mels, 2 * dims.n_audio_ctx)), dtype=mx.float32),
        {0: "batch_size"},
        mx.array(rng.standard_normal((2, dims.n_audio_ctx, dims.n_audio_state)), dtype=cache),
        dims.n_text_layer,
        heads,
        dims.n_text_state // heads,
        dims.n_vocab,
        dims.n_text_ctx,
        cache,
    )


def export_whisper(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the automatic-speech-recognition package of the mlx-whisper folder
    ``folder`` to ``out`` (already checked), whole or not at all."""
    return export_from(MLX_WHISPER, folder, out, exporter, stage)


def export_from(source: WhisperSource, folder: Path, out: Path, exporter, stage) -> Path:
    """Write the package of the Whisper folder ``folder`` as ``source`` loads it."""
    from ..io.packages import package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with {source.name}"):
        model = source.load(folder)
        tokenizer = source.tokenizer(model)
        parts = whisper_parts(model, source.compute(model))
    with stage("tracing the encoder, the cross-attention projections and the decoder step, and translating them"):
        graphs = {**transformers_js_graphs(parts, exporter, "input_features"), **genai_graphs(parts, exporter)}
    mels = model.dims.n_mels
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, graphs, exporter.check)
        write_json_files(
            package,
            {
                "config.json": noted(
                    files.model_config(model.dims, tokenizer), PackageNotes(task="automatic-speech-recognition")
                ),
                "generation_config.json": files.generation_config(model, tokenizer, source.languages(tokenizer)),
                "preprocessor_config.json": files.preprocessor_config(mels, source.mel_filters(mels)),
                "genai_config.json": files.genai_config(model, tokenizer),
                "audio_processor_config.json": files.audio_processor_config(mels),
            },
            dtypes,
        )
        source.write_tokenizer(tokenizer, package)
    return out


def mlx_features(audio: np.ndarray, n_mels: int) -> mx.array:
    """mlx-whisper's log-mel features of a clip of at most 30 s, as its transcribe
    computes them: [3000, mels]."""
    from mlx_whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

    return pad_or_trim(log_mel_spectrogram(audio, n_mels=n_mels, padding=N_SAMPLES), N_FRAMES, axis=-2)


def mlx_transcription(model, features: mx.array) -> list[int]:
    """mlx-whisper's greedy decode (English, without timestamps, float32): its tokens.
    English is named for English-only models too, as its transcribe does (without a
    language the decode detects one, which an English-only model cannot)."""
    from mlx_whisper.decoding import DecodingOptions, decode

    options = DecodingOptions(language="en", without_timestamps=True, fp16=False)
    return list(decode(model, features, options).tokens)


def whisper_prompt(tokenizer) -> tuple[int, ...]:
    """The tokens a greedy decode without timestamps starts from."""
    return (*tokenizer.sot_sequence, tokenizer.no_timestamps)


def check_whisper(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    return check_from(MLX_WHISPER, package, folder, seed, atol, rtol)


def check_from(source: WhisperSource, package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """The package's greedy transcription of a synthesised clip (onnxruntime, plain
    sessions, the package's prompt and suppressed tokens, the source's features) against
    the source's greedy decode of the same features, and the first step's logits (at the
    tolerance of the dtype the source computes them in)."""
    model = source.load(folder)
    features = source.features(check_clip(seed), model.dims.n_mels)
    want = source.transcription(model, features)
    settings = json.loads((package / "generation_config.json").read_text())
    prompt = list(whisper_prompt(source.tokenizer(model)))
    got, logits, decoder = package_greedy(
        package,
        np.array(features).T,
        prompt,
        model.dims.n_text_ctx // 2,
        settings["eos_token_id"],
        settings["suppress_tokens"],
        settings["begin_suppress_tokens"],
        atol,
        rtol,
    )
    states = model.encoder(computed(features[None], source.compute(model)))
    want_logits = model.decoder(mx.array([prompt]), states)[0][0, -1]
    row = decoder.tokens_row("2 s of tones and noise", got, want, logits, want_logits, settings["eos_token_id"])
    return decoder.result("automatic-speech-recognition", package, folder, [row])


MLX_WHISPER = WhisperSource(
    "mlx-whisper",
    load_whisper_folder,
    files.whisper_tokenizer,
    files.mlx_whisper_languages,
    mlx_features,
    mlx_transcription,
    files.mlx_whisper_filters,
    files.write_tokenizer,
)
