"""OpenVINO on the CPU, compiled with the user's properties (none: its defaults). Its defaults
trade precision for speed: inference precision bf16 on CPUs with bfloat16 units, and the
activations of a MatMul by low-bit weights quantized to int8 in groups of 32; the runner
reads both back from the compiled model (:func:`arithmetic.openvino`). :data:`EXACT`
holds the properties that make it compute MLX's float32 numbers."""

from __future__ import annotations

from typing import Mapping, Sequence

import ml_dtypes
import numpy as np

from ...errors import VerificationError
from . import arithmetic
from .base import ModelFile, Runner

EXACT = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}


class OpenvinoRunner(Runner):
    name = "openvino"

    def __init__(self, source, options: Mapping[str, str] | None = None):
        import openvino as ov

        self.version = version() or ""
        self.options = dict(options or {})
        self._file = ModelFile(source)
        try:
            core = ov.Core()
            self.compiled = core.compile_model(self._file.path, "CPU", self.options)
        except Exception as exc:
            self._file.close()
            raise VerificationError(f"openvino could not compile the model: {_first_line(exc)}") from exc
        self.output_names = [o.get_any_name() for o in self.compiled.outputs]
        self._request = self.compiled.create_infer_request()

    def arithmetic(self, proto) -> list[arithmetic.Arithmetic]:
        precision = self.compiled.get_property("INFERENCE_PRECISION_HINT")
        group = int(self.compiled.get_property("DYNAMIC_QUANTIZATION_GROUP_SIZE"))
        return arithmetic.openvino(proto, precision.to_string(), group)

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        import openvino as ov

        inputs = {}
        for name, array in feeds.items():
            array = np.ascontiguousarray(array).reshape(np.shape(array))
            if array.dtype == ml_dtypes.bfloat16:
                inputs[name] = ov.Tensor(array.view(np.uint16), array.shape, ov.Type.bf16)
            else:
                inputs[name] = ov.Tensor(array, shared_memory=False)
        self._request.infer(inputs)
        out = []
        for name in names:
            tensor = self._request.get_tensor(self.compiled.output(name))
            if tensor.element_type == ov.Type.bf16:
                bits = np.array(tensor.data, copy=True).view(np.uint16)
                out.append(bits.view(ml_dtypes.bfloat16).reshape(tuple(tensor.shape)))
            else:
                out.append(np.array(tensor.data, copy=True).reshape(tuple(tensor.shape)))
        return out

    def close(self) -> None:
        self._request = None
        self.compiled = None
        self._file.close()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def version() -> str | None:
    try:
        import openvino
    except ImportError:
        return None
    return openvino.get_version().split("-")[0]
