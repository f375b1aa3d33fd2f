"""The interpreter's registry: one MLX evaluator per primitive name
(:mod:`.interpret` runs them; :mod:`.eval_math`, :mod:`.eval_layout` and
:mod:`.eval_special` define them)."""

from __future__ import annotations

from typing import Callable, Sequence

import mlx.core as mx

from ..capture.trace import Primitive

Evaluator = Callable[[Primitive, list, dict], Sequence[mx.array]]


EVALUATORS: dict[str, Evaluator] = {}

# Primitives known to the callback that the interpreter does not evaluate, and why.
SKIPPED: dict[str, str] = {
    "RandomBits": "MLX 0.32 has no Python op for raw threefry bits (mx.random.bits is not exposed)",
    "CustomKernel": "user Metal/CUDA kernels do not run on this device",
}


def evaluator(*names: str):
    def register(fn: Evaluator) -> Evaluator:
        for name in names:
            EVALUATORS[name] = fn
        return fn

    return register


def out_spec(rec: Primitive, k: int = 0):
    return rec.outputs[k]
