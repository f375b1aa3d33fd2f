"""The metadata an export writes into its model: one key each, one writer
(:func:`describe_export`) and one validating reader per key.

A model file is input the checker does not control: every reader here checks the shape
of what it reads (types, ranges, sizes) and raises :class:`~mlx2onnx.errors.VerificationError`
naming the key and what is wrong, so a hostile or hand-edited file cannot make the
parity check allocate terabytes, divide by zero or fail with a raw ``KeyError``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import mlx.core as mx
import onnx
import onnx_ir as ir

from .. import dtypes
from ..capture.symbolic import Plan
from ..capture.trace import Trace
from ..dtypes import FloatPolicy
from ..errors import VerificationError

IO_METADATA_KEY = "mlx2onnx.io"
POLICY_METADATA_KEY = "mlx2onnx.dtype_policy"
PASSES_METADATA_KEY = "mlx2onnx.passes"
DYNAMIC_METADATA_KEY = "mlx2onnx.dynamic"
DECODER_METADATA_KEY = "mlx2onnx.decoder"  # an LLM's prefill/decode graphs: lengths, batch, layers (llm.decoder)

# The largest size a dynamic symbol may take in a check (the model may admit more; the
# check draws inputs of this size at most), and the most elements one fed input may have.
MAX_CHECK_SIZE = 1 << 20
MAX_CHECK_ELEMENTS = 1 << 28


def describe_export(
    model: ir.Model,
    trace: Trace,
    input_names: Sequence[str],
    output_names: Sequence[str],
    *,
    floats: FloatPolicy,
    plan: Plan | None = None,
    passes: Mapping[str, int] | None = None,
) -> None:
    """Write every key an export carries into ``model``: how its inputs and outputs map to
    the function's (:data:`IO_METADATA_KEY`), the MLX that traced it, its dynamic symbols
    (:data:`DYNAMIC_METADATA_KEY`), what each pass rewrote (:data:`PASSES_METADATA_KEY`)
    and its float policy (:data:`POLICY_METADATA_KEY`)."""
    outputs = []
    for out, name in zip(trace.outputs, output_names):
        entry = {"name": name, "key": out.label}
        axis = trace.order_free_axis(out.spec.name)
        if axis is not None:
            entry["order_free_axis"] = axis
        precision = trace.precision(out.spec.name)
        if precision is not None:  # computed through bfloat16/float16 values: compared under that tolerance
            entry["precision"] = dtypes.name(precision)
        outputs.append(entry)
    io = {
        "inputs": [
            {"name": n, "position": i.position, "keyword": i.keyword} for i, n in zip(trace.inputs, input_names)
        ],
        "outputs": outputs,
    }
    props = model.metadata_props
    props[IO_METADATA_KEY] = json.dumps(io, sort_keys=True)
    props["mlx.version"] = mx.__version__
    props["mlx.device"] = trace.device
    props["mlx.function"] = trace.function_name
    if plan is not None:
        names = dict(zip((i.label for i in trace.inputs), input_names))
        props[DYNAMIC_METADATA_KEY] = json.dumps(
            {
                "symbols": {s: v[0] for s, v in plan.sizes.items()},
                "multiple_of": dict(plan.multiple_of),
                "range": {sym: list(b) for sym, b in plan.bounds.items()},
                "inputs": {names[label]: {str(a): s for a, s in axes.items()} for label, axes in plan.spec.items()},
            },
            sort_keys=True,
        )
    if passes is not None:
        props[PASSES_METADATA_KEY] = json.dumps(dict(passes), sort_keys=True)
    props[POLICY_METADATA_KEY] = json.dumps({dtypes.name(k): dtypes.name(v) for k, v in floats.carry}, sort_keys=True)


def raw(proto: onnx.ModelProto, key: str) -> str | None:
    for prop in proto.metadata_props:
        if prop.key == key:
            return prop.value
    return None


def _json(proto: onnx.ModelProto, key: str) -> Any:
    text = raw(proto, key)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise VerificationError(f"the model's {key} metadata is not valid JSON ({exc}); re-export the model") from None


def _bad(key: str, what: str) -> VerificationError:
    return VerificationError(f"the model's {key} metadata is malformed: {what}; re-export the model with mlx2onnx")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _io(proto: onnx.ModelProto) -> dict:
    """``{"inputs": [{name, position, keyword}], "outputs": [{name, key[, order_free_axis][, precision]}]}``
    (``precision``: the narrower float a float32 output was computed through)."""
    data = _json(proto, IO_METADATA_KEY)
    if data is None:
        raise VerificationError(
            "the model has no mlx2onnx input/output metadata; verify only models exported by mlx2onnx"
        )
    key = IO_METADATA_KEY
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("inputs"), list)
        or not isinstance(data.get("outputs"), list)
    ):
        raise _bad(key, "it must be an object with 'inputs' and 'outputs' lists")
    positions = []
    for entry in data["inputs"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad(key, f"input entry {entry!r} has no name")
        position, keyword = entry.get("position"), entry.get("keyword")
        if (position is None) == (keyword is None):
            raise _bad(key, f"input {entry['name']!r} must have either a position or a keyword")
        if position is not None and not (_is_int(position) and position >= 0):
            raise _bad(key, f"input {entry['name']!r} has position {position!r}, not a non-negative integer")
        if keyword is not None and not isinstance(keyword, str):
            raise _bad(key, f"input {entry['name']!r} has keyword {keyword!r}, not a string")
        if position is not None:
            positions.append(position)
    if sorted(positions) != list(range(len(positions))):
        raise _bad(key, f"the positional inputs have positions {sorted(positions)}, not 0..{len(positions) - 1}")
    for entry in data["outputs"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise _bad(key, f"output entry {entry!r} has no name")
        axis = entry.get("order_free_axis")
        if axis is not None and not _is_int(axis):
            raise _bad(key, f"output {entry['name']!r} has order_free_axis {axis!r}, not an integer")
        if entry.get("precision") not in (None, "bfloat16", "float16"):
            raise _bad(key, f"output {entry['name']!r} has precision {entry['precision']!r}, not bfloat16 or float16")
    names = [e["name"] for e in data["inputs"] + data["outputs"]]
    graph = {v.name for v in proto.graph.input} | {v.name for v in proto.graph.output}
    missing = [n for n in names if n not in graph]
    if missing:
        raise _bad(key, f"it names {missing} that are not graph inputs or outputs")
    return data


@dataclass(frozen=True)
class InputBinding:
    """Which of the exported function's arrays a graph input takes: its ``position``
    among the positional arrays, or its ``keyword`` (the io metadata's input entry, read)."""

    name: str
    position: int | None
    keyword: str | None

    @property
    def slot(self) -> int | str:
        return self.keyword if self.position is None else self.position

    def missing(self, positional: Sequence, keywords: Mapping[str, Any]) -> str | None:
        """Why the call's arrays have nothing for this input (None when they do)."""
        if self.position is not None and self.position >= len(positional):
            return (
                f"the model's input {self.name!r} is positional array {self.position}, but the call has "
                f"{len(positional)} positional array(s)"
            )
        if self.keyword is not None and self.keyword not in keywords:
            return f"the model's input {self.name!r} is keyword {self.keyword!r}, which the call does not have"
        return None

    def pick(self, positional: Sequence, keywords: Mapping[str, Any]):
        return keywords[self.keyword] if self.position is None else positional[self.position]


def _dynamic(proto: onnx.ModelProto) -> dict | None:
    """``{"symbols": {s: example}, "multiple_of": {s: n}, "range": {s: [lo, hi]}, "inputs": {...}}``."""
    data = _json(proto, DYNAMIC_METADATA_KEY)
    if data is None:
        return None
    key = DYNAMIC_METADATA_KEY
    if not isinstance(data, dict) or not isinstance(data.get("symbols"), dict) or not data["symbols"]:
        raise _bad(key, "it must be an object with a non-empty 'symbols' mapping")
    for symbol, size in data["symbols"].items():
        if not _is_int(size) or not 0 <= size <= MAX_CHECK_SIZE:
            raise _bad(
                key, f"symbol {symbol!r} has example size {size!r}; sizes are integers from 0 to {MAX_CHECK_SIZE}"
            )
    steps = data.setdefault("multiple_of", {})
    ranges = data.setdefault("range", {})
    inputs = data.setdefault("inputs", {})
    if not isinstance(steps, dict) or not isinstance(ranges, dict) or not isinstance(inputs, dict):
        raise _bad(key, "'multiple_of', 'range' and 'inputs' must be objects")
    for symbol, step in steps.items():
        if symbol not in data["symbols"] or not _is_int(step) or not 1 <= step <= MAX_CHECK_SIZE:
            raise _bad(
                key,
                f"multiple_of[{symbol!r}] = {step!r}; steps are integers from 1 to {MAX_CHECK_SIZE} of known symbols",
            )
    for symbol, bounds in ranges.items():
        ok = isinstance(bounds, list) and len(bounds) == 2 and all(b is None or _is_int(b) for b in bounds)
        if symbol not in data["symbols"] or not ok:
            raise _bad(
                key, f"range[{symbol!r}] = {bounds!r}; a range is [MIN, MAX] (integers or null) of a known symbol"
            )
        low, high = bounds
        if low is not None and not 0 <= low <= MAX_CHECK_SIZE:
            raise _bad(key, f"range[{symbol!r}] starts at {low}; sizes are integers from 0 to {MAX_CHECK_SIZE}")
        if high is not None and low is not None and high < low:
            raise _bad(key, f"range[{symbol!r}] = {bounds} is empty")
    for name, axes in inputs.items():
        if not isinstance(axes, dict) or not all(
            str(a).lstrip("-").isdigit() and s in data["symbols"] for a, s in axes.items()
        ):
            raise _bad(key, f"inputs[{name!r}] = {axes!r}; write {{axis: symbol}} with known symbols")
    return data


def _float_policy(proto: onnx.ModelProto) -> dict:
    """MLX dtype -> the dtype carrying it in this model (the export's float policy)."""
    names = {dtypes.name(d): d for d in (mx.bfloat16, mx.float16, mx.float32)}
    data = _json(proto, POLICY_METADATA_KEY) or {}
    if not isinstance(data, dict):
        raise _bad(POLICY_METADATA_KEY, "it must be an object {mlx dtype: carried dtype}")
    return {names[k]: names[v] for k, v in data.items() if k in names and v in names}


@dataclass(frozen=True)
class OutputEntry:
    """A graph output: the function's output it is (``key``: its key path when the
    function returned a dict), the axis along which it is an unordered set (partition,
    topk), and the narrower float it was computed through (its tolerance row)."""

    name: str
    key: str | None
    order_free_axis: int | None
    precision: str | None


@dataclass(frozen=True)
class DynamicSizes:
    """The export's dynamic symbols: each one's example size, the step it takes sizes
    in, its ``[MIN, MAX]`` range (None: unbounded), and the axes of the graph inputs
    that carry it (graph input -> {axis: symbol})."""

    symbols: Mapping[str, int]
    multiple_of: Mapping[str, int]
    ranges: Mapping[str, tuple[int | None, int | None]]
    axes: Mapping[str, Mapping[int, str]]

    def step(self, symbol: str) -> int:
        return self.multiple_of.get(symbol, 1)

    def bounds(self, symbol: str) -> tuple[int, int | None]:
        """The smallest size the symbol takes (its step when unset) and its largest."""
        low, high = self.ranges.get(symbol, (None, None))
        return (self.step(symbol) if low is None else low), high


@dataclass(frozen=True)
class ExportMetadata:
    """Everything an export wrote about itself, read and checked once: the graph inputs'
    bindings to the function's arrays, the outputs, the dynamic sizes (None when the
    export is static) and the float policy (MLX dtype -> the dtype carrying it)."""

    inputs: tuple[InputBinding, ...]
    outputs: tuple[OutputEntry, ...]
    dynamic: DynamicSizes | None
    policy: Mapping[mx.Dtype, mx.Dtype]

    def output_names(self) -> list[str]:
        return [o.name for o in self.outputs]

    def carried(self, dtype: mx.Dtype) -> mx.Dtype:
        """The dtype that carries MLX dtype ``dtype`` in this model."""
        return self.policy.get(dtype, dtype)


def read(proto: onnx.ModelProto) -> ExportMetadata:
    """The model's metadata as :class:`ExportMetadata`; :class:`VerificationError` naming
    the key when a key is missing or malformed."""
    io = _io(proto)
    dynamic = _dynamic(proto)
    sizes = (
        None
        if dynamic is None
        else DynamicSizes(
            symbols=dict(dynamic["symbols"]),
            multiple_of=dict(dynamic["multiple_of"]),
            ranges={s: tuple(b) for s, b in dynamic["range"].items()},
            axes={name: {int(a): s for a, s in axes.items()} for name, axes in dynamic["inputs"].items()},
        )
    )
    return ExportMetadata(
        inputs=tuple(InputBinding(e["name"], e.get("position"), e.get("keyword")) for e in io["inputs"]),
        outputs=tuple(
            OutputEntry(e["name"], e.get("key"), e.get("order_free_axis"), e.get("precision")) for e in io["outputs"]
        ),
        dynamic=sizes,
        policy=_float_policy(proto),
    )
