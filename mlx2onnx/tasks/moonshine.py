"""Speech recognition from mlx-audio Moonshine folders (config.json with ``model_type``
``moonshine``, ``model.safetensors``, tokenizer files): the encoder-decoder package of
:mod:`.seq2seq` for transformers.js (whose Moonshine processor passes the raw 16 kHz
samples, as mlx-audio does), and its check. mlx-audio's greedy ``generate`` and
transformers.js's ``pipeline("automatic-speech-recognition", PACKAGE)`` (6 tokens per
second of audio, its own limit) give the same tokens."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..capture.dynamic import Dim
from ..errors import UnsupportedVariantError
from ..io.notes import PackageNotes, noted
from .loading import load_with
from .seq2seq import Seq2Seq, check_clip, package_greedy, transformers_js_graphs

SAMPLE_RATE = 16000
TOKENS_PER_SECOND = 6  # transformers.js's limit for Moonshine (from the Moonshine paper)


def load_moonshine_folder(folder: Path):
    """The model as ``mlx_audio.stt.utils.load`` loads the folder."""
    model = load_with(folder, "mlx-audio", "mlx_audio.stt.utils", "load", lambda load: load(str(folder)))
    config = model.config
    if config.decoder_num_key_value_heads != config.decoder_num_attention_heads:
        raise UnsupportedVariantError(
            f"decoder_num_key_value_heads {config.decoder_num_key_value_heads} != decoder_num_attention_heads "
            f"{config.decoder_num_attention_heads}: mlx-audio's Moonshine attention caches its keys after repeating "
            "them over the query heads, so its own cache does not serve grouped heads"
        )
    return model


def moonshine_parts(model) -> Seq2Seq:
    """mlx-audio's Moonshine encoder (raw samples [batch, samples]), each decoder layer's
    cross projections, and its decoder as one step over per-layer caches."""
    config, decoder = model.config, model.decoder
    heads = config.decoder_num_key_value_heads
    width = config.hidden_size // config.decoder_num_attention_heads

    def encode(input_values):
        return model.encoder(input_values)

    def split(x):
        return x.reshape(x.shape[0], x.shape[1], heads, width).transpose(0, 2, 1, 3)

    def cross(states):
        return tuple(
            split(proj(states))
            for layer in decoder.layers
            for proj in (layer.encoder_attn.k_proj, layer.encoder_attn.v_proj)
        )

    def step(input_ids, *past):
        cache = [
            {"self_attn": past[4 * i : 4 * i + 2], "cross_attn": past[4 * i + 2 : 4 * i + 4]}
            for i in range(len(decoder.layers))
        ]
        # the layers take the encoder's states only to project them, which a cache replaces
        unused = mx.zeros((input_ids.shape[0], 1, config.hidden_size))
        hidden, cache = decoder(input_ids, unused, cache=cache)
        return (model._get_logits(hidden), *(a for c in cache for a in c["self_attn"]))

    rng = np.random.default_rng(0)
    samples = mx.array(rng.standard_normal((2, SAMPLE_RATE)) * 0.1, dtype=mx.float32)
    states = encode(samples)
    return Seq2Seq(
        encode,
        cross,
        step,
        samples,
        {0: "batch_size", 1: Dim("audio_samples", min=1024)},
        mx.array(rng.standard_normal(states.shape), dtype=mx.float32),
        config.decoder_num_hidden_layers,
        heads,
        width,
        config.vocab_size,
        None,
    )


def package_configs(model, folder: Path) -> dict[str, dict]:
    """config.json (the folder's, completed with every field mlx-audio read), and the
    generation and preprocessor configs transformers.js reads."""
    config = dataclasses.asdict(model.config)
    source = json.loads((folder / "config.json").read_text())
    notes = PackageNotes(
        task="automatic-speech-recognition",
        onnxruntime_genai="cannot run: onnxruntime-genai 0.18 has no type for Moonshine's encoder-decoder "
        "(its speech types: whisper, nemotron_speech, parakeet_tdt, and streaming_enc_dec_asr, which reads "
        "Moonshine Streaming's frontend, encoder, adapter, cross_kv and decoder_kv graphs)",
    )
    settings = noted(
        {
            **config,
            **source,
            "model_type": "moonshine",
            "is_encoder_decoder": True,
            "architectures": ["MoonshineForConditionalGeneration"],
        },
        notes,
    )
    generation = {
        "decoder_start_token_id": config["decoder_start_token_id"],
        "bos_token_id": config["bos_token_id"],
        "eos_token_id": config["eos_token_id"],
        "pad_token_id": config["eos_token_id"],
        "max_length": config["max_position_embeddings"],
    }
    processor = {
        "feature_extractor_type": "Wav2Vec2FeatureExtractor",
        "processor_class": "MoonshineProcessor",
        "feature_size": 1,
        "sampling_rate": SAMPLE_RATE,
        "padding_value": 0.0,
        "padding_side": "right",
        "do_normalize": False,
        "return_attention_mask": False,
    }
    return {"config.json": settings, "generation_config.json": generation, "preprocessor_config.json": processor}


def export_moonshine(folder: Path, out: Path, exporter, stage) -> Path:
    """Write the automatic-speech-recognition package of the mlx-audio Moonshine folder
    ``folder`` to ``out`` (already checked), whole or not at all."""
    from ..io.packages import TOKENIZER_FILES, copy_present, package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with mlx-audio"):
        model = load_moonshine_folder(folder)
        parts = moonshine_parts(model)
    with stage("tracing the encoder, the cross-attention projections and the decoder step, and translating them"):
        graphs = transformers_js_graphs(parts, exporter, "input_values")
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, graphs, exporter.check)
        write_json_files(package, package_configs(model, folder), dtypes)
        copy_present(folder, package, TOKENIZER_FILES)
    return out


def mlx_moonshine_tokens(model, audio: np.ndarray, max_tokens: int) -> list[int]:
    """mlx-audio's greedy ``generate`` loop (``temperature=0``), returning its tokens: the
    start token, then the argmax of each step, stopping before the end token."""
    states = model.encoder(mx.array(audio)[None])
    tokens, cache = [model.config.decoder_start_token_id], None
    for _ in range(max_tokens):
        hidden, cache = model.decoder(mx.array([[tokens[-1]]], dtype=mx.int32), states, cache=cache)
        token = int(model._get_logits(hidden[:, -1, :]).argmax())
        if token == model.config.eos_token_id:
            break
        tokens.append(token)
    return tokens[1:]


def check_moonshine(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """The package's greedy transcription of a synthesised clip (onnxruntime, plain
    sessions, 6 tokens per second as transformers.js allows) against mlx-audio's greedy
    loop on the same samples, and the first step's logits."""
    model = load_moonshine_folder(folder)
    audio = check_clip(seed)
    limit = len(audio) // SAMPLE_RATE * TOKENS_PER_SECOND
    want = mlx_moonshine_tokens(model, audio, limit)
    start, eos = model.config.decoder_start_token_id, model.config.eos_token_id
    got, logits, decoder = package_greedy(package, audio, [start], limit, eos, atol=atol, rtol=rtol)
    hidden, _ = model.decoder(mx.array([[start]]), model.encoder(mx.array(audio)[None]))
    want_logits = model._get_logits(hidden)[0, -1]
    row = decoder.tokens_row("2 s of tones and noise", got, want, logits, want_logits, eos)
    return decoder.result("automatic-speech-recognition", package, folder, [row])
