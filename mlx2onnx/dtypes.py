"""MLX dtypes and their ONNX and NumPy counterparts, and zero-copy array access."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import ml_dtypes
import mlx.core as mx
import numpy as np
import onnx_ir as ir

_TABLE = [
    # mx dtype, ONNX data type, NumPy dtype
    (mx.bool_, ir.DataType.BOOL, np.dtype(np.bool_)),
    (mx.uint8, ir.DataType.UINT8, np.dtype(np.uint8)),
    (mx.uint16, ir.DataType.UINT16, np.dtype(np.uint16)),
    (mx.uint32, ir.DataType.UINT32, np.dtype(np.uint32)),
    (mx.uint64, ir.DataType.UINT64, np.dtype(np.uint64)),
    (mx.int8, ir.DataType.INT8, np.dtype(np.int8)),
    (mx.int16, ir.DataType.INT16, np.dtype(np.int16)),
    (mx.int32, ir.DataType.INT32, np.dtype(np.int32)),
    (mx.int64, ir.DataType.INT64, np.dtype(np.int64)),
    (mx.float16, ir.DataType.FLOAT16, np.dtype(np.float16)),
    (mx.float32, ir.DataType.FLOAT, np.dtype(np.float32)),
    (mx.float64, ir.DataType.DOUBLE, np.dtype(np.float64)),
    (mx.bfloat16, ir.DataType.BFLOAT16, np.dtype(ml_dtypes.bfloat16)),
    (mx.complex64, ir.DataType.COMPLEX64, np.dtype(np.complex64)),
]

_MX_TO_IR = {m: o for m, o, _ in _TABLE}
_MX_TO_NP = {m: n for m, _, n in _TABLE}
_NP_TO_MX = {n: m for m, _, n in _TABLE}
_IR_TO_MX = {o: m for m, o, _ in _TABLE}

FLOATS = frozenset({mx.float16, mx.float32, mx.float64, mx.bfloat16})
SIGNED = frozenset({mx.int8, mx.int16, mx.int32, mx.int64})
UNSIGNED = frozenset({mx.uint8, mx.uint16, mx.uint32, mx.uint64})
INTEGERS = SIGNED | UNSIGNED


def name(dtype: mx.Dtype) -> str:
    """'float32' for mx.float32."""
    return str(dtype).rsplit(".", 1)[-1]


def to_onnx(dtype: mx.Dtype) -> ir.DataType:
    """The ONNX type of ``dtype`` itself (an export may carry it in another: :class:`FloatPolicy`)."""
    return _MX_TO_IR[dtype]


def to_numpy(dtype: mx.Dtype) -> np.dtype:
    """The NumPy dtype of ``dtype`` itself."""
    return _MX_TO_NP[dtype]


@dataclass(frozen=True)
class FloatPolicy:
    """How an export carries MLX float dtypes in the ONNX graph: ``{bfloat16: float32}``
    carries bfloat16 values as float32 (for runtimes without bfloat16 kernels); a dtype
    the policy does not name is carried as itself."""

    carry: tuple[tuple[mx.Dtype, mx.Dtype], ...] = ()
    emulate: tuple[mx.Dtype, ...] = ()  # carried dtypes rounded after every op, as MLX rounds them

    @classmethod
    def of(cls, mapping: Mapping[mx.Dtype, mx.Dtype], emulate=()) -> "FloatPolicy":
        return cls(tuple(mapping.items()), tuple(emulate))

    def emulates(self, dtype: mx.Dtype) -> bool:
        """Whether ``dtype`` is carried wider and rounded to itself after every op."""
        return dtype in self.emulate

    def carried(self, dtype: mx.Dtype) -> mx.Dtype:
        """The MLX dtype whose ONNX type carries ``dtype``."""
        for source, target in self.carry:
            if source == dtype:
                return target
        return dtype

    def onnx(self, dtype: mx.Dtype) -> ir.DataType:
        return _MX_TO_IR[self.carried(dtype)]

    def numpy(self, dtype: mx.Dtype) -> np.dtype:
        return _MX_TO_NP[self.carried(dtype)]


def from_numpy(dtype: np.dtype) -> mx.Dtype:
    return _NP_TO_MX[np.dtype(dtype)]


def from_onnx(dtype: ir.DataType) -> mx.Dtype:
    return _IR_TO_MX[dtype]


def is_float(dtype: mx.Dtype) -> bool:
    return dtype in FLOATS


def is_integer(dtype: mx.Dtype) -> bool:
    return dtype in INTEGERS


def is_unsigned(dtype: mx.Dtype) -> bool:
    return dtype in UNSIGNED


def array_to_numpy(array: mx.array) -> np.ndarray:
    """A NumPy view of an evaluated MLX array, without copying where MLX allows it.

    bfloat16 has no buffer-protocol format, so it is read as uint16 and viewed as
    ml_dtypes.bfloat16 (the bits are unchanged).
    """
    if array.dtype == mx.bfloat16:
        bits = array.view(mx.uint16)
        mx.eval(bits)
        return np.asarray(memoryview(bits)).view(ml_dtypes.bfloat16).reshape(array.shape)
    mx.eval(array)
    if array.size == 0:
        return np.zeros(array.shape, dtype=_MX_TO_NP[array.dtype])
    return np.asarray(memoryview(array)).reshape(array.shape)


def numpy_to_array(value: np.ndarray) -> mx.array:
    """An MLX array with the same dtype and bits as ``value`` (bfloat16 included)."""
    value = np.ascontiguousarray(value)
    if value.dtype == ml_dtypes.bfloat16:
        return mx.array(value.view(np.uint16)).view(mx.bfloat16)
    return mx.array(value)
