"""onnxruntime sessions for the parity check: opening one, feeding it, reading bfloat16 back."""

from __future__ import annotations

from typing import Mapping

import ml_dtypes
import numpy as np
import onnx

from ..errors import VerificationError

LEVELS = ("all", "extended", "basic", "disabled")


def session_options(level: str = "all", config: Mapping[str, str] | None = None):
    """``onnxruntime.SessionOptions`` at optimisation ``level`` with the session config
    entries ``config`` (the user's; none by default, as a plain session has none)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }[level]
    for key, value in (config or {}).items():
        options.add_session_config_entry(str(key), str(value))
    return options


def open_session(
    source, level: str = "all", providers=("CPUExecutionProvider",), config: Mapping[str, str] | None = None
):
    """An ``onnxruntime.InferenceSession`` of ``source`` (a path, or serialised bytes) with
    the session config entries ``config``."""
    import onnxruntime as ort

    try:
        return ort.InferenceSession(source, session_options(level, config), providers=list(providers))
    except Exception as exc:
        raise VerificationError(f"onnxruntime could not run the model: {exc}") from exc


_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(bfloat16)": ml_dtypes.bfloat16,
}
# the NumPy type of every input a graph of ours declares (feeds made from its metadata)
NUMPY_TYPES = {**_ORT_TYPES, "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def cast_to(feeds: Mapping[str, np.ndarray], declared: Mapping[str, object]) -> dict[str, np.ndarray]:
    """Float feeds cast to the NumPy float type ``declared`` names for them (None: kept)."""
    out = {}
    for name, array in feeds.items():
        target = declared.get(name)
        is_float = array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16
        out[name] = array.astype(target) if target is not None and is_float and array.dtype != target else array
    return out


def as_declared_types(session, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Cast float feeds to the types the model declares (an export's float policy may
    carry bfloat16 inputs as float32, for example)."""
    return cast_to(feeds, {i.name: _ORT_TYPES.get(i.type) for i in session.get_inputs()})


def run_session(session, output_names: list[str], feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """``session.run`` that also takes and returns bfloat16 (as ml_dtypes arrays)."""
    import ctypes

    import onnxruntime as ort

    values = {}
    for key, array in feeds.items():
        array = np.ascontiguousarray(array).reshape(np.shape(array))  # ascontiguousarray makes 0-d arrays 1-d
        if array.dtype == ml_dtypes.bfloat16:
            values[key] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                array.view(np.uint16), onnx.TensorProto.BFLOAT16
            )
        else:
            values[key] = ort.OrtValue.ortvalue_from_numpy(array)
    results = []
    for out in session.run_with_ort_values(output_names, values):
        if out.data_type() == "tensor(bfloat16)":
            shape = tuple(out.shape())
            count = int(np.prod(shape, dtype=np.int64))
            if count:
                raw = (ctypes.c_uint16 * count).from_address(out.data_ptr())
                bits = np.frombuffer(raw, dtype=np.uint16, count=count).copy()
            else:
                bits = np.zeros(0, np.uint16)
            results.append(bits.view(ml_dtypes.bfloat16).reshape(shape))
        else:
            results.append(out.numpy())
    return results
