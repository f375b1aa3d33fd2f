"""Capture: trace an MLX function with ``mx.export_function`` into plain, immutable data.

Nothing in this module knows about ONNX. The result, a :class:`Trace`, holds the graph
inputs, outputs, constants and one :class:`Primitive` per MLX node, in topological
order, exactly as MLX's export callback reports them, plus the names a person would
use for them (parameter names, keywords, module parameter paths).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from ..errors import CaptureError

Scalar = (bool, int, float)


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
    """One primitive record: ``name``, decoded-as-given ``arguments``, inputs, outputs."""

    index: int
    name: str
    arguments: tuple
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


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


@dataclass(frozen=True)
class Trace:
    inputs: tuple[GraphInput, ...]
    outputs: tuple[GraphOutput, ...]
    constants: tuple[Constant, ...]
    primitives: tuple[Primitive, ...]
    device: str
    function_name: str

    def primitive_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for prim in self.primitives:
            counts[prim.name] = counts.get(prim.name, 0) + 1
        return counts


@dataclass(frozen=True)
class Signature:
    """Example inputs, normalised the way ``mx.export_function`` reads them."""

    args: tuple  # arrays and Python scalars, in call order
    kwargs: Mapping[str, Any]

    def arrays(self) -> tuple[list[mx.array], dict[str, mx.array]]:
        pos = [a for a in self.args if isinstance(a, mx.array)]
        kw = {k: v for k, v in self.kwargs.items() if isinstance(v, mx.array)}
        return pos, kw


def normalize_inputs(args: tuple, kwargs: Mapping[str, Any]) -> Signature:
    """Apply MLX's calling convention: ``*args, **kwargs``, or one tuple and/or one dict.

    NumPy arrays are converted to MLX arrays; Python scalars are kept and baked into the
    trace as constants (MLX treats them as weakly typed constants, not as inputs).
    """
    args = tuple(args)
    kwargs = dict(kwargs)
    if not kwargs and len(args) in (1, 2) and isinstance(args[-1], dict):
        if len(args) == 1 or isinstance(args[0], (tuple, list)):
            kwargs = dict(args[-1])
            args = tuple(args[0]) if len(args) == 2 else ()
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    args = tuple(_check_input(a, f"positional input {i}") for i, a in enumerate(args))
    for key in kwargs:
        if not isinstance(key, str):
            raise CaptureError(f"keyword input names must be strings, got {key!r}")
    kwargs = {k: _check_input(v, f"keyword input {k!r}") for k, v in kwargs.items()}
    return Signature(args, kwargs)


def _check_input(value: Any, where: str) -> Any:
    if isinstance(value, mx.array):
        return value
    if isinstance(value, np.ndarray):
        from ..dtypes import numpy_to_array

        return numpy_to_array(value)
    if isinstance(value, Scalar) and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.generic):
        return value.item()
    kind = type(value).__name__
    hint = ""
    if isinstance(value, (tuple, list, dict)):
        hint = " Nested containers are not inputs MLX can trace: pass each array as its own argument."
    elif value is None:
        hint = " Bind optional arguments with functools.partial or a lambda before exporting."
    raise CaptureError(
        f"{where} is a {kind}; example inputs must be mlx.core.array (or NumPy arrays), "
        f"or Python bool/int/float scalars, which are baked in as constants.{hint}"
    )


def resolve_callable(fun: Any) -> tuple[Callable, nn.Module | None, str]:
    """The callable to trace, the module that owns it (if any), and a display name."""
    if isinstance(fun, nn.Module):
        return fun, fun, type(fun).__name__
    owner = getattr(fun, "__self__", None)
    if inspect.ismethod(fun) and isinstance(owner, nn.Module):
        return fun, owner, f"{type(owner).__name__}.{fun.__name__}"
    if not callable(fun):
        raise CaptureError(
            f"expected a function, an mlx.nn.Module or a bound method of one, got {type(fun).__name__}"
        )
    return fun, None, getattr(fun, "__qualname__", getattr(fun, "__name__", type(fun).__name__))


def positional_names(fun: Callable, count: int) -> list[str]:
    """Names for the first ``count`` positional arguments: the parameters' own names."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return [f"input_{i}" for i in range(count)]
    names: list[str] = []
    for param in params:
        if len(names) == count:
            break
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            names.append(param.name)
        elif param.kind is param.VAR_POSITIONAL:
            names.extend(f"{param.name}_{j}" for j in range(count - len(names)))
    names.extend(f"input_{i}" for i in range(len(names), count))
    return names


