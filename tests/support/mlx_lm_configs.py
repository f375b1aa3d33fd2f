"""Tiny configs for every mlx-lm architecture (the sweep's models: random weights, small
enough to export and run in a second).

:func:`config_for` starts from :data:`BASE`, a superset of the keys mlx-lm's ``ModelArgs``
take (``from_dict`` keeps the ones a model knows), fills each required field it lacks
from its name and type (:func:`_guess`), and applies the architecture's own overrides
(:data:`OVERRIDES`: layer patterns, nested configs, dims that must agree). Nothing is
downloaded; the configs are what the sweep writes into each model folder.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB, FFN = 64, 2, 4, 2, 16, 384, 128

BASE: dict = {
    "hidden_size": HIDDEN,
    "num_hidden_layers": LAYERS,
    "intermediate_size": FFN,
    "num_attention_heads": HEADS,
    "num_key_value_heads": KV_HEADS,
    "head_dim": HEAD_DIM,
    "vocab_size": VOCAB,
    "rms_norm_eps": 1e-5,
    "layer_norm_eps": 1e-5,
    "norm_eps": 1e-5,
    "layer_norm_epsilon": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "rope_scaling": None,
    "sliding_window": 4,
    "num_experts": 4,
    "num_local_experts": 4,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "n_shared_experts": 1,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
    "n_group": 1,
    "topk_group": 1,
    "routed_scaling_factor": 1.0,
    "norm_topk_prob": True,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "partial_rotary_factor": 0.5,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    # GPT-2 style names
    "n_embd": HIDDEN,
    "n_layer": LAYERS,
    "n_head": HEADS,
    "n_ctx": 512,
    "n_positions": 512,
    "n_inner": FFN,
    "d_model": HIDDEN,
    "n_layers": LAYERS,
    "n_heads": HEADS,
    "n_kv_heads": KV_HEADS,
    "num_layers": LAYERS,
    "num_heads": HEADS,
    "num_kv_heads": KV_HEADS,
    "hidden_dim": HIDDEN,
    "ffn_hidden_size": FFN,
    "expert_ffn_hidden_size": 32,
    "block_size": 512,
    "model_max_length": 512,
    "sliding_window_pattern": 2,
}

# name fragment -> value, for required fields BASE does not give (first match wins)
_BY_NAME = [
    ("eps", 1e-5),
    ("epsilon", 1e-5),
    ("theta", 10000.0),
    ("base", 10000),
    ("multiplier", 1.0),
    ("scaling", 1.0),
    ("scale", 1.0),
    ("factor", 1.0),
    ("soft_cap", 30.0),
    ("limit", 20.0),
    ("rank", 16),
    ("head_dim", HEAD_DIM),
    ("topk", 2),
    ("per_tok", 2),
    ("experts", 4),
    ("expert_num", 1),
    ("intermediate", 32),
    ("window", 4),
    ("conv", 4),
    ("state", 8),
    ("pct", 0.5),
    ("heads", HEADS),
    ("groups", 1),
    ("group", 1),
    ("period", 2),
    ("offset", 1),
    ("dim", HIDDEN),
    ("size", HIDDEN),
]

ROPE = {"rope_theta": 10000.0, "rope_type": "default"}
SWA_FULL = ["sliding_attention", "full_attention"]

# what a model needs beyond BASE and the guesses: layer patterns, nested configs, dims that
# must agree (each found by building the model and reading where it failed)
OVERRIDES: dict[str, dict] = {
    "afm7": {"num_layers": 3, "num_kv_reuse_layers": 1},
    "afmoe": {"layer_types": SWA_FULL, "num_dense_layers": 1, "mup_enabled": False},
    "baichuan_m1": {"conv_window": 2, "sliding_window_layers": [0]},
    "cohere2": {"sliding_window_pattern": 2},
    "dbrx": {
        "ffn_config": {"ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2},
        "attn_config": {"kv_n_heads": 2, "clip_qkv": 8.0, "rope_theta": 10000.0},
    },
    "deepseek_v2": {
        "rope_scaling": {
            "factor": 1.0,
            "mscale_all_dim": 0,
            "original_max_position_embeddings": 512,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
        }
    },
    "exaone4": {"sliding_window_pattern": "LG"},
    "gemma3_text": {"sliding_window_pattern": 2},
    "gemma4_text": {
        "sliding_window_pattern": 2,
        "num_kv_shared_layers": 0,
        "global_head_dim": 16,
        "hidden_size_per_layer_input": 16,
        "vocab_size_per_layer_input": VOCAB,
    },
    "glm_moe_dsa": {
        "rope_parameters": {"rope_theta": 10000.0},
        "index_head_dim": 16,
        "index_n_heads": 2,
        "index_topk": 4,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "moe_layer_freq": 1,
    },
    "gptj": {"rotary_dim": 8},
    "granitemoehybrid": {
        "layer_types": ["mamba", "attention"],
        "mamba_n_heads": 4,
        "mamba_d_head": 32,
        "mamba_proj_bias": False,
        "mamba_d_state": 8,
        "mamba_d_conv": 4,
        "mamba_n_groups": 1,
        "mamba_conv_bias": True,
        "shared_intermediate_size": 64,
    },
    "hunyuan": {
        "rope_scaling": {"alpha": 1.0, "factor": 1.0, "type": "dynamic"},
        "moe_topk": 2,
        "use_mixed_mlp_moe": True,
        "num_shared_expert": 1,
        "use_cla": False,
        "cla_share_factor": 2,
    },
    "kimi_linear": {
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "linear_attn_config": {
            "num_heads": 4,
            "head_dim": 16,
            "kda_layers": [1],
            "full_attn_layers": [2],
            "short_conv_kernel_size": 4,
        },
        "num_experts_per_token": 2,
    },
    "gemma3n": {
        "layer_types": SWA_FULL,
        "num_kv_shared_layers": 0,
        "altup_num_inputs": 2,
        "altup_active_idx": 0,
        "altup_coef_clip": 120.0,
        "vocab_size_per_layer_input": VOCAB,
        "hidden_size_per_layer_input": 16,
    },
    "minicpm": {"dim_model_base": 16, "scale_emb": 12.0, "scale_depth": 1.4},
    "lfm2": {
        "full_attn_idxs": [1],
        "layer_types": ["conv", "full_attention"],
        "block_dim": HIDDEN,
        "block_ff_dim": FFN,
        "block_multiple_of": 16,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False,
        "conv_L_cache": 3,
    },
    "lfm2_moe": {
        "full_attn_idxs": [1],
        "layer_types": ["conv", "full_attention"],
        "num_dense_layers": 1,
        "conv_L_cache": 3,
    },
    "llama4_text": {
        "no_rope_layers": [1, 0],
        "intermediate_size_mlp": FFN,
        "interleave_moe_layer_step": 1,
        "num_local_experts": 2,
        "attention_chunk_size": 8,
    },
    "longcat_flash": {
        "attention_method": "MLA",
        "zero_expert_type": "identity",
        "mla_scale_q_lora": True,
        "mla_scale_kv_lora": True,
        "zero_expert_num": 1,
        "moe_topk": 2,
    },
    "longcat_flash_ngram": {"mla_scale_q_lora": True, "mla_scale_kv_lora": True, "zero_expert_num": 1, "moe_topk": 2},
    "mamba2": {
        "time_step_limit": (0.0, float("inf")),
        "num_heads": 4,
        "head_dim": 32,
        "n_groups": 1,
        "state_size": 8,
        "conv_kernel": 4,
        "time_step_rank": 8,
    },
    "mellum": {"layer_types": SWA_FULL, "rope_parameters": {"sliding_attention": ROPE, "full_attention": ROPE}},
    "mimo_v2_flash": {
        "hybrid_layer_pattern": [1, 0],
        "moe_layer_freq": [0, 1],
        "swa_head_dim": 16,
        "swa_v_head_dim": 16,
        "swa_num_attention_heads": 4,
        "swa_num_key_value_heads": 2,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "partial_rotary_factor": 1,
    },
    "minicpm3": {
        "rope_scaling": {"original_max_position_embeddings": 512, "short_factor": 1.0, "long_factor": 1.0},
        "dim_model_base": 16,
        "scale_emb": 12.0,
        "scale_depth": 1.4,
    },
    "minimax": {"rotary_dim": 8},
    "ministral3": {
        "rope_parameters": {"rope_theta": 10000.0, "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 512}
    },
    "mistral4": {
        "rope_parameters": {"rope_theta": 10000.0, "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 512}
    },
    "nemotron-nas": {"block_configs": [{"attention": {"n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}}] * LAYERS},
    "nemotron_h": {
        "hybrid_override_pattern": ["M", "*", "-"],
        "mamba_num_heads": 4,
        "mamba_head_dim": 16,
        "ssm_state_size": 8,
        "n_groups": 1,
    },
    "olmo3": {"layer_types": SWA_FULL},
    "openelm": {
        "num_transformer_layers": LAYERS,
        "num_query_heads": [HEADS] * LAYERS,
        "num_kv_heads": [KV_HEADS] * LAYERS,
        "ffn_multipliers": [2.0] * LAYERS,
        "ffn_dim_divisor": 16,
        "model_dim": HIDDEN,
    },
    "phixtral": {"num_vocab": VOCAB, "model_dim": HIDDEN, "num_heads": HEADS, "num_layers": LAYERS, "rotary_dim": 8},
    "plamo": {"num_key_value_heads": KV_HEADS, "n_shared_head": 2},
    "qwen": {"hidden_size": HIDDEN, "intermediate_size": 2 * FFN, "kv_channels": HEAD_DIM},
    "recurrent_gemma": {
        "block_types": ["recurrent", "attention"],
        "attention_window_size": 4,
        "conv1d_width": 4,
        "lru_width": HIDDEN,
        "logits_soft_cap": 30.0,
        "rnn_num_heads": HEADS,
        "embeddings_scale_by_sqrt_dim": True,
        "final_w_init_variance_scale": 1.0,
    },
    "qwen3_next": {
        "num_hidden_layers": 4,
        "full_attention_interval": 4,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
    },
    "prism_hadamard_qwen35": {"schema_version": 1, "tensor_namespace": "mlx-lm-text"},
    "spark2_5": {"layer_types": SWA_FULL, "rope_parameters": {"sliding_attention": ROPE, "full_attention": ROPE}},
}
# wrappers whose text model is another module's (text_config is that module's config)
TEXT_MODULES = {
    "gemma3": "gemma3_text",
    "mistral3": "ministral3",
    "qwen2_vl": "qwen2",
    "pixtral": "llama",
    "qwen3_vl": "qwen3",
    "qwen3_vl_moe": "qwen3_moe",
    "lfm2-vl": "lfm2",
    "kimi_vl": "deepseek_v3",
    "kimi_k25": "deepseek_v3",
    "llama4": "llama4_text",
    "qwen3_5": "qwen3_next",
    "qwen3_5_moe": "qwen3_next",
    "gemma3n": "gemma3n",
    "prism_hadamard_qwen35": "qwen3_next",
    "gemma4": "gemma4_text",
}
# text-config settings a wrapper needs beyond its text module's
KIMI_LINEAR = {"num_heads": 4, "head_dim": 16, "kda_layers": [1], "full_attn_layers": [2], "short_conv_kernel_size": 4}
TEXT_OVERRIDES = {
    "llama4": {"num_experts_per_tok": 1, "num_hidden_layers": 4, "no_rope_layers": [1, 1, 1, 0]},
    "muse_spark": {"num_shared_experts": 0, "rope_parameters": {"rope_theta": 10000.0}},
    "kimi_k3": {"linear_attn_config": KIMI_LINEAR, "num_experts_per_token": 2},
}
# architectures the sweep cannot build from a config alone, and why
UNBUILDABLE = {
    "prism_hadamard_qwen35": "a Hadamard pack: 2-bit weights with a packed-module manifest that only its "
    "converter writes; no config alone makes one",
}


def model_types() -> list[str]:
    """Every module of ``mlx_lm.models`` with a ``Model`` and a ``ModelArgs``."""
    import mlx_lm.models

    names = []
    for info in pkgutil.iter_modules(mlx_lm.models.__path__):
        if info.name.startswith("_") or info.name in ("base", "cache", "switch_layers", "rope_utils"):
            continue
        try:
            module = importlib.import_module(f"mlx_lm.models.{info.name}")
        except BaseException:  # noqa: BLE001 - a module that needs another package (olmo's SystemExit)
            names.append(info.name)
            continue
        if hasattr(module, "Model") and hasattr(module, "ModelArgs"):
            names.append(info.name)
    return sorted(names)


def _guess(field: dataclasses.Field, hints: dict):
    name, kind = field.name, hints.get(field.name, field.type)
    origin = typing.get_origin(kind)
    if kind is bool or kind == "bool":
        return False
    if kind is str or kind == "str":
        return "silu" if "act" in name else ""
    if origin in (list, typing.List) or kind in (list, "list", "List"):
        return [0] * LAYERS if "layers" not in name else []
    if origin in (dict, typing.Dict) or kind in (dict, "dict"):
        return {}
    for fragment, value in _BY_NAME:
        if fragment in name:
            return value
    return 2


def config_for(model_type: str) -> dict:
    """A tiny config for ``model_type`` (``ModelArgs`` fields filled, overrides applied)."""
    config = _filled(_args(model_type), {**BASE, "model_type": model_type})
    if "text_config" in config or model_type in TEXT_MODULES:
        inner = TEXT_MODULES.get(model_type, model_type)
        text = _filled(_text_args(model_type) or _args(inner), {**BASE, "model_type": inner})
        config["text_config"] = {**text, **OVERRIDES.get(inner, {}), **TEXT_OVERRIDES.get(model_type, {})}
    return {**config, **OVERRIDES.get(model_type, {})}


def _args(model_type: str):
    try:
        return importlib.import_module(f"mlx_lm.models.{model_type}").ModelArgs
    except BaseException:  # noqa: BLE001 - reported when the sweep builds the model
        return None


def _text_args(model_type: str):
    """The dataclass a wrapper module builds its text config from, when it has its own."""
    try:
        module = importlib.import_module(f"mlx_lm.models.{model_type}")
    except BaseException:  # noqa: BLE001
        return None
    for name in ("TextArgs", "TextConfig", "TextModelArgs"):
        if dataclasses.is_dataclass(getattr(module, name, None)):
            return getattr(module, name)
    return None


def _filled(args, config: dict) -> dict:
    """``config`` with every required field of dataclass ``args`` it lacks guessed."""
    if args is None:
        return config
    try:
        hints = typing.get_type_hints(args)
    except Exception:  # noqa: BLE001 - string annotations naming what the module lacks
        hints = {}
    out = dict(config)
    for field in dataclasses.fields(args):
        missing = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        if missing and field.name not in out:
            out[field.name] = _guess(field, hints)
    return out
