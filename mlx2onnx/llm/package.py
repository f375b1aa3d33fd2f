"""An mlx-lm model folder -> a package that onnxruntime-genai and transformers.js run.

The package folder holds:

- ``onnx/model.onnx`` (``model.onnx_data`` beside it for large models): one decoder graph
  in the convention Optimum, transformers.js and onnxruntime-genai use for decoder-only
  models. Inputs ``input_ids``, ``attention_mask`` [batch, past + sequence],
  ``position_ids`` [batch, sequence] (int64) and ``past_key_values.<i>.key`` / ``.value``
  [batch, kv_heads, past, head_dim]; outputs ``logits`` [batch, sequence, vocab] and
  ``present.<i>.key`` / ``.value`` [batch, kv_heads, past + sequence, head_dim]. Batch,
  sequence and past are dynamic (past may be 0), so the graph serves the prompt and
  every step. Left-padded rows get the tokens they would get alone: padded keys are
  masked out, and RoPE reads each row's own positions.
  Quantized Linear weights are onnxruntime's ``MatMulNBits`` (4-bit, ``accuracy_level=0``:
  exact whatever the runtime's session options).
- ``genai_config.json`` for onnxruntime-genai, and the source's ``config.json``,
  ``generation_config.json`` and tokenizer files, so both runtimes' tokenizers load from
  the package.

Only attention KV caches are exported (mlx-lm's ``KVCache`` and ``RotatingKVCache``,
whose window the mask applies); a model with another cache type is refused by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import types
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import numpy as np

from ..capture.dynamic import Dim
from ..errors import ExportOptionError, UnsupportedModelError
from ..exporter import Exporter
from ..io.saving import save_model, staging_folder
from ..targets import UsageError, load_model_folder
from .decoder import GrowingKVCache, cache_arrays, cache_layout, cache_names

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja")
SUPPORTED_CACHES = ("KVCache", "RotatingKVCache")
# bfloat16 models computed as MLX computes them (float32 rounded after every op): the
# package generates MLX's own tokens; plain float32 carriage drifts by bfloat16 steps and
# greedy decoding can take another token after a near tie
PACKAGE_BFLOAT16 = "emulate"


class PackageCache(GrowingKVCache):
    """One layer's cache in the package graph: appends to the past, exposes each row's
    RoPE offset [batch], and masks by index (causal, a sliding window where the layer
    asks for one) and by ``attention_mask`` (padding).

    The past and present hold keys and values at one width ``width`` (the wider of the
    two, zero-padded: onnxruntime-genai has one head size for both), cut back to the
    model's own widths ``dims`` before attention. The keys and values of padding tokens
    are stored as zeros: a padded position's own numbers may be anything (a model that
    takes the log of its position makes NaN there), and a masked key still meets the
    real queries' scores and weights (0 * NaN is NaN)."""

    def __init__(self, keys: mx.array, values: mx.array, offset: mx.array, key_mask: mx.array,
                 dims: tuple[int, int], mask_rank: int = 4):
        super().__init__(keys, values, offset)
        self.key_mask, self.dims, self.mask_rank = key_mask, dims, mask_rank

    def update_and_fetch(self, keys: mx.array, values: mx.array):
        real = self.key_mask[:, -keys.shape[2]:][:, None, :, None]
        width = self.keys.shape[3]
        stored = [_padded(mx.where(real, new, mx.zeros_like(new)), width) for new in (keys, values)]
        super().update_and_fetch(*stored)
        return self.keys_and_values()

    def keys_and_values(self):
        width = self.keys.shape[3]
        kdim, vdim = self.dims
        return (self.keys if kdim == width else self.keys[..., :kdim],
                self.values if vdim == width else self.values[..., :vdim])

    def make_mask(self, N: int, return_array: bool = False, window_size: int | None = None, **_: Any):
        """Bool [batch, 1, N, past + N]: query i (index past + i) sees key j <= its index
        that attention_mask keeps; each query also sees itself, so a padded query has one
        key and no row is all -inf (a NaN there would reach the real rows through runtimes
        that add masks as a bias)."""
        past = self.keys.shape[2]
        query = mx.arange(past, past + N, dtype=mx.int32)[:, None]
        key = mx.arange(past + N, dtype=mx.int32)[None]
        seen = key <= query
        if window_size is not None:
            seen = seen & (key > query - window_size)
        mask = (seen[None, None] & self.key_mask[:, None, None, :]) | (key == query)[None, None]
        # models that group query heads under their key heads score [batch, kv, group, N, total]
        return mask[:, None] if self.mask_rank == 5 else mask