def owned_modules(call: Callable, module: nn.Module | None) -> list[tuple[str, nn.Module]]:
    """The module the callable belongs to, and modules a plain function closes over
    (prefixed by their variable name), so their weights are evaluated and named."""
    if module is not None:
        return [("", module)]
    found: list[tuple[str, nn.Module]] = []
    target = call
    while hasattr(target, "func") and hasattr(target, "args"):  # functools.partial
        for i, arg in enumerate(target.args):
            if isinstance(arg, nn.Module):
                found.append((f"arg{i}.", arg))
        target = target.func
    code = getattr(target, "__code__", None)
    cells = getattr(target, "__closure__", None) or ()
    if code is not None:
        for name, cell in zip(code.co_freevars, cells):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, nn.Module):
                found.append((f"{name}.", value))
        namespace = getattr(target, "__globals__", {})
        for name in code.co_names:
            value = namespace.get(name)
            if isinstance(value, nn.Module):
                found.append((f"{name}.", value))
    return found


def _data_key(array: mx.array) -> tuple | None:
    """Identify an evaluated array by its buffer address, shape and dtype."""
    if array.size == 0:
        return None
    try:
        view = array.view(mx.uint8) if array.dtype == mx.bfloat16 else array
        pointer = np.asarray(memoryview(view)).__array_interface__["data"][0]
    except (TypeError, ValueError, BufferError):
        return None
    return pointer, tuple(array.shape), array.dtype


def compile_enabled() -> bool:
    """Whether ``mx.compile`` compiles now (MLX has no getter: a compiled function with a
    Python side effect runs its body on every call only when compilation is off; MLX
    0.32 traces it twice, then reuses the trace)."""
    calls = []

    def probe(x):
        calls.append(None)
        return x + 1

    compiled = mx.compile(probe)
    x = mx.array(0.0)
    for _ in range(4):
        mx.eval(compiled(x))
    return len(calls) < 4


@contextlib.contextmanager
def _compile_disabled():
    """Inline compiled helpers during export (MLX refuses ``Compiled`` nodes otherwise),
    then leave compilation as the user had it (on, or off by ``mx.disable_compile()`` or
    MLX_DISABLE_COMPILE)."""
    was_on = compile_enabled()
    mx.disable_compile()
    try:
        yield
    finally:
        if was_on:
            mx.enable_compile()


@contextlib.contextmanager
def _contiguous_as_identity():
    """``mx.contiguous`` returns its input's values in a row-major buffer: for export it is
    the identity, but MLX cannot export its primitive (``Contiguous`` has no state to
    record). While tracing, the function sees ``mx.contiguous`` as the identity."""
    original = mx.contiguous

    def contiguous(a, *args, **kwargs):
        return a if isinstance(a, mx.array) else original(a, *args, **kwargs)

    mx.contiguous = contiguous
    try:
        yield
    finally:
        mx.contiguous = original


_EXPORT_ADVICE = {
    "Compiled": "an mx.compile'd helper ran on constants; mlx2onnx already disables compilation, "
    "so call mx.compile only on traced inputs or remove it",
    "CustomTransforms": "mx.custom_function / mx.checkpoint cannot be exported: call the undecorated function",
    "Contiguous": "drop the mx.contiguous call (it has no effect on values)",
    "BitwiseInvert": "use mx.bitwise_xor(x, -1) (or x ^ mask for unsigned types) instead of ~x",
    "Load": "the function reads lazily loaded arrays (mx.import_function or mx.load): mx.eval them first",
    "CumLogAddExp": "mx.logcumsumexp cannot be exported by MLX 0.32 (an MLX bug); write it with mx.cumsum of exp",
}


def _explain_mlx_error(error: Exception) -> str:
    text = str(error)
    if "Unable to get state for primitive" in text:
        primitive = text.rsplit(" ", 1)[-1].strip()
        advice = next((v for k, v in _EXPORT_ADVICE.items() if primitive.startswith(k)), None)
        advice = advice or "MLX cannot export this primitive at all; rewrite that part with other ops"
        return f"MLX cannot export primitive {primitive}: {advice}. (MLX said: {text})"
    if "Outputs can be either" in text:
        return (
            "the function must return an array, or a tuple, list or dict of arrays. "
            f"(MLX said: {text})"
        )
    return f"mx.export_function failed: {text}"


