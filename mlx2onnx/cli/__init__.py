"""The ``mlx2onnx`` command line: :func:`main`, the console script (:mod:`.app`)."""

from .app import main

__all__ = ["main"]