def _padded(x: mx.array, width: int) -> mx.array:
    """``x`` [..., d] zero-padded to [..., width]."""
    extra = width - x.shape[-1]
    return x if extra == 0 else mx.concatenate([x, mx.zeros((*x.shape[:-1], extra), x.dtype)], axis=-1)


def stored_layout(layout: list[tuple]) -> list[tuple]:
    """The package's past/present layout: keys and values of each cache at one width."""
    return [(heads, max(kdim, vdim), max(kdim, vdim), dtype) for heads, kdim, vdim, dtype in layout]


def decoder_function(model, layout: list[tuple], mask_rank: int = 4) -> Callable:
    """``f(input_ids, attention_mask, position_ids, *past) -> (logits, *present)``, one
    cache per entry of ``layout`` (:func:`cache_layout`)."""
    layers = len(layout)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        sequence = input_ids.shape[1]
        total = past[0].shape[2] + sequence
        key_mask = mx.take(attention_mask, mx.arange(total), axis=1).astype(mx.bool_)
        # each row's first position: its last position minus (sequence - 1), from slices
        # (a Python number would be a constant of the trace)
        last = mx.arange(sequence, dtype=position_ids.dtype)[-1:]
        offset = (position_ids[:, -1:] - last).squeeze(1).astype(mx.int32)
        caches = [PackageCache(past[2 * i], past[2 * i + 1], offset, key_mask, layout[i][1:3], mask_rank)
                  for i in range(layers)]
        logits = self(input_ids, cache=caches)
        return (logits, *[a for c in caches for a in (c.keys, c.values)])

    return types.MethodType(forward, model)


def refuse_unsupported_caches(model, model_type: str) -> None:
    if not hasattr(model, "make_cache"):
        return
    for i, cache in enumerate(model.make_cache()):
        kind = type(cache).__name__
        if kind not in SUPPORTED_CACHES:
            raise UnsupportedModelError(
                f"model_type {model_type!r} uses an mlx-lm {kind} (layer {i}), which the package export does not "
                f"support yet: only attention KV caches ({', '.join(SUPPORTED_CACHES)}) are exported")