def input_labels(call: Callable, signature: Signature) -> dict[str, mx.array]:
    """The example arrays by the label their graph input gets (parameter name or keyword)."""
    names = positional_names(call, len(signature.args))
    labelled = {names[i]: a for i, a in enumerate(signature.args) if isinstance(a, mx.array)}
    labelled.update({k: v for k, v in signature.kwargs.items() if isinstance(v, mx.array)})
    return labelled


def with_arrays(signature: Signature, call: Callable, arrays: Mapping[str, mx.array]) -> Signature:
    """``signature`` with the arrays replaced by ``arrays`` (keyed as :func:`input_labels`)."""
    names = positional_names(call, len(signature.args))
    args = tuple(arrays.get(names[i], a) if isinstance(a, mx.array) else a for i, a in enumerate(signature.args))
    kwargs = {k: arrays.get(k, v) if isinstance(v, mx.array) else v for k, v in signature.kwargs.items()}
    return Signature(args, kwargs)


def capture(fun: Any, args: tuple, kwargs: Mapping[str, Any], shapeless: bool = False) -> Trace:
    """Trace ``fun(*args, **kwargs)`` and return its records as a :class:`Trace`
    (``shapeless``: MLX's shapeless export, see :mod:`mlx2onnx.dynamic`)."""
    call, module, display = resolve_callable(fun)
    signature = normalize_inputs(args, kwargs)
    return capture_signature(call, module, display, signature, shapeless)


def capture_signature(call: Callable, module, display: str, signature: Signature, shapeless: bool = False) -> Trace:
    param_paths: dict[tuple, str] = {}
    for prefix, owner in owned_modules(call, module):
        mx.eval(owner.parameters())
        for path, array in tree_flatten(owner.parameters()):
            key = _data_key(array)
            if key is not None:
                param_paths.setdefault(key, prefix + path)

    pos_arrays, kw_arrays = signature.arrays()
    mx.eval(pos_arrays, list(kw_arrays.values()))
    array_positions = [i for i, a in enumerate(signature.args) if isinstance(a, mx.array)]
    all_names = positional_names(call, len(signature.args))
    pos_labels = [all_names[i] for i in array_positions]
    output_labels: list[str | None] = []
    user_error: list[BaseException] = []

    def traced(*arrays, **kw):
        call_args = list(signature.args)
        for slot, array in zip(array_positions, arrays):
            call_args[slot] = array
        call_kwargs = dict(signature.kwargs)
        call_kwargs.update(kw)
        try:
            result = call(*call_args, **call_kwargs)
        except BaseException as exc:  # re-raised unchanged below: it is the user's error
            user_error.append(exc)
            raise
        flat, labels = flatten_outputs(result)
        output_labels.extend(labels)
        return flat

    records: list[dict] = []
    try:
        with _compile_disabled(), _contiguous_as_identity():
            mx.export_function(records.append, traced, *pos_arrays, shapeless=shapeless, **kw_arrays)
    except CaptureError:
        raise
    except Exception as exc:
        if user_error and _evaluated_while_traced(user_error[0]):
            raise CaptureError(_eval_advice(user_error[0])) from user_error[0]
        if user_error:
            raise user_error[0] from None
        raise CaptureError(_explain_mlx_error(exc)) from exc
    return _build_trace(records, pos_labels, output_labels, param_paths, display)


def _evaluated_while_traced(error: BaseException) -> bool:
    return "eval an array during function transformations" in str(error)


