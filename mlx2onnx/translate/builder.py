"""The builder facade handlers emit ONNX through: ``ctx.op.Add(a, b)``.

Handlers never touch protobuf. :class:`OpBuilder` turns attribute access into node
construction on an onnx-ir graph under construction; the opset-dependent spellings of
ops (axes as attribute or as input, ...) live in :class:`OpsetHelpers`, nowhere else.
"""

from __future__ import annotations

from typing import Any, Sequence

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from ..capture.symbolic import NeedsStatic, is_dynamic, onnx_dim
from . import kernels
from .opset import FEATURES, has

_BOOL_OUT = frozenset("Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Not IsNaN IsInf".split())
_INT64_OUT = frozenset("Shape Size ArgMax ArgMin NonZero".split())
_SAME_AS_INPUTS = frozenset(
    "Add Sub Mul Div Pow Mod Max Min Neg Abs Sqrt Exp Log Reciprocal Floor Ceil Round Sign "
    "Sin Cos Tan Asin Acos Atan Sinh Cosh Tanh Asinh Acosh Atanh Sigmoid Erf Relu Identity "
    "Reshape Transpose Squeeze Unsqueeze Expand Concat Slice Gather GatherElements GatherND "
    "Flatten Tile Pad MatMul Gemm ReduceSum ReduceMax ReduceMin ReduceProd ReduceMean "
    "ReduceLogSumExp Softmax LogSoftmax CumSum BitwiseAnd BitwiseOr BitwiseXor BitShift "
    "ScatterND ScatterElements Trilu MatMulNBits".split()  # MatMulNBits: com.microsoft, T1 of A
)


def infer_dtype(op_type: str, inputs: Sequence[ir.Value | None], attrs: dict) -> ir.DataType | None:
    """A conservative guess of output 0's element type (None when unsure)."""
    if op_type == "Cast":
        return ir.DataType(attrs["to"])
    if op_type in _BOOL_OUT:
        return ir.DataType.BOOL
    if op_type in _INT64_OUT:
        return ir.DataType.INT64
    if op_type == "Where" and len(inputs) == 3 and inputs[1] is not None:
        return inputs[1].dtype
    if op_type in _SAME_AS_INPUTS and inputs and inputs[0] is not None:
        return inputs[0].dtype
    return None


class OpBuilder:
    """``op.Name(*inputs, _outputs=1, _domain='', **attributes)`` appends one node.

    Returns the output value, or a tuple of them when ``_outputs`` > 1. Inputs are
    :class:`onnx_ir.Value` or ``None`` (an omitted optional input).
    """

    def __init__(self, ctx):  # the export's Context (mlx2onnx.translate.context), which owns the nodes
        self._ctx = ctx

    def __getattr__(self, op_type: str):
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def emit(*inputs, _outputs: int = 1, _domain: str = "", **attributes):
            return self._ctx.emit(op_type, inputs, attributes, _outputs, _domain)

        emit.__name__ = op_type
        return emit