def export_package(folder: str | os.PathLike, out: str | os.PathLike, *, overwrite: bool = False,
                   stage: Callable[[str], Any] = lambda text: contextlib.nullcontext(),
                   exporter: Exporter | None = None, external_data: bool | None = None) -> Path:
    """Export the mlx-lm model folder ``folder`` as a package folder ``out`` (see module).
    Everything is checked before anything is written; the package appears whole or not
    at all. ``stage(text)`` is entered around each step (the command line's progress).
    ``external_data``: weights in ``onnx/model.onnx_data`` (None: above 2 GB only); the
    package's config.json then says so to transformers.js (``use_external_data_format``)."""
    folder, out = Path(folder), Path(out)
    if out.exists() and not overwrite:
        raise ExportOptionError(f"{str(out)!r} already exists; pass overwrite=True (--overwrite) to replace it")
    if out.suffix == ".onnx":
        raise ExportOptionError(f"{str(out)!r} names a file; a package is a folder (e.g. {str(out.with_suffix(''))}/)")
    with stage(f"loading {folder} with mlx-lm"):
        target = load_model_folder(str(folder))
        config = json.loads((folder / "config.json").read_text())
        model = target.fun
        refuse_unsupported_caches(model, config.get("model_type", "?"))
        layout = cache_layout(model)
    layers = len(layout)
    arrays = example_inputs(layout, batch=2)
    mask_rank = attention_mask_rank(model, layout)
    names = ["input_ids", "attention_mask", "position_ids"] + cache_names(layers, "past_key_values")
    dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"},
               "position_ids": {0: "batch", 1: "sequence"},
               **{f"past_{k}": {0: "batch", 2: Dim("past_sequence")} for k in range(2 * layers)}}
    outputs = ["logits"] + cache_names(layers, "present")
    exporter = exporter or Exporter(bfloat16=PACKAGE_BFLOAT16)
    exporter = exporter.with_options(input_names=names, output_names=outputs, path=None, dynamic=dynamic)
    with stage(f"tracing the decoder ({layers} layers) at several sizes and translating it"):
        graph = exporter.to_ir(decoder_function(model, layout, mask_rank), *arrays)
    vocab = graph.graph.outputs[0].shape[-1]  # the logits' width: the vocabulary the graph scores
    out.parent.mkdir(parents=True, exist_ok=True)
    with staging_folder(out.parent, f".{out.name}.") as staging, stage(f"checking and writing {out}"):
        package = staging / "package"
        (package / "onnx").mkdir(parents=True)
        save_model(graph, package / "onnx" / "model.onnx", check=exporter.check, data_name="model.onnx_data",
                   external_data=external_data)
        for name in ("generation_config.json", *TOKENIZER_FILES):
            if (folder / name).is_file():
                shutil.copy2(folder / name, package / name)
        external = (package / "onnx" / "model.onnx_data").is_file()
        stored = stored_layout(layout)
        package_config = transformers_js_config(config, stored, vocab, external)
        (package / "config.json").write_text(json.dumps(package_config, indent=2))
        settings = genai_config(text_settings(config), stored, vocab, folder)
        (package / "genai_config.json").write_text(json.dumps(settings, indent=2))
        if out.exists():
            shutil.rmtree(out)
        os.replace(package, out)
    return out


def example_inputs(layout: list[tuple], batch: int, sequence: int = 3, past: int = 4) -> list:
    """The package decoder's example inputs: token ids, an all-ones mask, positions after
    ``past`` cached tokens and a random past (a constant could be folded into the trace)."""
    rng = np.random.default_rng(0)
    arrays = [mx.array(rng.integers(0, 2, (batch, sequence)).astype(np.int64)),
              mx.ones((batch, past + sequence), dtype=mx.int64),
              mx.array(np.tile(np.arange(past, past + sequence), (batch, 1)).astype(np.int64))]
    return arrays + cache_arrays(stored_layout(layout), batch, past, rng)


def attention_mask_rank(model, layout: list[tuple]) -> int:
    """4 when the model adds the mask to [batch, heads, N, total] scores, 5 when it scores
    [batch, kv_heads, group, N, total] (gemma2, phi3small): found by running the package
    decoder in MLX on a batch of 3, which no head count of 1 or 3 lines up by chance."""
    inputs = example_inputs(layout, batch=3)
    failures = []
    for rank in (4, 5):
        try:
            mx.eval(decoder_function(model, layout, rank)(*inputs))
            return rank
        except ValueError as exc:
            if "Python scalars" in str(exc):
                raise UnsupportedModelError(
                    "the model reads its cache's offset as one Python number (np.arange(cache.offset, ...) in its "
                    "code), but each row of a package batch has its own offset (left padding): the package "
                    "export cannot serve this model") from exc
            failures.append(f"rank {rank}: {exc}")
    raise UnsupportedModelError(
        "no attention mask of the package fits every layer of this model (it adds one mask to scores of "
        f"different ranks, so a mask with a batch axis cannot line up with all of them): {'; '.join(failures)}")


def text_settings(config: dict) -> dict:
    """The text model's settings of an mlx-lm config: a vision-language folder keeps them
    in ``text_config`` (its own values win over the top level's)."""
    return {**config, **config.get("text_config", {})}


