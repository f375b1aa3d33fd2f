"""A multilayer perceptron classifier: Linear-ReLU-Linear-GELU-Linear-log_softmax."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn


class MLP(nn.Module):
    def __init__(self, in_dims: int = 32, hidden: int = 64, classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_dims, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, classes)

    def __call__(self, x: mx.array) -> mx.array:
        x = nn.relu(self.fc1(x))
        x = nn.gelu(self.fc2(x))
        return nn.log_softmax(self.head(x), axis=-1)


def build(seed: int = 0, **config) -> MLP:
    mx.random.seed(seed)
    model = MLP(**config)
    mx.eval(model.parameters())
    return model


def example(seed: int = 0):
    model = build(seed)
    x = mx.random.normal((4, 32), key=mx.random.key(seed + 1))
    return model, (x,), {}
