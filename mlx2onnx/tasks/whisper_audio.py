"""Speech recognition from mlx-audio's Whisper folders (Transformers' config.json or
Whisper's dimensions, ``model.safetensors`` in MLX's or Transformers' layout, the
tokenizer and feature extractor files transformers' WhisperProcessor loads): the
Whisper package of :mod:`.whisper`, computed as mlx-audio computes it.

mlx-audio runs Whisper in float16 whatever the folder's weights (its loader casts them,
its decode casts the features), so the package's graphs compute in float16 (the
exporter's float16 policy: kept, or carried as float32); its tokenizer is the folder's
own (Transformers' WhisperTokenizer), written again as tokenizer.json for the runtimes;
its log-mel frontend computes its own mel filters, which the package's
preprocessor_config.json carries. The check compares with mlx-audio's greedy ``decode``
(its defaults: fp16, English, without timestamps)."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import UsageError
from .loading import load_with
from .whisper import WhisperSource, check_from, export_from

PROCESSOR_FILES = "tokenizer.json (or vocab.json and merges.txt), tokenizer_config.json and preprocessor_config.json"


def load_mlx_audio_whisper(folder: Path):
    """The model as ``mlx_audio.stt.utils.load_model`` loads the folder, with the
    WhisperProcessor it loads beside (the tokenizer its decode uses)."""
    model = load_with(folder, "mlx-audio", "mlx_audio.stt.utils", "load_model", lambda load: load(str(folder)))
    processor = getattr(model, "_processor", None)
    tokens = processor and processor.tokenizer
    # transformers makes an empty tokenizer where the folder has none: it knows no Whisper token
    if not tokens or tokens.convert_tokens_to_ids("<|startoftranscript|>") in (None, tokens.unk_token_id):
        raise UsageError(
            f"{folder} is an mlx-audio Whisper folder without the files transformers' WhisperProcessor "
            f"loads, which mlx-audio decodes with: add {PROCESSOR_FILES} (WhisperProcessor."
            "save_pretrained writes them)"
        )
    return model


def _tokenizer(model):
    """mlx-audio's tokenizer of the decode: English for a multilingual model, transcribing."""
    return model.get_tokenizer(language="en" if model.is_multilingual else None, task="transcribe")


def _languages(tokenizer) -> dict:
    ids = {
        f"<|{code}|>": tokenizer.hf_tokenizer.convert_tokens_to_ids(f"<|{code}|>")
        for code in tokenizer.all_language_codes
    }
    return {token: i for token, i in ids.items() if i != tokenizer.hf_tokenizer.unk_token_id}


def mlx_audio_features(audio: np.ndarray, n_mels: int) -> mx.array:
    """mlx-audio's log-mel features of a clip of at most 30 s, as its generate computes
    them: [3000, mels] (float32)."""
    from mlx_audio.stt.models.whisper.audio import N_FRAMES, N_SAMPLES, log_mel_spectrogram, pad_or_trim

    return pad_or_trim(log_mel_spectrogram(audio, n_mels=n_mels, padding=N_SAMPLES), N_FRAMES, axis=-2)


def mlx_audio_transcription(model, features: mx.array) -> list[int]:
    """mlx-audio's greedy decode (English, without timestamps, its default fp16): its
    tokens. English is named for English-only models too, as its generate does."""
    from mlx_audio.stt.models.whisper.decoding import DecodingOptions, decode

    options = DecodingOptions(language="en", without_timestamps=True)
    return list(decode(model, features, options).tokens)


def _mel_filters(n_mels: int) -> np.ndarray:
    """The filters mlx-audio's Whisper frontend computes (Slaney scale and norm)."""
    from mlx_audio.stt.models.whisper.audio import N_FFT, SAMPLE_RATE
    from mlx_audio.utils import mel_filters

    return np.array(mel_filters(SAMPLE_RATE, N_FFT, n_mels, norm="slaney", mel_scale=None))


def _write_tokenizer(tokenizer, package: Path) -> None:
    """The folder's tokenizer as transformers writes it (tokenizer.json, its config)."""
    tokenizer.hf_tokenizer.save_pretrained(str(package))


MLX_AUDIO = WhisperSource(
    "mlx-audio",
    load_mlx_audio_whisper,
    _tokenizer,
    _languages,
    mlx_audio_features,
    mlx_audio_transcription,
    _mel_filters,
    _write_tokenizer,
    lambda model: model.dtype,
)


def export_mlx_audio_whisper(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the automatic-speech-recognition package of the mlx-audio Whisper folder
    ``folder`` to ``out`` (already checked), whole or not at all."""
    return export_from(MLX_AUDIO, folder, out, exporter, stage)


def check_mlx_audio_whisper(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    return check_from(MLX_AUDIO, package, folder, seed, atol, rtol)
