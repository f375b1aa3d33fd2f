"""onnxruntime for Python: the default runtime of the parity check."""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ..session import open_session, run_session
from .base import Runner


class OnnxruntimeRunner(Runner):
    name = "onnxruntime"

    def __init__(self, source, level: str = "all", providers: Sequence[str] = ("CPUExecutionProvider",)):
        import onnxruntime

        self.version = onnxruntime.__version__
        self.session = open_session(source, level, providers)
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        return run_session(self.session, list(names), feeds)


def version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime.__version__
