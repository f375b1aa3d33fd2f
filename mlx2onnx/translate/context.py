"""Translation context: MLX value names -> ONNX values, constants, fresh names.

One :class:`Context` lives for one export. Handlers get it as ``ctx`` and use the members
:data:`~.handler_api.HANDLER_API` lists (their inputs, constants, ``ctx.op.X(...)`` and the
helpers of :class:`~.builder.OpsetHelpers`, the export's choices, ``ctx.fail``); the rest
(binding inputs and outputs, the current record, subgraphs, the node and initializer
lists) is the translator's (:mod:`~.dispatch`, :mod:`~.loops`, :mod:`~.assemble`).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Sequence

import mlx.core as mx
import numpy as np
import onnx_ir as ir

from ..capture.symbolic import onnx_dim
from ..capture.trace import Constant, Primitive, TensorSpec, Trace
from ..dtypes import FloatPolicy, array_to_numpy
from ..dtypes import name as dtype_name
from ..errors import ConversionError
from .builder import OpBuilder, OpsetHelpers, infer_dtype
from .dims import DimBuilder
from .markers import PARAMETER, PRIMITIVE_TAG, primitive_tag, value_name
from .settings import ExportSettings


def onnx_layout(spec: TensorSpec, floats: FloatPolicy) -> tuple[ir.DataType, tuple[int, ...]]:
    """The ONNX element type (under the export's float policy) and shape that carry an
    MLX value. complex64 has no ONNX kernels, so a complex value travels as float32 with
    a trailing dimension of 2 (real, imaginary), the layout ONNX ``DFT`` uses; see
    ``op_mappings/fft.py``."""
    if spec.dtype == mx.complex64:
        return ir.DataType.FLOAT, tuple(spec.shape) + (2,)
    return floats.onnx(spec.dtype), tuple(spec.shape)


def is_complex(spec: TensorSpec) -> bool:
    return spec.dtype == mx.complex64


def refuse_complex_io(spec: TensorSpec, what: str) -> None:
    if is_complex(spec):
        raise ConversionError(
            "graph",
            f"{what} {spec.name} is complex64, which ONNX Runtime cannot feed or return: "
            "pass real and imaginary parts as two float32 arrays (mx.real/mx.imag outside the "
            "function, combine with a + 1j * b inside it) and return mx.real(z), mx.imag(z) or mx.abs(z)",
        )


def _fingerprint(raw: np.ndarray) -> int:
    """A cheap content key: all bytes of a small constant, a strided sample of a large one
    (so de-duplicating thousands of same-shaped weights does not compare each pair)."""
    if raw.size <= 4096:
        return hash(raw.tobytes())
    step = raw.size // 4096
    return hash((raw[::step].tobytes(), raw[-64:].tobytes()))


def make_value(name: str, spec: TensorSpec, floats: FloatPolicy) -> ir.Value:
    elem, shape = onnx_layout(spec, floats)
    return ir.Value(name=name, shape=ir_shape(shape), type=ir.TensorType(elem))


def ir_shape(shape) -> ir.Shape:
    """An onnx-ir shape; a dynamic dimension (:class:`~mlx2onnx.capture.symbolic.SymInt`) becomes its dim_param."""
    return ir.Shape([onnx_dim(d) for d in shape])


class Context(DimBuilder, OpsetHelpers):
    def __init__(self, trace: Trace, settings: ExportSettings):
        self.trace = trace
        self.settings = settings
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self._relaid: dict[int, ir.Value] = {}  # id(constant) -> the same constant in another layout
        self.domains: dict[str, int] = {}
        self.values: dict[str, ir.Value] = {}  # MLX name -> ONNX value
        self.graph_inputs: list[ir.Value] = []  # in the trace's input order
        self.specs: dict[str, TensorSpec] = {}  # MLX name -> its shape and dtype
        self.bound: set[int] = set()  # ids of values that carry an MLX spec
        self._constants: dict[str, Constant] = {c.spec.name: c for c in trace.constants}
        self._const_by_shape: dict[tuple, list[tuple[np.ndarray, ir.Value]]] = {}
        self._names: set[str] = set()
        self._current: Primitive | None = None
        self.iteration: ir.Value | None = None  # the loop body's iteration number, as [k]
        self._counter = 0
        self.op = OpBuilder(self)
        DimBuilder.__init__(self)

    @property
    def opset(self) -> int:
        return self.settings.opset

    @property
    def portable(self) -> bool:
        return self.settings.portable

    # -- the export's float policy ------------------------------------------------------
    def carried(self, dtype: mx.Dtype) -> mx.Dtype:
        """The MLX dtype whose ONNX type carries ``dtype`` in this export."""
        return self.settings.floats.carried(dtype)

    def onnx_type(self, dtype: mx.Dtype) -> ir.DataType:
        """The ONNX type that carries MLX dtype ``dtype`` in this export."""
        return self.settings.floats.onnx(dtype)

    def numpy_type(self, dtype: mx.Dtype) -> np.dtype:
        """The NumPy dtype of the ONNX type that carries ``dtype`` in this export."""
        return self.settings.floats.numpy(dtype)

    # -- names ------------------------------------------------------------------------
    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self._names:
            name = f"{base}_{k}"
            k += 1
        self._names.add(name)
        return name

    def release(self, name: str) -> None:
        """Make ``name`` free again (its value was renamed)."""
        self._names.discard(name)

    def _prefix(self) -> str:
        rec = self._current
        return "graph" if rec is None else value_name(rec)

    # -- values -----------------------------------------------------------------------
    def bind_input(self, spec: TensorSpec, name: str) -> ir.Value:
        refuse_complex_io(spec, "graph input")
        value = make_value(self.fresh(name), spec, self.settings.floats)
        self.graph_inputs.append(value)
        self.values[spec.name] = value
        self.specs[spec.name] = spec
        self.bound.add(id(value))
        self.offer_dims(value, spec)
        return value

    def value(self, spec: TensorSpec) -> ir.Value:
        """The ONNX value of an MLX value (a constant becomes an initializer on first use)."""
        if spec.name in self.values:
            return self.values[spec.name]
        constant = self._constants.get(spec.name)
        if constant is None:
            raise ConversionError(
                self._current.name if self._current else "graph",
                f"input {spec.name} is used before any primitive produced it (handler contract broken)",
            )

        source = constant.array
        if self.carried(spec.dtype) != spec.dtype:  # the export's float policy
            source = source.astype(self.carried(spec.dtype))
        array = array_to_numpy(source)
        if is_complex(spec):  # the (real, imaginary) pair layout of onnx_layout()
            array = np.stack([array.real, array.imag], axis=-1).astype(np.float32)
        base = constant.path or (self._const_name(array) if array.size <= 4 else f"const_{spec.name}")
        value = self.const(array, name=base)
        if constant.path:
            value.meta[PARAMETER] = True
        self.values[spec.name] = value
        self.specs[spec.name] = spec
        return value

    def inputs(self, rec: Primitive) -> list[ir.Value]:
        """The ONNX values of the record's inputs, in order."""
        return [self.value(spec) for spec in rec.inputs]

    def constant(self, spec: TensorSpec) -> tuple[np.ndarray, str | None] | None:
        """``(array, parameter path or None)`` when MLX value ``spec`` is a constant (a weight,
        a number the function closes over, a value already made an initializer), else None.
        Reading it makes no initializer."""
        value = self.values.get(spec.name)
        if value is not None:
            return None if value.const_value is None else (value.const_value.numpy(), None)
        constant = self._constants.get(spec.name)
        return None if constant is None else (array_to_numpy(constant.array), constant.path)

    def relaid(self, value: ir.Value, array: Callable[[], np.ndarray]) -> ir.Value:
        """Constant ``value`` stored in another layout: an initializer holding ``array()``
        under ``value``'s own name, made once per value. ``value`` is renamed; left unread,
        the passes drop it."""
        if id(value) not in self._relaid:
            name = value.name
            value.name = self.fresh(f"{name}.replaced")
            self.release(name)
            self._relaid[id(value)] = self.const(array(), name=name)
        return self._relaid[id(value)]

    @staticmethod
    def mark(value: ir.Value, key: str) -> ir.Value:
        """Leave node metadata ``key`` (a :mod:`~.markers` key) on the node that makes
        ``value``, for the passes; returns ``value``."""
        value.producer().metadata_props[key] = "1"
        return value

    @contextlib.contextmanager
    def marking(self, key: str) -> Iterator[None]:
        """Leave node metadata ``key`` on every node emitted inside the block."""
        first = len(self.nodes)
        yield
        for node in self.nodes[first:]:
            node.metadata_props[key] = "1"

    def const(self, array: np.ndarray, name: str | None = None) -> ir.Value:
        """An initializer holding ``array`` (shared with any equal constant already made)."""
        array = np.asarray(array)
        raw = array.reshape(-1).view(np.uint8) if array.size else array.reshape(-1).view(np.uint8)
        key = (array.dtype.str, array.shape, _fingerprint(raw))
        candidates = self._const_by_shape.setdefault(key, [])
        for other, value in candidates:  # equal fingerprints: compare every byte
            if np.array_equal(other.reshape(-1).view(np.uint8), raw):
                return value
        if name is None:
            name = self._const_name(array)
        value = ir.Value(
            name=self.fresh(name),
            shape=ir.Shape(array.shape),
            type=ir.TensorType(ir.DataType.from_numpy(array.dtype)),
            const_value=ir.Tensor(array if array.flags.c_contiguous else np.ascontiguousarray(array)),
        )
        self.initializers.append(value)
        candidates.append((array, value))
        return value

    @staticmethod
    def _const_name(array: np.ndarray) -> str:
        if array.size <= 4:
            text = "_".join(f"{v:g}" if isinstance(v, float) else str(v) for v in array.reshape(-1).tolist())
            text = text.replace("-", "m").replace(".", "p").replace("inf", "inf").replace("+", "")
            return f"c_{array.dtype.name}_{text}" if text else f"c_{array.dtype.name}_empty"
        return f"c_{array.dtype.name}_{'x'.join(map(str, array.shape))}"

    # -- emitting ---------------------------------------------------------------------
    def emit(self, op_type: str, inputs: Sequence, attributes: dict, num_outputs: int, domain: str):
        for i, item in enumerate(inputs):
            if item is not None and not isinstance(item, ir.Value):
                raise TypeError(f"{op_type} input {i} is a {type(item).__name__}; wrap constants with ctx.const()")
        attributes = {k: v for k, v in attributes.items() if v is not None}
        self._counter += 1
        prefix = self._prefix()
        node = ir.Node(
            domain,
            op_type,
            list(inputs),
            attributes=ir.convenience.convert_attributes(attributes),
            num_outputs=num_outputs,
            name=f"{prefix}/{op_type}_{self._counter}",
        )
        if self._current is not None:
            node.metadata_props[PRIMITIVE_TAG] = primitive_tag(self._current)
        if domain:
            self.domains.setdefault(domain, 1)
        for k, out in enumerate(node.outputs):
            out.name = self.fresh(f"{prefix}/{op_type}_{self._counter}" + (f":{k}" if k else ""))
        guess = infer_dtype(op_type, inputs, attributes)
        if guess is not None:
            node.outputs[0].type = ir.TensorType(guess)
        self.nodes.append(node)
        return node.outputs[0] if num_outputs == 1 else tuple(node.outputs)

    # -- per primitive ----------------------------------------------------------------
    @contextlib.contextmanager
    def primitive(self, rec: Primitive) -> Iterator[None]:
        outer, self._current = self._current, rec
        try:
            yield
        finally:
            self._current = outer

    @contextlib.contextmanager
    def subgraph(self, iteration: ir.Value | None = None) -> Iterator[list[ir.Node]]:
        """Emit into a subgraph (a loop body, a branch): the nodes go to the list it
        yields, its values are forgotten afterwards (the graph around reads the node's
        outputs), and in a loop body a :class:`~mlx2onnx.capture.symbolic.StepInt` is
        computed from ``iteration``."""
        saved = (self.nodes, dict(self.values), dict(self._dim_sources), dict(self._dim_values), self.iteration)
        self.nodes = []
        if iteration is not None:
            self.iteration = self.op.Unsqueeze(iteration, self.const(np.asarray([0], np.int64)))
        try:
            yield self.nodes
        finally:
            self.nodes, self.values, self._dim_sources, self._dim_values, self.iteration = saved

    def fail(self, message: str) -> ConversionError:
        """An error for the current record; use as ``raise ctx.fail('...')``."""
        rec = self._current
        return ConversionError(rec.name if rec else "graph", message, rec.index if rec else None)

    def bind_outputs(self, rec: Primitive, outputs: Sequence[ir.Value | None]) -> None:
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        if len(outputs) != len(rec.outputs):
            raise ConversionError(
                rec.name,
                f"handler returned {len(outputs)} value(s) for {len(rec.outputs)} output(s) (handler bug)",
                rec.index,
            )
        for k, (spec, value) in enumerate(zip(rec.outputs, outputs)):
            if value is None:
                continue  # an unused sibling output the handler chose not to compute
            expected, shape = onnx_layout(spec, self.settings.floats)
            if value.dtype is not None and value.dtype != expected:
                raise ConversionError(
                    rec.name,
                    f"output {k} would be {value.dtype.name} but MLX produces {dtype_name(spec.dtype)} "
                    f"(carried as {expected.name}) (handler bug)",
                    rec.index,
                )
            if id(value) not in self.bound and value.producer() is not None and not value.is_graph_input():
                value.name = self._rename(value.name, value_name(rec, k))
                value.type = ir.TensorType(expected)
                value.shape = ir_shape(shape)
                self.bound.add(id(value))
            self.values[spec.name] = value
            self.specs[spec.name] = spec
            self.offer_dims(value, spec)

    def _rename(self, old: str, new: str) -> str:
        self._names.discard(old)
        return self.fresh(new)
