"""What every runtime adapter offers: run named feeds, return the named outputs as numpy."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx

from ..session import cast_to
from .arithmetic import Arithmetic

_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.BFLOAT16: ml_dtypes.bfloat16,
}


def declared_feeds(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cast float feeds to the float types the model's inputs declare (an export's float
    policy may carry bfloat16 inputs as float32, for example); others pass unchanged."""
    return cast_to(feeds, {i.name: _FLOAT_TYPES.get(i.type.tensor_type.elem_type) for i in proto.graph.input})


class Runner:
    """An open model in one runtime, opened with the user's ``options`` (none: the runtime's
    defaults). ``run`` takes feeds by input name and returns the outputs named in
    ``names``, in that order; ``arithmetic`` says where the runtime computes ``proto`` with
    less precision than MLX; ``close`` frees the runtime's resources."""

    name: str = ""
    version: str = ""
    options: Mapping[str, str] = {}

    def arithmetic(self, proto: onnx.ModelProto) -> list[Arithmetic]:
        return []

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class ModelFile:
    """A model as a file path: the given path, or the bytes written to a private temporary
    folder that ``close`` removes (runtimes other than onnxruntime open files only)."""

    def __init__(self, source: str | os.PathLike | bytes):
        self._folder = None
        if isinstance(source, (bytes, bytearray)):
            self._folder = tempfile.TemporaryDirectory(prefix="mlx2onnx-run-")
            self.path = str(Path(self._folder.name) / "model.onnx")
            Path(self.path).write_bytes(bytes(source))
        else:
            self.path = str(source)

    def close(self) -> None:
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None