# transformers.js 4.3's decoder-only model types whose graph takes only
# past_key_values.<i>.key / .value, one per layer, named after the config's layer count
TRANSFORMERS_JS_TYPES = {
    "bloom", "gpt2", "gpt_oss", "jais", "gptj", "gpt_neo", "gpt_neox", "codegen", "llama", "nanochat", "apertus",
    "llama4_text", "arcee", "afmoe", "smollm3", "exaone", "olmo", "olmo2", "olmo3", "mobilellm", "granite", "cohere",
    "cohere2", "gemma", "gemma2", "vaultgemma", "gemma3_text", "helium", "glm", "glm_moe_dsa", "openelm", "qwen2",
    "qwen2_moe", "qwen3", "qwen3_moe", "phi", "phi3", "mpt", "mistral", "mistral4", "ministral", "ministral3",
    "ernie4_5", "starcoder2", "deepseek_v3", "falcon", "solar_open", "stablelm", "hunyuan_v1_dense", "youtu",
}
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_transformer_layers")


def transformers_js_config(config: dict, layout: list[tuple], vocab: int, external: bool) -> dict:
    """The package's config.json: the source's, as transformers.js reads it. transformers.js
    picks its model class and its cache names from ``model_type``; the package's graph has
    the same decoder contract whatever the architecture, so a type it does not know (or
    knows with other inputs, or with another layer count than the graph's caches) is
    given as ``llama``, its plain decoder, with the graph's cache count and widths, and the
    source's type kept under ``mlx2onnx.source_model_type``. Tokenizer and generation
    settings are the source's own files, untouched."""
    settings = text_settings(config)
    model_type = config.get("model_type", "llama")
    layers = next((settings[k] for k in LAYER_COUNT_KEYS if isinstance(settings.get(k), int)), None)
    out = dict(config)
    if model_type not in TRANSFORMERS_JS_TYPES or layers != len(layout) or "text_config" in config:
        out = {k: v for k, v in settings.items() if k != "text_config"}
        out.update(model_type="llama", num_hidden_layers=len(layout), num_key_value_heads=layout[0][0],
                   head_dim=layout[0][1], vocab_size=vocab,
                   mlx2onnx={"source_model_type": model_type,
                             "why": "transformers.js runs the package's decoder as its plain decoder (llama): it "
                                    "does not run this model type, or not with this graph's inputs"})
    if external:
        out["transformers.js_config"] = {**config.get("transformers.js_config", {}), "use_external_data_format": True}
    return out


GENAI_TYPES = {"llama", "mistral", "qwen2", "qwen3", "phi3", "phi", "gemma", "gemma2", "gemma3_text", "olmo",
               "granite", "chatglm", "nemotron"}


def genai_config(config: dict, layout: list, vocab: int, folder: Path) -> dict:
    """onnxruntime-genai's genai_config.json for the package's decoder graph (``layout``:
    its past's heads and widths; ``vocab``: its logits' width)."""
    heads, kdim = layout[0][0], layout[0][1]
    generation = {}
    if (folder / "generation_config.json").is_file():
        generation = json.loads((folder / "generation_config.json").read_text())
    eos = generation.get("eos_token_id", config.get("eos_token_id", 0))
    bos = generation.get("bos_token_id", config.get("bos_token_id", 0))
    pad = generation.get("pad_token_id", config.get("pad_token_id"))
    if pad is None:
        pad = eos[0] if isinstance(eos, list) else eos
    model_type = config.get("model_type", "llama")
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": int(config.get("max_position_embeddings", 4096)),
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": "onnx/model.onnx",
                "head_size": kdim,
                "hidden_size": int(config.get("hidden_size", heads * kdim)),
                "inputs": {
                    "input_ids": "input_ids", "attention_mask": "attention_mask", "position_ids": "position_ids",
                    "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value",
                },
                "num_attention_heads": int(config.get("num_attention_heads", heads)),
                "num_hidden_layers": len(layout),
                "num_key_value_heads": heads,
            },
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": model_type if model_type in GENAI_TYPES else "llama",
            "vocab_size": int(vocab),
        },
        "search": {
            "do_sample": False, "early_stopping": True, "max_length": int(config.get("max_position_embeddings", 4096)),
            "min_length": 0, "num_beams": 1, "num_return_sequences": 1, "past_present_share_buffer": False,
            "repetition_penalty": 1.0, "temperature": 1.0, "top_k": 1, "top_p": 1.0,
        },
    }


