"""Reference models, defined in code (no downloads), shipped as ``mlx2onnx.models``.

Each entry of :data:`REFERENCE_MODELS` is a function ``example(seed=0)`` returning
``(model, args, kwargs)``: an evaluated ``mlx.nn.Module`` and example inputs in
``mx.export_function``'s convention, ready for ``mlx2onnx.export(model, *args, **kwargs)``.
"""

from __future__ import annotations

from typing import Callable

from . import encoder, llama, mlp

REFERENCE_MODELS: dict[str, Callable] = {
    "mlp": mlp.example,
    "encoder": encoder.example,
    "llama": llama.example,
}


def example(name: str, seed: int = 0):
    """``(model, args, kwargs)`` for the reference model ``name``."""
    try:
        make = REFERENCE_MODELS[name]
    except KeyError:
        raise KeyError(f"unknown reference model {name!r}; choose one of {sorted(REFERENCE_MODELS)}") from None
    return make(seed=seed)
