"""The ``mlx2onnx`` command line (:mod:`mlx2onnx.cli.main`)."""

from .app import main

__all__ = ["main"]
