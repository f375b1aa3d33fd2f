"""Capture: trace an MLX function into plain, immutable records (no ONNX here).

:mod:`~mlx2onnx.capture.tracing` wraps ``mx.export_function``; :mod:`~mlx2onnx.capture.records`
names each primitive's arguments; :mod:`~mlx2onnx.capture.dynamic` traces at several sizes
and merges the traces with the symbolic integers of :mod:`~mlx2onnx.capture.symbolic`.
"""

from .dynamic import Dim, capture_dynamic
from .trace import Trace
from .tracing import capture

__all__ = ["Dim", "Trace", "capture", "capture_dynamic"]
