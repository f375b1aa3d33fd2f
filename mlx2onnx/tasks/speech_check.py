"""The check of a speech-recognition package: its greedy transcription in onnxruntime
against mlx-whisper's decode (``mlx2onnx check PACKAGE/ WHISPER_FOLDER``)."""

from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from .speech import load_whisper_folder


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