def _eval_advice(error: BaseException) -> str:
    """Which line of the user's code evaluated an array while traced, and what to do."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the mlx2onnx package
    mlx_dir = os.path.dirname(os.path.abspath(mx.__file__))
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not os.path.abspath(f.filename).startswith((here, mlx_dir))]
    where = f"{frames[-1].filename}:{frames[-1].lineno} ({frames[-1].line.strip() if frames[-1].line else frames[-1].name})" \
        if frames else "the function"
    return (
        f"{where} evaluates an array while the function is traced (.item(), .tolist(), np.array(x), "
        "or Python control flow such as `if x > 0` on an array's value). An export records one program "
        "for every input, so a value cannot steer Python: compute both branches and choose with "
        "mx.where, keep the value as an array instead of a Python number, or evaluate what does not "
        "depend on the inputs before export. (MLX said: " + str(error) + ")"
    )


def flatten_outputs(result: Any) -> tuple[list[mx.array], list[str | None]]:
    """Flatten what the function returned into a list of arrays and their key paths."""
    if isinstance(result, mx.array):
        return [result], [None]
    if result is None or (isinstance(result, (tuple, list, dict)) and not result):
        raise CaptureError("the function returned nothing; it must return at least one array")
    if not isinstance(result, (tuple, list, dict)):
        raise CaptureError(
            f"the function returned a {type(result).__name__}; return an array, "
            "or a tuple, list or dict of arrays"
        )
    flat = tree_flatten(result)
    arrays, labels = [], []
    keyed = isinstance(result, dict) or any(not part.isdigit() for path, _ in flat for part in path.split("."))
    for path, value in flat:
        if not isinstance(value, mx.array):
            raise CaptureError(
                f"output {path!r} is a {type(value).__name__}, not an array; only arrays can be outputs"
            )
        arrays.append(value)
        labels.append(path if keyed else None)
    return arrays, labels


def _freeze(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _spec(entry) -> TensorSpec:
    name, shape, dtype = entry
    return TensorSpec(name, tuple(int(d) for d in shape), dtype)


def _build_trace(records, pos_labels, output_labels, param_paths, display) -> Trace:
    by_type: dict[str, Any] = {}
    primitives = []
    for record in records:
        if record["type"] == "primitive":
            primitives.append(
                Primitive(
                    index=len(primitives),
                    name=record["name"],
                    arguments=_freeze(list(record["arguments"])),
                    inputs=tuple(_spec(e) for e in record["inputs"]),
                    outputs=tuple(_spec(e) for e in record["outputs"]),
                )
            )
        else:
            by_type[record["type"]] = record
    keyword_of = {name: kw for kw, name in by_type["keyword_inputs"]["keywords"]}
    inputs = []
    position = 0
    for entry in by_type["inputs"]["inputs"]:
        spec = _spec(entry)
        if spec.name in keyword_of:
            inputs.append(GraphInput(spec, keyword_of[spec.name], None, keyword_of[spec.name]))
        else:
            inputs.append(GraphInput(spec, pos_labels[position], position, None))
            position += 1
    outputs = tuple(
        GraphOutput(_spec(e), output_labels[i] if i < len(output_labels) else None)
        for i, e in enumerate(by_type["outputs"]["outputs"])
    )
    constants = []
    for name, array in by_type["constants"]["constants"]:
        key = _data_key(array)
        constants.append(
            Constant(
                TensorSpec(name, tuple(array.shape), array.dtype),
                array,
                param_paths.get(key) if key is not None else None,
            )
        )
    _refuse_orphan_outputs(outputs, inputs, constants, primitives)
    return Trace(
        inputs=tuple(inputs),
        outputs=outputs,
        constants=tuple(constants),
        primitives=tuple(primitives),
        device=str(mx.default_device()),
        function_name=display,
    )


def _refuse_orphan_outputs(outputs, inputs, constants, primitives) -> None:
    """An output that no primitive produces and that is no input or constant: MLX 0.32's
    trace simplification merges equal expressions and drops no-op StopGradient/Copy nodes,
    and when a stop_gradient of an expression computed twice is returned
    (``abs(x) * 2, stop_gradient(abs(x))``) the output loses its producer (MLX's own
    ``export_function`` to a file fails on it too)."""
    known = {i.spec.name for i in inputs} | {c.spec.name for c in constants}
    known |= {o.name for p in primitives for o in p.outputs}
    for k, out in enumerate(outputs):
        if out.spec.name not in known:
            which = repr(out.label) if out.label else f"{k}"
            raise CaptureError(
                f"output {which} has no producer in MLX's trace: MLX's graph simplification dropped it "
                "(it happens to stop_gradient, or a copy, of an expression the function computes twice). "
                "Compute the expression once and reuse it, or drop the stop_gradient: export needs no gradients"
            )
