"""A BERT-style transformer encoder: token + position embeddings, pre-norm blocks with
multi-head self-attention under a padding mask, GELU MLP, and a pooled output."""

from __future__ import annotations

import math

import mlx.core as mx
import mlx.nn as nn


class EncoderLayer(nn.Module):
    def __init__(self, dims: int, heads: int, mlp_dims: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dims)
        self.qkv = nn.Linear(dims, 3 * dims)
        self.out = nn.Linear(dims, dims)
        self.norm2 = nn.LayerNorm(dims)
        self.fc1 = nn.Linear(dims, mlp_dims)
        self.fc2 = nn.Linear(mlp_dims, dims)

    def __call__(self, x: mx.array, bias: mx.array) -> mx.array:
        B, L, D = x.shape
        q, k, v = mx.split(self.qkv(self.norm1(x)), 3, axis=-1)
        split = lambda t: t.reshape(B, L, self.heads, -1).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(D // self.heads) + bias
        attn = mx.softmax(scores, axis=-1) @ v
        x = x + self.out(attn.transpose(0, 2, 1, 3).reshape(B, L, D))
        return x + self.fc2(nn.gelu(self.fc1(self.norm2(x))))


class Encoder(nn.Module):
    def __init__(self, vocab: int = 100, dims: int = 32, heads: int = 4, layers: int = 2, max_len: int = 512):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dims)
        self.positions = nn.Embedding(max_len, dims)
        self.layers = [EncoderLayer(dims, heads, 2 * dims) for _ in range(layers)]
        self.norm = nn.LayerNorm(dims)
        self.pooler = nn.Linear(dims, dims)

    def __call__(self, input_ids: mx.array, attention_mask: mx.array):
        L = input_ids.shape[1]
        x = self.tokens(input_ids) + self.positions(mx.arange(L))
        # 1 = attend, 0 = padding; padded keys get a large negative bias (finite in float16).
        keep = attention_mask.astype(mx.bool_)[:, None, None, :]
        bias = mx.where(keep, mx.array(0.0, x.dtype), mx.array(-1e4, x.dtype))
        for layer in self.layers:
            x = layer(x, bias)
        hidden = self.norm(x)
        pooled = mx.tanh(self.pooler(hidden[:, 0]))
        return hidden, pooled


def build(seed: int = 0, **config) -> Encoder:
    mx.random.seed(seed)
    model = Encoder(**config)
    mx.eval(model.parameters())
    return model


def example(seed: int = 0):
    model = build(seed)
    key = mx.random.key(seed + 1)
    input_ids = mx.random.randint(0, 100, (2, 8), key=key).astype(mx.int32)
    attention_mask = mx.array([[1] * 8, [1] * 5 + [0] * 3], dtype=mx.int32)
    return model, (input_ids,), {"attention_mask": attention_mask}
