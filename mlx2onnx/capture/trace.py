"""The records of one trace as plain, immutable data: what :func:`mlx2onnx.capture.capture`
returns and every later stage reads. Nothing here knows about ONNX.

A trace's records are of two kinds (``record.kind``), each translated by its own handler:

- :class:`Primitive` (``"primitive"``): one MLX primitive as the callback reported it;
  handlers are registered by primitive name.
- :class:`LoopRecord` (``"loop"``): a Python loop over a dynamic size that the exporter
  recovered from unrolled traces (:mod:`mlx2onnx.capture.loops`); MLX has no such
  primitive. Its body is a trace of its own, whose records are translated the same way.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mlx.core as mx

from . import records
from .symbolic import NeedsStatic


@dataclass(frozen=True)
class TensorSpec:
    """One MLX value: its callback name, shape and dtype."""

    name: str
    shape: tuple[int, ...]
    dtype: mx.Dtype

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)  # a SymInt when a dimension is dynamic


@dataclass(frozen=True)
class Primitive:
    """One primitive record: ``name``, ``arguments`` as MLX reports them, inputs, outputs."""

    index: int
    name: str
    arguments: tuple
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    kind: ClassVar[str] = "primitive"
    nested: ClassVar[tuple] = ()  # the records this one holds (none)

    @property
    def args(self) -> tuple:
        """The arguments as a named tuple of the records table (:mod:`~mlx2onnx.capture.records`):
        ``kind, axes = rec.args`` or ``rec.args.axes``, enum codes as their IntEnum."""
        return records.decode(self.name, self.arguments)


@dataclass(frozen=True)
class LoopRecord:
    """A loop recovered from unrolled traces: ``body`` runs ``trips`` times (a size,
    :class:`~mlx2onnx.capture.symbolic.SymInt`, once merged). The body's inputs are the
    ``carried`` values, then the outside values it reads; its outputs are the carried
    values' next values, then the per-iteration values the loop stacks. The record's
    inputs are the carried values' first values, then the same outside values; its
    outputs the carried values' last values, then the stacked ones (iterations first)."""

    index: int
    trips: Any
    body: "Trace"
    carried: int
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    kind: ClassVar[str] = "loop"
    name: ClassVar[str] = "Loop"  # in messages and node names; MLX has no primitive of this name

    @property
    def nested(self) -> tuple:
        return self.body.primitives


@dataclass(frozen=True)
class Constant:
    """An evaluated array the function closes over (a weight or a Python number)."""

    spec: TensorSpec
    array: mx.array = field(repr=False, compare=False)
    path: str | None = None  # module parameter path, when the array is a parameter


@dataclass(frozen=True)
class GraphInput:
    """A graph input: the MLX value and how the function receives it."""

    spec: TensorSpec
    label: str  # parameter name, keyword, or input_N
    position: int | None  # index among the positional arrays, None for a keyword
    keyword: str | None


@dataclass(frozen=True)
class GraphOutput:
    spec: TensorSpec
    label: str | None  # key path when the function returned a dict, else None


_NARROW = (mx.bfloat16, mx.float16)  # narrowest first


@dataclass(frozen=True)
class Trace:
    inputs: tuple[GraphInput, ...]
    outputs: tuple[GraphOutput, ...]
    constants: tuple[Constant, ...]
    primitives: tuple[Primitive | LoopRecord, ...]
    device: str
    function_name: str

    def all_records(self):
        """Every record, and after a record the records it holds (a loop's body), depth first."""
        return _walk(self.primitives)

    def primitive_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for prim in self.primitives:
            counts[prim.name] = counts.get(prim.name, 0) + 1
        return counts

    def producers(self) -> dict[str, Primitive]:
        """Value name -> the record that produces it."""
        return {o.name: p for p in self.primitives for o in p.outputs}

    def precision(self, name: str) -> mx.Dtype | None:
        """The narrowest float dtype (bfloat16, then float16) that graph output ``name`` was
        rounded to on its way from the inputs, when it is wider itself; else None.

        A float32 output computed from bfloat16 activations carries their rounding: two
        correct implementations that sum in different orders round an intermediate to
        neighbouring bfloat16 values (2^-8 apart, relative), and the output inherits that
        difference. It is compared under that dtype's tolerance, not float32's. Values
        derived from constants alone (weights cast to float32) do not count.
        """
        own = next((o.spec for o in self.outputs if o.spec.name == name), None)
        if own is None or own.dtype not in (mx.float32, mx.float64):
            return None
        found = self._narrowed.get(name, frozenset())
        return next((d for d in _NARROW if d in found), None)

    @functools.cached_property
    def _narrowed(self) -> dict[str, frozenset]:
        """Value name -> the narrow float dtypes it was computed through, for the values
        computed from a graph input (one pass over the records)."""
        reach: dict[str, frozenset] = {i.spec.name: frozenset() for i in self.inputs}
        for record in self.primitives:
            came = [reach[s.name] for s in record.inputs if s.name in reach]
            if not came:  # constants only
                continue
            passed = frozenset().union(*came)
            for spec in record.outputs:
                reach[spec.name] = passed | {spec.dtype} if spec.dtype in _NARROW else passed
        return reach

    def order_free_axis(self, name: str) -> int | None:
        """The axis along which value ``name`` holds an unordered set, or None.

        MLX's Partition/ArgPartition (and topk = Partition + Slice of the last k) leave the
        elements before and after the k-th in an implementation-defined order; the export's
        full sort is an equally valid result. A value read straight from one, or through
        Slices that take each unordered run whole or not at all, is the same *set* along the
        axis in any correct implementation, so the check compares it sorted along that axis.
        """
        producer = self.producers()
        slices = []
        record = producer.get(name)
        while record is not None and record.name == "Slice":
            slices.append(record)
            record = producer.get(record.inputs[0].name)
        if record is None or record.name not in ("Partition", "ArgPartition"):
            return None
        try:
            return _whole_runs_axis(record, slices)
        except (TypeError, NeedsStatic):  # sizes of a dynamic export: only topk's own slice is read symbolically
            axis = int(record.arguments[1]) % len(record.inputs[0].shape)
            if not slices:
                return axis
            if (
                len(slices) == 1
                and str(slices[0].arguments[0][axis]) == str(record.arguments[0])
                and all(int(v) == 1 for v in slices[0].arguments[2])
            ):
                return axis
            return None


def _walk(records):
    for record in records:
        yield record
        yield from _walk(record.nested)


def _whole_runs_axis(record, slices) -> int | None:
    kth, axis = (int(a) for a in record.arguments[:2])
    axis %= len(record.inputs[0].shape)
    size = int(record.inputs[0].shape[axis])
    kth %= max(size, 1)
    runs = [(0, kth), (kth + 1, size)]  # the unordered runs, as [start, stop) in the current view
    for rec in reversed(slices):
        start, stop, strides = (list(a) for a in rec.arguments[:3])
        dim = int(rec.inputs[0].shape[axis])
        a, b, step = int(start[axis]), int(stop[axis]), int(strides[axis])
        a, b = (max(0, min(dim, v + dim if v < 0 else v)) for v in (a, b))
        if step != 1:
            return None
        for lo, hi in runs:
            if lo < hi and not (a <= lo and hi <= b) and max(a, lo) < min(b, hi):
                return None  # the slice cuts an unordered run: no order-free reading of it
        runs = [(max(lo, a) - a, min(hi, b) - a) for lo, hi in runs if a <= lo and hi <= b]
    return axis
