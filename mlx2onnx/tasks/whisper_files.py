"""The files beside a Whisper package's graphs, from what the MLX package that runs it
uses (mlx-whisper or mlx-audio, :class:`~.whisper.WhisperSource`): config.json and
generation_config.json (its token ids, the tokens its greedy decode suppresses),
preprocessor_config.json (its log-mel frontend, with its own mel filters so that the
runtimes compute its features), onnxruntime-genai's configs, and mlx-whisper's tiktoken
vocabulary converted to a tokenizer.json (through transformers' TikTokenConverter)."""

from __future__ import annotations

from pathlib import Path

import mlx.core as mx
import numpy as np

SAMPLE_RATE, N_FFT, HOP_LENGTH, CHUNK_SECONDS = 16000, 400, 160, 30


def whisper_tokenizer(model):
    """mlx-whisper's tokenizer for ``model`` (English-only or multilingual)."""
    from mlx_whisper.tokenizer import get_tokenizer

    return get_tokenizer(
        model.is_multilingual,
        num_languages=model.num_languages,
        language="en" if model.is_multilingual else None,
        task="transcribe",
    )


def suppressed(tokenizer) -> tuple[list[int], list[int]]:
    """(the tokens mlx-whisper's decode suppresses at every step with its default
    ``suppress_tokens="-1"``, those it suppresses at the first sampled token): its
    non-speech tokens and task/start tokens; a blank and end-of-text."""
    every = set(tokenizer.non_speech_tokens)
    every.update([tokenizer.transcribe, tokenizer.translate, tokenizer.sot, tokenizer.sot_prev, tokenizer.sot_lm])
    if tokenizer.no_speech is not None:
        every.add(tokenizer.no_speech)
    return sorted(every), tokenizer.encode(" ") + [tokenizer.eot]


def model_config(dims, tokenizer) -> dict:
    return {
        "model_type": "whisper",
        "architectures": ["WhisperForConditionalGeneration"],
        "is_encoder_decoder": True,
        "vocab_size": dims.n_vocab,
        "num_mel_bins": dims.n_mels,
        "d_model": dims.n_text_state,
        "encoder_layers": dims.n_audio_layer,
        "encoder_attention_heads": dims.n_audio_head,
        "decoder_layers": dims.n_text_layer,
        "decoder_attention_heads": dims.n_text_head,
        "max_source_positions": dims.n_audio_ctx,
        "max_target_positions": dims.n_text_ctx,
        "decoder_start_token_id": tokenizer.sot,
        "eos_token_id": tokenizer.eot,
        "pad_token_id": tokenizer.eot,
        "bos_token_id": tokenizer.eot,
        "begin_suppress_tokens": suppressed(tokenizer)[1],
    }


def generation_config(model, tokenizer, languages: dict) -> dict:
    """The token ids and suppressed tokens of the source's greedy decode; ``languages``:
    {"<|en|>": id, ...} of a multilingual model."""
    every, first = suppressed(tokenizer)
    config = {
        "decoder_start_token_id": tokenizer.sot,
        "eos_token_id": tokenizer.eot,
        "pad_token_id": tokenizer.eot,
        "bos_token_id": tokenizer.eot,
        "is_multilingual": bool(model.is_multilingual),
        "no_timestamps_token_id": tokenizer.no_timestamps,
        "suppress_tokens": every,
        "begin_suppress_tokens": first,
        "max_length": model.dims.n_text_ctx,
        "alignment_heads": np.array(model.alignment_heads.astype(mx.int32)).tolist(),
    }
    if model.is_multilingual:
        config["lang_to_id"] = languages
        config["task_to_id"] = {"transcribe": tokenizer.transcribe, "translate": tokenizer.translate}
    return config


def mlx_whisper_languages(tokenizer) -> dict:
    """{"<|en|>": id, ...} of mlx-whisper's tokenizer."""
    from mlx_whisper.tokenizer import LANGUAGES

    return {t: i for t, i in tokenizer.special_tokens.items() if t.strip("<|>") in LANGUAGES}


def mlx_whisper_filters(n_mels: int) -> np.ndarray:
    """mlx-whisper's mel filters [mels, frequency bins] (librosa's, shipped with it)."""
    from mlx_whisper.audio import mel_filters

    return np.array(mel_filters(n_mels))


def preprocessor_config(n_mels: int, filters: np.ndarray) -> dict:
    """WhisperFeatureExtractor's options with the source's own mel filters ([mels,
    frequency bins], as transformers.js indexes them): the same features as the source's
    log-mel frontend (mlx-whisper's filters come from librosa, mlx-audio computes its own;
    the runtimes' would be computed anew)."""
    return {
        "feature_extractor_type": "WhisperFeatureExtractor",
        "processor_class": "WhisperProcessor",
        "feature_size": n_mels,
        "sampling_rate": SAMPLE_RATE,
        "hop_length": HOP_LENGTH,
        "chunk_length": CHUNK_SECONDS,
        "n_fft": N_FFT,
        "n_samples": SAMPLE_RATE * CHUNK_SECONDS,
        "nb_max_frames": SAMPLE_RATE * CHUNK_SECONDS // HOP_LENGTH,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": False,
        "mel_filters": np.asarray(filters).tolist(),
    }


