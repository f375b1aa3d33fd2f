"""tract (Sonos' Rust inference engine) through its Python binding: the model is loaded,
typed, optimised and run; inputs are fed in the graph's input order."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import onnx

from ...errors import VerificationError
from . import arithmetic
from .base import ModelFile, Runner


class TractRunner(Runner):
    name = "tract"

    def __init__(self, source):
        import tract

        self.version = version() or ""
        self._file = ModelFile(source)
        try:
            graph = onnx.load(self._file.path, load_external_data=False).graph
            initializers = {t.name for t in graph.initializer}
            self.input_names = [i.name for i in graph.input if i.name not in initializers]
            self.output_names = [o.name for o in graph.output]
            self.runnable = tract.onnx().load(self._file.path).into_model().into_runnable()
        except Exception as exc:
            self._file.close()
            raise VerificationError(f"tract could not load the model: {_reason(exc)}") from exc

    def arithmetic(self, proto) -> list[arithmetic.Arithmetic]:
        return arithmetic.tract(proto, str(Path(self._file.path).parent))

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        ordered = [np.ascontiguousarray(feeds[n]).reshape(np.shape(feeds[n])) for n in self.input_names]
        try:
            results = self.runnable.run(ordered)
        except Exception as exc:
            raise VerificationError(_reason(exc)) from exc
        by_name = dict(zip(self.output_names, results))
        return [by_name[n].to_numpy() for n in names]

    def close(self) -> None:
        self.runnable = None
        self._file.close()


def _reason(exc: Exception) -> str:
    """tract's error chain, most specific cause last, on one line."""
    text = str(exc).split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != "Caused by:"]
    return " / ".join(lines) if lines else type(exc).__name__


def version() -> str | None:
    try:
        from importlib.metadata import version as dist_version

        import tract  # noqa: F401
    except ImportError:
        return None
    return dist_version("tract")