class OpsetHelpers:
    """Ops whose spelling changed between opsets, written once for every target opset."""

    op: OpBuilder
    opset: int
    portable: bool = True  # compute only in (op, dtype) pairs every portable runtime runs

    def has(self, feature: str) -> bool:
        """Whether the target opset has ``feature`` (:data:`~.opset.FEATURES`: the one place
        opset choices are named)."""
        return has(self.opset, feature)

    def has_kernel(self, op_type: str, dtype: mx.Dtype, constraint: str | None = "T") -> bool:
        """Whether onnxruntime's CPU provider runs ``op_type`` on ``dtype`` (type constraint
        ``constraint``) at the target opset (:mod:`~.kernels`: the one place kernel choices
        are read)."""
        return kernels.has_kernel(op_type, dtype, self.opset, constraint)

    def serves(self, op_type: str) -> bool:
        """Whether onnxruntime's CPU provider has a kernel (of any type) for the version of
        ``op_type`` the target opset uses."""
        return kernels.serves(op_type, self.opset)

    def needs(self, feature: str) -> str:
        """The end of a refusal for want of ``feature``: the opset the export targets and the
        one it would need."""
        return f"this export targets opset {self.opset}: export with opset >= {FEATURES[feature]}"

    def carried(self, dtype: mx.Dtype) -> mx.Dtype:  # pragma: no cover
        raise NotImplementedError

    def onnx_type(self, dtype: mx.Dtype) -> ir.DataType:  # pragma: no cover
        raise NotImplementedError

    def numpy_type(self, dtype: mx.Dtype) -> np.dtype:  # pragma: no cover
        raise NotImplementedError

    def const(self, array: np.ndarray, name: str | None = None) -> ir.Value:  # pragma: no cover
        raise NotImplementedError

    # -- constants ------------------------------------------------------------------
    def ints(self, values: Sequence[int] | int) -> ir.Value:
        return self.const(np.asarray(values, dtype=np.int64))

    def scalar(self, value: Any, dtype: mx.Dtype) -> ir.Value:
        """A 0-d constant of MLX dtype ``dtype``."""
        return self.const(np.asarray(value, dtype=self.numpy_type(dtype)))

    # -- opset-dependent spellings -------------------------------------------------
    def reduce(self, op_type: str, x: ir.Value, axes: Sequence[int], keepdims: bool = True) -> ir.Value:
        """ReduceSum/Max/Min/Prod/Mean/LogSumExp/L2 over ``axes``.

        Axes became an input in opset 13 for ReduceSum and in opset 18 for the others.
        """
        keep = int(bool(keepdims))
        axes = list(axes)
        if op_type == "ReduceSum" or self.has("axes as input"):
            return self.op.__getattr__(op_type)(x, self.ints(axes), keepdims=keep)
        return self.op.__getattr__(op_type)(x, axes=axes, keepdims=keep)

    def squeeze(self, x: ir.Value, axes: Sequence[int]) -> ir.Value:
        return self.op.Squeeze(x, self.ints(list(axes)))

    def unsqueeze(self, x: ir.Value, axes: Sequence[int]) -> ir.Value:
        return self.op.Unsqueeze(x, self.ints(list(axes)))

    def reshape(self, x: ir.Value, shape: Sequence[int]) -> ir.Value:
        if any(is_dynamic(d) for d in shape):
            return self._dynamic_reshape(x, shape)
        shape = [int(d) for d in shape]
        if 0 in shape:
            return self.op.Reshape(x, self.ints(shape), allowzero=1)
        return self.op.Reshape(x, self.ints(shape))

    def _dynamic_reshape(self, x: ir.Value, shape: Sequence) -> ir.Value:
        """Reshape to a target with dynamic dims: 0 (copy) where x has the same dim at the
        same axis, the others computed from Shape; never -1, so that ONNX shape inference
        keeps the dimension names."""
        fixed = [int(d) for d in shape if not is_dynamic(d)]
        known = list(x.shape) if x.shape is not None else []
        if 0 in fixed:
            return self.op.Reshape(x, self.ints(list(shape)), allowzero=1)
        target = []
        for axis, d in enumerate(shape):
            same = (
                axis < len(known)
                and isinstance(known[axis], ir.SymbolicDim)
                and is_dynamic(d)
                and known[axis].value == onnx_dim(d)
            )
            target.append(0 if same else d)
        rest = [axis for axis, d in enumerate(target) if is_dynamic(d)]
        if len(rest) == 1:  # ONNX infers one dim (-1) when the graph cannot compute it
            try:
                return self.op.Reshape(x, self.ints(target))
            except NeedsStatic:
                target[rest[0]] = -1
        return self.op.Reshape(x, self.ints(target))

    def split(self, x: ir.Value, sizes: Sequence[int], axis: int) -> tuple[ir.Value, ...]:
        outs = self.op.Split(x, self.ints(list(sizes)), axis=axis, _outputs=len(sizes))
        return outs if isinstance(outs, tuple) else (outs,)

    def empty(self, x: ir.Value, size, shape: Sequence) -> ir.Value:
        """A zero-size tensor of ``x``'s type with ``shape`` (``size``: x's element count)."""
        return self.reshape(self.slice(self.reshape(x, [size]), [0], [0]), shape)

    def slice(self, x, starts, ends, axes=None, steps=None) -> ir.Value:
        args = [x, self.ints(list(starts)), self.ints(list(ends))]
        if axes is not None or steps is not None:
            args.append(self.ints(list(axes if axes is not None else range(len(starts)))))
        if steps is not None:
            args.append(self.ints(list(steps)))
        return self.op.Slice(*args)

    def pad(self, x: ir.Value, pads: Sequence[int], value: ir.Value | None = None, mode: str = "constant"):
        """``pads`` in ONNX layout (all begins, then all ends), full rank."""
        return self.op.Pad(x, self.ints(list(pads)), value, mode=mode)

    def cast(self, x: ir.Value, dtype: mx.Dtype) -> ir.Value:
        target = self.onnx_type(dtype)
        if x.dtype == target:
            return x
        return self.op.Cast(x, to=target)

    def cast_like(self, x: ir.Value, target: ir.DataType) -> ir.Value:
        if x.dtype == target:
            return x
        return self.op.Cast(x, to=target)

    def run(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        dtype: mx.Dtype,
        out_dtype: mx.Dtype | None = None,
        constraint: str | None = "T",
        fixed: Sequence[int] = (),
        **attributes,
    ) -> ir.Value:
        """Emit ``op_type`` on data inputs of MLX dtype ``dtype``, computing in the nearest
        type onnxruntime has a kernel for (see :mod:`mlx2onnx.translate.kernels`), and return the
        result in ``out_dtype`` (default ``dtype``). Inputs at the positions in ``fixed``,
        and inputs of another known type (shapes, axes, conditions), are passed unchanged."""
        work = kernels.compute_dtype(op_type, self.carried(dtype), self.opset, constraint, self.portable)
        data_type = self.onnx_type(dtype)
        cast_inputs = [
            self.cast(v, work) if v is not None and i not in fixed and v.dtype in (None, data_type) else v
            for i, v in enumerate(inputs)
        ]
        result = self.op.__getattr__(op_type)(*cast_inputs, **attributes)
        return self.cast(result, out_dtype or dtype)

    def via(self, op_type: str, dtype: mx.Dtype, build, *inputs: ir.Value) -> ir.Value:
        """``build(*inputs, work)`` on the inputs cast to the dtype onnxruntime has an
        ``op_type`` kernel for (see :meth:`run`), the result cast back to ``dtype``: for
        composites that :meth:`run`'s single op cannot express."""
        work = self.work_dtype(op_type, dtype)
        return self.cast(build(*[self.cast(v, work) for v in inputs], work), dtype)

    def work_dtype(self, op_type: str, dtype: mx.Dtype, constraint: str | None = "T") -> mx.Dtype:
        return kernels.compute_dtype(op_type, self.carried(dtype), self.opset, constraint, self.portable)

    def reduce_via(
        self, op_type: str, x: ir.Value, axes: Sequence[int], dtype: mx.Dtype, keepdims: bool = True
    ) -> ir.Value:
        """:meth:`reduce` computed in a dtype onnxruntime has a kernel for, result in ``dtype``."""
        work = self.work_dtype(op_type, dtype)
        return self.cast(self.reduce(op_type, self.cast(x, work), axes, keepdims), dtype)

    def isnan(self, x: ir.Value, dtype: mx.Dtype) -> ir.Value:
        """IsNaN on a value of MLX dtype ``dtype`` (bool result)."""
        return self.op.IsNaN(self.cast(x, self.work_dtype("IsNaN", dtype, "T1")))

    def isinf(self, x: ir.Value, dtype: mx.Dtype) -> ir.Value:
        return self.op.IsInf(self.cast(x, self.work_dtype("IsInf", dtype, "T1")))