def write_tokenizer(tokenizer, package: Path) -> None:
    """tokenizer.json (mlx-whisper's tiktoken ranks as byte-level BPE, its special tokens
    as added tokens) and tokenizer_config.json."""
    import json
    import os

    import mlx_whisper.tokenizer as source
    from transformers.convert_slow_tokenizer import TikTokenConverter

    encoding = tokenizer.encoding
    specials = sorted(encoding._special_tokens, key=encoding._special_tokens.get)
    vocab_file = os.path.join(os.path.dirname(source.__file__), "assets", encoding.name)
    converted = TikTokenConverter(
        vocab_file=vocab_file, pattern=encoding._pat_str, extra_special_tokens=specials
    ).converted()
    converted.save(str(package / "tokenizer.json"))
    (package / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "WhisperTokenizer",
                "bos_token": "<|endoftext|>",
                "eos_token": "<|endoftext|>",
                "unk_token": "<|endoftext|>",
                "pad_token": "<|endoftext|>",
                "model_max_length": 1024,
                "errors": "replace",
                "add_prefix_space": False,
            },
            indent=2,
        )
    )


def genai_config(model, tokenizer) -> dict:
    """onnxruntime-genai's whisper type over ``encoder.onnx`` (features -> states and each
    layer's cross-attention keys and values) and ``decoder.onnx`` (a step over past self
    keys and values and the cross ones); greedy search up to the learned positions."""
    dims = model.dims

    def stack(heads: int, width: int, layers: int) -> dict:
        return {
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "head_size": width // heads,
            "hidden_size": width,
            "num_hidden_layers": layers,
        }

    return {
        "model": {
            "type": "whisper",
            "vocab_size": dims.n_vocab,
            "context_length": dims.n_text_ctx,
            "bos_token_id": tokenizer.eot,
            "eos_token_id": tokenizer.eot,
            "pad_token_id": tokenizer.eot,
            "decoder_start_token_id": tokenizer.sot,
            "encoder": {
                "filename": "encoder.onnx",
                **stack(dims.n_audio_head, dims.n_audio_state, dims.n_audio_layer),
                "inputs": {"audio_features": "audio_features"},
                "outputs": {
                    "encoder_hidden_states": "hidden_states",
                    "cross_present_key_names": "present_key_cross_%d",
                    "cross_present_value_names": "present_value_cross_%d",
                },
            },
            "decoder": {
                "filename": "decoder.onnx",
                **stack(dims.n_text_head, dims.n_text_state, dims.n_text_layer),
                "inputs": {
                    "input_ids": "input_ids",
                    "past_key_names": "past_key_self_%d",
                    "past_value_names": "past_value_self_%d",
                    "cross_past_key_names": "past_key_cross_%d",
                    "cross_past_value_names": "past_value_cross_%d",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present_key_self_%d",
                    "present_value_names": "present_value_self_%d",
                },
            },
        },
        "search": {
            "do_sample": False,
            "num_beams": 1,
            "num_return_sequences": 1,
            "max_length": dims.n_text_ctx,
            "min_length": 0,
            "past_present_share_buffer": False,
            "top_k": 1,
            "top_p": 1.0,
            "temperature": 1.0,
            "repetition_penalty": 1.0,
            "length_penalty": 1.0,
            "early_stopping": True,
        },
    }


def audio_processor_config(n_mels: int) -> dict:
    """onnxruntime-extensions' Whisper frontend as onnxruntime-genai's builder writes it
    (decode, STFT with a Hann window, log-mel): its mel filters are its own."""
    window = np.hanning(N_FFT + 1)[:-1].astype(np.float32).tolist()  # mlx-whisper's periodic Hann window
    return {
        "feature_extraction": {
            "sequence": [
                {"operation": {"name": "audio_decoder", "type": "AudioDecoder"}},
                {
                    "operation": {
                        "name": "STFT",
                        "type": "STFTNorm",
                        "attrs": {"n_fft": N_FFT, "frame_length": N_FFT, "hop_length": HOP_LENGTH, "_comment": window},
                    }
                },
                {
                    "operation": {
                        "name": "log_mel_spectrogram",
                        "type": "LogMelSpectrum",
                        "attrs": {
                            "chunk_size": CHUNK_SECONDS,
                            "hop_length": HOP_LENGTH,
                            "n_fft": N_FFT,
                            "n_mel": n_mels,
                        },
                    }
                },
            ]
        }
    }
