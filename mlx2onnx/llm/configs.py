"""The package's runtime configs: config.json as transformers.js reads it, genai_config.json
for onnxruntime-genai, and, where a runtime cannot run the package's caches, the reason.

Both runtimes choose how to carry a model's caches from its config: transformers.js names
the cache inputs after ``model_type`` (and ``layer_types``), onnxruntime-genai after its
``type`` and the decoder's name templates. The package's graph has one decoder contract
(:mod:`.package`), so the configs describe the graph, not the source architecture: a type
the runtime does not know (or knows with other inputs) is given as one it runs with this
graph's inputs, and the source's type is kept under ``mlx2onnx.source_model_type``.
Tokenizer and generation settings are the source's own files, untouched.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..io.notes import PackageNotes
from .states import Group, flat, is_kv


def text_settings(config: dict) -> dict:
    """The text model's settings of an mlx-lm config: a vision-language folder keeps them
    in ``text_config`` (its own values win over the top level's)."""
    return {**config, **config.get("text_config", {})}


# transformers.js 4.3's decoder-only model types whose graph takes only
# past_key_values.<i>.key / .value, one per layer, named after the config's layer count
TRANSFORMERS_JS_TYPES = {
    "bloom",
    "gpt2",
    "gpt_oss",
    "jais",
    "gptj",
    "gpt_neo",
    "gpt_neox",
    "codegen",
    "llama",
    "nanochat",
    "apertus",
    "llama4_text",
    "arcee",
    "afmoe",
    "smollm3",
    "exaone",
    "olmo",
    "olmo2",
    "olmo3",
    "mobilellm",
    "granite",
    "cohere",
    "cohere2",
    "gemma",
    "gemma2",
    "vaultgemma",
    "gemma3_text",
    "helium",
    "glm",
    "glm_moe_dsa",
    "openelm",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "phi",
    "phi3",
    "mpt",
    "mistral",
    "mistral4",
    "ministral",
    "ministral3",
    "ernie4_5",
    "starcoder2",
    "deepseek_v3",
    "falcon",
    "solar_open",
    "stablelm",
    "hunyuan_v1_dense",
    "youtu",
}
LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_transformer_layers")
# transformers.js 4.3's hybrid types by the number of arrays a recurrent layer carries
# (configs.js getCacheNames): the type, its name for a recurrent layer and for an attention layer
TRANSFORMERS_JS_HYBRIDS = {
    1: ("lfm2", "conv", "full_attention"),
    2: ("granitemoehybrid", "mamba", "attention"),
    4: ("olmo_hybrid", "linear_attention", "full_attention"),
}


def _kinds(layout: list) -> list:
    """Per cache: "kv", a state count, or a tuple of its members' kinds (a CacheList; one
    of a single member is that member: the graph carries the same arrays)."""

    def kind(entry):
        if isinstance(entry, Group):
            return kind(entry.members[0]) if len(entry.members) == 1 else tuple(kind(m) for m in entry.members)
        return "kv" if is_kv(entry) else len(entry.shapes)

    return [kind(e) for e in layout]


def _described(layout: list) -> str:
    """What each cache of ``layout`` carries, in words, each kind once."""

    def words(kind):
        if isinstance(kind, tuple):
            return "a CacheList of " + " and ".join(words(k) for k in kind)
        return "attention keys and values" if kind == "kv" else f"{kind} states"

    return "; ".join(dict.fromkeys(words(k) for k in _kinds(layout)))


def _first_kv(layout: list):
    return next((leaf for _, leaf in flat(layout) if is_kv(leaf)), None)


def transformers_js_hybrid(layout: list) -> tuple[dict | None, str | None]:
    """The config settings that make transformers.js carry this layout's states, or None
    and why it cannot: (settings, None) or (None, reason)."""
    if _first_kv(layout) is None:
        return None, (
            "transformers.js 4.3 counts the tokens so far from an attention cache "
            "(DynamicCache.get_seq_length) and this model has no attention layer"
        )
    kinds = _kinds(layout)
    counts = {k for k in kinds if isinstance(k, int)}
    groups = [k for k in kinds if isinstance(k, tuple)]
    if not groups and len(counts) == 1 and counts <= TRANSFORMERS_JS_HYBRIDS.keys():
        model_type, state, attention = TRANSFORMERS_JS_HYBRIDS[counts.pop()]
        return {"model_type": model_type, "layer_types": [attention if k == "kv" else state for k in kinds]}, None
    if groups and len(groups) == len(kinds) and all(sorted(g, key=str) == sorted(("kv", 2), key=str) for g in groups):
        # every layer a mamba and an attention layer in one (falcon_h1): granitemoehybrid without layer_types
        return {"model_type": "granitemoehybrid", "layer_types": None, "layers_block_type": None}, None
    return None, (
        f"transformers.js 4.3 names the caches of a hybrid model by its model type (lfm2: one state per "
        f"recurrent layer, granitemoehybrid: two, olmo_hybrid: four, falcon_h1: two and attention keys and "
        f"values in every layer); this model's caches carry {_described(layout)}, which none of them has"
    )


def transformers_js_config(config: dict, layout: list, vocab: int) -> tuple[dict, str | None, PackageNotes]:
    """The package's config.json (see module), why transformers.js cannot run the package
    (None when it can), and the notes of a retyped package (its folder's model type and
    why), which the export records with the others (:func:`~..io.notes.noted`)."""
    settings = text_settings(config)
    model_type = config.get("model_type", "llama")
    layers = next((settings[k] for k in LAYER_COUNT_KEYS if isinstance(settings.get(k), int)), None)
    out, reason = dict(config), None
    if all(k == "kv" for k in _kinds(layout)):
        retyped = model_type not in TRANSFORMERS_JS_TYPES or layers != len(layout) or "text_config" in config
        given = {"model_type": "llama"}
    else:
        hybrid, reason = transformers_js_hybrid(layout)
        retyped, given = True, hybrid or {"model_type": "llama"}
    if retyped:
        kv = _first_kv(layout)
        out = {k: v for k, v in settings.items() if k != "text_config"}
        out.update(num_hidden_layers=len(layout), vocab_size=vocab)
        if kv is not None:
            out.update(num_key_value_heads=kv.heads, head_dim=kv.kdim)
        out.update({k: v for k, v in given.items() if v is not None})
        for k in (k for k, v in given.items() if v is None):
            out.pop(k, None)
        why = None
        if given["model_type"] != model_type and not reason:
            why = (
                f"transformers.js runs the package's decoder as its {given['model_type']}: it "
                "does not run this model type, or not with this graph's inputs"
            )
        return out, reason, PackageNotes(source_model_type=model_type, why=why)
    return out, reason, PackageNotes()


GENAI_TYPES = {
    "llama",
    "mistral",
    "qwen2",
    "qwen3",
    "phi3",
    "phi",
    "gemma",
    "gemma2",
    "gemma3_text",
    "olmo",
    "granite",
    "chatglm",
    "nemotron",
}


def genai_hybrid(layout: list) -> tuple[dict | None, str | None]:
    """onnxruntime-genai's settings for this layout's states, (settings, None), or (None,
    reason). genai 0.18 carries one convolution state per recurrent layer beside attention
    layers as its ``lfm2`` type (``layer_types``), and pairs of states of one shape in every
    recurrent layer (its RecurrentState: ``past_conv_names`` / ``past_recurrent_names``)
    with any decoder type; each array's shape after the batch axis is fixed."""
    kinds = _kinds(layout)
    leaves = [leaf for _, leaf in flat(layout)]
    if all(k in ("kv", 1) for k in kinds):
        ranks = sorted({1 + len(leaf.shapes[0]) for leaf in leaves if not is_kv(leaf)})
        if ranks != [3]:  # genai's ConvKeyValueCache takes [batch, channels, window] alone
            return None, (
                "onnxruntime-genai 0.18 carries one state beside attention layers as its lfm2 type's "
                f"convolution window, of rank 3 [batch, channels, window]; this model's state is of rank {ranks[-1]}"
            )
        return {
            "type": "lfm2",
            "layer_types": ["full_attention" if k == "kv" else "conv" for k in kinds],
            "inputs": {"past_conv_names": "past_conv.%d"},
            "outputs": {"present_conv_names": "present_conv.%d"},
        }, None
    states = {(leaf.shapes, leaf.dtypes) for leaf in leaves if not is_kv(leaf)}
    windowed = any(len(shapes[0]) == 3 or len(shapes[1]) == 4 for shapes, _ in states if len(shapes) == 2)
    if windowed:  # a rank-4 convolution or rank-5 recurrent state is genai's window of per-token states
        return None, (
            f"onnxruntime-genai 0.18 reads a rank-4 first state as a window of convolution states (its "
            f"state_window layout); this model's caches carry {_described(layout)} of ranks "
            f"{sorted({tuple(1 + len(x) for x in shapes) for shapes, _ in states})} with the batch axis"
        )
    if all(is_kv(leaf) or len(leaf.shapes) == 2 for leaf in leaves) and len(states) == 1:
        return {
            "inputs": {"past_conv_names": "past_conv.%d", "past_recurrent_names": "past_ssm.%d"},
            "outputs": {"present_conv_names": "present_conv.%d", "present_recurrent_names": "present_ssm.%d"},
        }, None
    return None, (
        f"onnxruntime-genai 0.18 carries one attention cache per layer beside one convolution state per "
        f"layer (lfm2) or two states of one shape in every recurrent layer; this model's caches carry "
        f"{_described(layout)}" + (" (states of several shapes)" if len(states) > 1 else "")
    )


def genai_config(config: dict, layout: list, vocab: int, folder: Path) -> tuple[dict | None, str | None]:
    """onnxruntime-genai's genai_config.json for the package's decoder graph (``layout``:
    its caches, keys and values at one width; ``vocab``: its logits' width), or None and
    why genai cannot run the package. The decoder's ``filename`` is the graph's name;
    :func:`~..io.packages.write_json_files` changes it to the file written for it."""
    hybrid = None
    if not all(k == "kv" for k in _kinds(layout)):
        hybrid, reason = genai_hybrid(layout)
        if hybrid is None:
            return None, reason
    kv = _first_kv(layout)
    heads, kdim = (kv.heads, kv.kdim) if kv is not None else (1, 1)
    generation = {}
    if (folder / "generation_config.json").is_file():
        generation = json.loads((folder / "generation_config.json").read_text())
    eos = generation.get("eos_token_id", config.get("eos_token_id", 0))
    # genai reads a number: a folder without a BOS token (null, as Qwen's tokenizers have none) gets 0
    bos = next((v for v in (generation.get("bos_token_id"), config.get("bos_token_id")) if v is not None), 0)
    pad = generation.get("pad_token_id", config.get("pad_token_id"))
    if pad is None:
        pad = eos[0] if isinstance(eos, list) else eos
    model_type = config.get("model_type", "llama")
    decoder = {
        # intra_op_num_threads 0: onnxruntime's own default, one thread per physical core (as the
        # Python and Node front ends run it); genai's default, half the logical CPUs, left one of
        # two cores idle on a machine without hyper-threading (1.5x slower decode: benchmarks/README.md)
        "session_options": {"log_id": "onnxruntime-genai", "intra_op_num_threads": 0, "provider_options": []},
        "filename": "onnx/model.onnx",
        "head_size": kdim,
        "hidden_size": int(config.get("hidden_size", heads * kdim)),
        "inputs": {
            "input_ids": "input_ids",
            "attention_mask": "attention_mask",
            "position_ids": "position_ids",
            "past_key_names": "past_key_values.%d.key",
            "past_value_names": "past_key_values.%d.value",
        },
        "outputs": {
            "logits": "logits",
            "present_key_names": "present.%d.key",
            "present_value_names": "present.%d.value",
        },
        "num_attention_heads": int(config.get("num_attention_heads", heads)),
        "num_hidden_layers": len(layout),
        "num_key_value_heads": heads,
    }
    genai_type = model_type if model_type in GENAI_TYPES else "llama"
    if hybrid is not None:
        genai_type = hybrid.get("type", genai_type)
        if "layer_types" in hybrid:
            decoder["layer_types"] = hybrid["layer_types"]
        decoder["inputs"].update(hybrid["inputs"])
        decoder["outputs"].update(hybrid["outputs"])
    return {
        "model": {
            "bos_token_id": bos,
            "context_length": int(config.get("max_position_embeddings", 4096)),
            "decoder": decoder,
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": genai_type,
            "vocab_size": int(vocab),
        },
        "search": {
            "do_sample": False,
            "early_stopping": True,
            "max_length": int(config.get("max_position_embeddings", 4096)),
            "min_length": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": False,
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 1,
            "top_p": 1.0,
        },
    }, None