# -- running and checking a package --------------------------------------------------------
def left_padded(prompts: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input_ids, attention_mask, position_ids) int64 for prompts of different lengths,
    padded on the left: positions count each row's own tokens from 0 (1 on padding, as
    Optimum and transformers.js write them)."""
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad, np.int64)
    mask = np.zeros((len(prompts), width), np.int64)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = prompt
        mask[row, width - len(prompt):] = 1
    positions = np.where(mask == 1, np.cumsum(mask, axis=1) - 1, 1)
    return ids, mask, positions


def package_generate(session, prompts: list[list[int]], new_tokens: int, pad: int = 0):
    """Greedy tokens [batch, new_tokens] from the package's decoder in ``session`` for a
    left-padded batch of ``prompts``, and the first step's logits of each row's last token."""
    ids, mask, positions = left_padded(prompts, pad)
    past = {}
    for value in session.get_inputs():
        if value.name.startswith("past_key_values."):
            shape = [len(prompts) if i == 0 else 0 if i == 2 else d for i, d in enumerate(value.shape)]
            past[value.name] = np.zeros(shape, np.float32)
    tokens, first = [], None
    for step in range(new_tokens):
        outputs = session.run(None, {"input_ids": ids, "attention_mask": mask, "position_ids": positions, **past})
        logits = outputs[0][:, -1, :]
        first = logits if first is None else first
        token = logits.argmax(axis=-1).astype(np.int64)
        tokens.append(token)
        names = [o.name for o in session.get_outputs()][1:]
        past = {name.replace("present.", "past_key_values."): value for name, value in zip(names, outputs[1:])}
        ids = token[:, None]
        mask = np.concatenate([mask, np.ones((len(prompts), 1), np.int64)], axis=1)
        positions = positions[:, -1:] + 1
    return np.stack(tokens, axis=1), first


def check_package(package: str | os.PathLike, folder: str | os.PathLike, prompts: list[list[int]],
                  new_tokens: int = 12, atol: float | None = None, rtol: float | None = None) -> dict:
    """Greedy tokens and first-step logits of the package in onnxruntime (the prompts in
    one left-padded batch) against mlx-lm's own forward of each prompt alone. The session
    is a plain one, as onnxruntime-genai and transformers.js open it; where the package
    asks for int8 activations, or MLX's device computes float32 products in TF32, the
    result says so and the logits are compared at that arithmetic's tolerance (the tokens
    must still be MLX's)."""
    import onnx
    import onnxruntime as ort

    from ..verify import reference as references
    from ..verify.parity import Verifier
    from ..verify.runtimes import arithmetic
    from .decoder import mlx_generate

    package, folder = Path(package), Path(folder)
    model_file = package / "onnx" / "model.onnx"
    if not model_file.is_file():
        raise UsageError(f"{package} is not a package: it has no onnx/model.onnx (write one with "
                         "`mlx2onnx export MODEL_FOLDER -o PACKAGE/`)")
    model = load_model_folder(str(folder)).fun
    session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    trades = arithmetic.onnxruntime(onnx.load(str(model_file), load_external_data=False), {}, "all")
    verifier, reference = Verifier(), references.current()
    row = verifier.compared_as("float32", None, [*trades, *reference.arithmetic()])
    default_atol, default_rtol = verifier.tolerance(row)
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    tokens, logits = package_generate(session, prompts, new_tokens)
    rows = []
    for row, prompt in enumerate(prompts):
        want_tokens = mlx_generate(model, mx.array([prompt]), new_tokens)[0]
        want_logits = np.array(model(mx.array([prompt]))[0, -1].astype(mx.float32))
        error = float(np.abs(logits[row] - want_logits).max())
        bound = atol + rtol * float(np.abs(want_logits).max())
        rows.append({"prompt": list(map(int, prompt)), "tokens": tokens[row].tolist(), "mlx_tokens": want_tokens.tolist(),
                     "max_abs_logit_error": error, "tolerance": bound,
                     "passed": bool(np.array_equal(tokens[row], want_tokens) and error <= bound)})
    return {"package": str(package), "folder": str(folder), "arithmetic": [str(t) for t in trades],
            "reference": reference.to_dict(), "rows": rows,
            "passed": all(r["passed"] for r in rows)}
