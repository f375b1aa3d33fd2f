"""onnxruntime for Python: the default runtime of the parity check."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..session import open_session, run_session
from . import arithmetic
from .base import Runner


class OnnxruntimeRunner(Runner):
    """``options`` are session config entries (``session.qdq_matmulnbits_accuracy_level``, ...)."""

    name = "onnxruntime"

    def __init__(
        self,
        source,
        level: str = "all",
        providers: Sequence[str] = ("CPUExecutionProvider",),
        options: Mapping[str, str] | None = None,
    ):
        import onnxruntime

        self.version = onnxruntime.__version__
        self.level, self.options = level, dict(options or {})
        self.session = open_session(source, level, providers, self.options)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def arithmetic(self, proto) -> list[arithmetic.Arithmetic]:
        return arithmetic.onnxruntime(proto, self.options, self.level)

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        return run_session(self.session, list(names), feeds)


def version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__
