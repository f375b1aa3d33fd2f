"""Benchmark models, with random weights: an mlx-lm llama, ResNet-18, a 50M MLP, a 1B llama.

Each ``make_<name>()`` returns ``(function, example_inputs)``; the function closes over
an ``nn.Module`` whose parameters are evaluated.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten


def parameter_bytes(module: nn.Module) -> int:
    return sum(v.nbytes for _, v in tree_flatten(module.parameters()))


def parameter_count(module: nn.Module) -> int:
    return sum(v.size for _, v in tree_flatten(module.parameters()))


# -- mlx-lm llama -----------------------------------------------------------------------
def llama_args(hidden=512, layers=4, heads=8, kv_heads=4, ffn=1408, vocab=32000):
    from mlx_lm.models import llama

    return llama.ModelArgs(
        model_type="llama",
        hidden_size=hidden,
        num_hidden_layers=layers,
        intermediate_size=ffn,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        rms_norm_eps=1e-5,
        vocab_size=vocab,
        tie_word_embeddings=False,
    )


def make_llama(tokens: int = 128, dtype=mx.float32, **config):
    """The issue's llama: hidden 512, 4 layers, 8/4 heads, ffn 1408, vocab 32000 (44.6M)."""
    from mlx_lm.models import llama

    mx.random.seed(0)
    model = llama.Model(llama_args(**config))
    if dtype != mx.float32:
        model.set_dtype(dtype)
    mx.eval(model.parameters())
    ids = mx.random.randint(0, model.args.vocab_size, (1, tokens)).astype(mx.int32)
    return model, (lambda x: model(x)), (ids,)


# ~1.0B parameters (TinyLlama-like widths, 20 layers, untied head).
BILLION = dict(hidden=2048, layers=20, heads=32, kv_heads=4, ffn=5632, vocab=32000)


def make_llama_1b(dtype=mx.bfloat16, tokens: int = 16):
    return make_llama(tokens=tokens, dtype=dtype, **BILLION)


# -- ResNet-18 (NHWC, inference-mode BatchNorm) -------------------------------------------
class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm(cout))

    def __call__(self, x):
        y = nn.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return nn.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm(64)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        widths = [64, 128, 256, 512]
        blocks, cin = [], 64
        for i, w in enumerate(widths):
            blocks += [_Block(cin, w, 1 if i == 0 else 2), _Block(w, w, 1)]
            cin = w
        self.blocks = blocks
        self.fc = nn.Linear(512, classes)

    def __call__(self, x):
        x = self.pool(nn.relu(self.bn1(self.conv1(x))))
        for block in self.blocks:
            x = block(x)
        return self.fc(mx.mean(x, axis=(1, 2)))


def make_resnet18(size: int = 224, batch: int = 1):
    mx.random.seed(0)
    model = ResNet18()
    model.eval()
    mx.eval(model.parameters())
    x = mx.random.normal((batch, size, size, 3))
    return model, (lambda x: model(x)), (x,)


# -- a 50M-parameter MLP --------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self, width: int = 4096, layers: int = 3):
        super().__init__()
        self.layers = [nn.Linear(width, width) for _ in range(layers)]

    def __call__(self, x):
        for k, layer in enumerate(self.layers):
            x = layer(x)
            if k + 1 < len(self.layers):
                x = nn.gelu(x)
        return x


def make_mlp(batch: int = 16):
    mx.random.seed(0)
    model = MLP()
    mx.eval(model.parameters())
    return model, (lambda x: model(x)), (mx.random.normal((batch, 4096)),)


MODELS = {"llama": make_llama, "resnet18": make_resnet18, "mlp": make_mlp}
