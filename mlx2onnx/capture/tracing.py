"""Capture: trace an MLX function with ``mx.export_function`` into plain, immutable data.

Nothing in this module knows about ONNX. The result, a :class:`~mlx2onnx.capture.trace.Trace`,
holds the graph inputs, outputs, constants and one record per MLX node, in topological
order (MLX's callback order, repaired where MLX reports a record before its producer), plus the names a person would
use for them (parameter names, keywords, module parameter paths).
"""

from __future__ import annotations

import contextlib
import heapq
import os
import traceback
from dataclasses import replace
from typing import Any, Callable, Mapping

import mlx.core as mx
import numpy as np
from mlx.utils import tree_flatten

from ..errors import CaptureError
from .inputs import (
    Signature,
    flatten_outputs,
    normalize_inputs,
    owned_modules,
    positional_names,
    resolve_callable,
)
from .trace import Constant, GraphInput, GraphOutput, Primitive, TensorSpec, Trace


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
        return f"the function must return an array, or a tuple, list or dict of arrays. (MLX said: {text})"
    return f"mx.export_function failed: {text}"


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
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(f.filename).startswith((here, mlx_dir))
    ]
    where = (
        f"{frames[-1].filename}:{frames[-1].lineno} ({frames[-1].line.strip() if frames[-1].line else frames[-1].name})"
        if frames
        else "the function"
    )
    return (
        f"{where} evaluates an array while the function is traced (.item(), .tolist(), np.array(x), "
        "or Python control flow such as `if x > 0` on an array's value). An export records one program "
        "for every input, so a value cannot steer Python: compute both branches and choose with "
        "mx.where, keep the value as an array instead of a Python number, or evaluate what does not "
        "depend on the inputs before export. (MLX said: " + str(error) + ")"
    )


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
    primitives = _in_dependency_order(primitives)
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


def _in_dependency_order(primitives: list[Primitive]) -> list[Primitive]:
    """The records in an order where every value is produced before it is read, as close
    to MLX's as can be: MLX 0.32's trace simplification, merging a multi-output node with
    an equal later one (two ``divmod(x, 3)``), can report a reader of the merged node's
    outputs before the node itself (seed 20261211 program 16020 of the fuzzer). Records
    already in order come back unchanged; otherwise a stable topological sort, each step
    taking the earliest record whose inputs are all produced."""
    producer = {o.name: p.index for p in primitives for o in p.outputs}
    needs = [
        {producer[i.name] for i in p.inputs if i.name in producer and producer[i.name] != p.index} for p in primitives
    ]
    if all(max(n, default=-1) < k for k, n in enumerate(needs)):
        return primitives
    readers: dict[int, list[int]] = {}
    for k, n in enumerate(needs):
        for j in n:
            readers.setdefault(j, []).append(k)
    waiting = [len(n) for n in needs]
    ready = [k for k, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(k)
        for r in readers.get(k, ()):
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(order) != len(primitives):
        raise CaptureError("MLX's trace has a cycle among its records; it cannot be exported")
    return [replace(primitives[k], index=i) for i, k in enumerate(order)]
