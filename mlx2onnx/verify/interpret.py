"""An interpreter for captured records: evaluate a :class:`~mlx2onnx.capture.Trace`
primitive by primitive with MLX's own Python ops.

It is the reference implementation of each record (``Reduce [Sum, (1,)]`` ->
``mx.sum(x, axis=[1], keepdims=True)``), used by ``mlx2onnx check --localize`` to
compute what every intermediate value should be, and usable for constant folding::

    from mlx2onnx import capture
    from mlx2onnx.verify import interpret
    trace = capture(fun, (x,), {})
    outputs = interpret.run(trace, x)          # == fun(x), record by record
    values = interpret.evaluate(rec, inputs)   # one record

Primitives it cannot evaluate raise :class:`CannotEvaluate` (see :data:`SKIPPED`). The
evaluators themselves, one per primitive, are in :mod:`.eval_math`, :mod:`.eval_layout`
and :mod:`.eval_special`, registered in :mod:`.evaluators`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import mlx.core as mx

from ..capture.inputs import normalize_inputs
from ..capture.trace import Primitive, Trace
from ..errors import CannotEvaluate
from . import eval_layout, eval_math, eval_special  # noqa: F401 - importing them registers their evaluators
from .evaluators import EVALUATORS, SKIPPED


def can_evaluate(name: str) -> bool:
    return name in EVALUATORS


def evaluate(rec: Primitive, inputs: Sequence[mx.array]) -> list[mx.array]:
    """The MLX values of ``rec.outputs`` for the given input arrays (lazy; call mx.eval)."""
    fn = EVALUATORS.get(rec.name)
    if fn is None:
        raise CannotEvaluate(SKIPPED.get(rec.name, f"no MLX evaluator for primitive {rec.name}"))
    outputs = list(fn(rec, list(inputs), rec.args))
    if len(outputs) != len(rec.outputs):
        raise CannotEvaluate(f"{rec.name}: evaluator gave {len(outputs)} outputs for {len(rec.outputs)}")
    result = []
    for value, spec in zip(outputs, rec.outputs):
        if tuple(value.shape) != spec.shape:
            raise CannotEvaluate(
                f"{rec.name} (record {rec.index}): evaluator shape {list(value.shape)} differs from the "
                f"recorded {list(spec.shape)} (interpreter bug)"
            )
        if value.dtype != spec.dtype:
            value = value.astype(spec.dtype)
        result.append(value)
    return result


def bind_inputs(trace: Trace, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, mx.array]:
    """MLX name -> array for the trace's graph inputs and constants."""
    positional, keywords = normalize_inputs(args, kwargs).arrays()
    env: dict[str, mx.array] = {c.spec.name: c.array for c in trace.constants}
    for graph_input in trace.inputs:
        if graph_input.keyword is None:
            env[graph_input.spec.name] = positional[graph_input.position]
        else:
            env[graph_input.spec.name] = keywords[graph_input.keyword]
    return env


def environment(trace: Trace, *args: Any, **kwargs: Any) -> dict[str, mx.array]:
    """Every value of the trace (inputs, constants, each record's outputs), by MLX name."""
    env = bind_inputs(trace, args, kwargs)
    for rec in trace.primitives:
        outputs = evaluate(rec, [env[s.name] for s in rec.inputs])
        mx.eval(outputs)
        for spec, value in zip(rec.outputs, outputs):
            env[spec.name] = value
    return env


def run(trace: Trace, *args: Any, **kwargs: Any) -> list[mx.array]:
    """The trace's outputs, computed record by record (the same inputs as the function)."""
    env = environment(trace, *args, **kwargs)
    return [env[o.spec.name] for o in trace.outputs]
