"""A small llama-style decoder LM: token embedding, RMSNorm, rotary embeddings,
grouped-query causal attention, SwiGLU MLP and a head tied to the embedding."""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import mlx.nn as nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 128
    hidden_size: int = 32
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.heads, self.kv_heads = cfg.heads, cfg.kv_heads
        self.head_dim = cfg.hidden_size // cfg.heads
        self.scale = self.head_dim**-0.5
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * self.head_dim, cfg.hidden_size, bias=False)
        self.rope = nn.RoPE(self.head_dim, traditional=False, base=cfg.rope_theta)

    def __call__(self, x: mx.array) -> mx.array:
        B, L, _ = x.shape
        q = self.q_proj(x).reshape(B, L, self.heads, -1).transpose(0, 2, 1, 3)
        k = self.k_proj(x).reshape(B, L, self.kv_heads, -1).transpose(0, 2, 1, 3)
        v = self.v_proj(x).reshape(B, L, self.kv_heads, -1).transpose(0, 2, 1, 3)
        q, k = self.rope(q), self.rope(k)
        out = mx.fast.scaled_dot_product_attention(q, k, v, scale=self.scale, mask="causal")
        return self.o_proj(out.transpose(0, 2, 1, 3).reshape(B, L, -1))


class MLP(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def __call__(self, x: mx.array) -> mx.array:
        return self.down_proj(nn.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)

    def __call__(self, x: mx.array) -> mx.array:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaLM(nn.Module):
    def __init__(self, cfg: LlamaConfig = LlamaConfig()):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = [Block(cfg) for _ in range(cfg.layers)]
        self.norm = nn.RMSNorm(cfg.hidden_size, eps=cfg.norm_eps)

    def __call__(self, input_ids: mx.array) -> mx.array:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.embed_tokens.as_linear(self.norm(x))


def build(seed: int = 0, **config) -> LlamaLM:
    mx.random.seed(seed)
    model = LlamaLM(LlamaConfig(**config))
    mx.eval(model.parameters())
    return model


def example(seed: int = 0):
    model = build(seed)
    input_ids = mx.random.randint(0, 128, (2, 12), key=mx.random.key(seed + 1)).astype(mx.int32)
    return model, (input_ids,), {}
