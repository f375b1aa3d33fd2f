"""Traces of one function at several sizes -> one trace with symbolic numbers.

Every number that differs between the traces (a dimension of a value, or a number in a
primitive's ``arguments``) becomes a :class:`~mlx2onnx.capture.symbolic.SymInt` holding its value
in each trace (:func:`merge`); where the traces are not one program the error names the
first difference, the sizes it was traced at and what to do.
"""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx
import numpy as np

from ..errors import DynamicShapeError
from .loops import Step
from .symbolic import Plan, StepInt, SymFloat, SymInt


def merge(traces: list, plan: Plan, space: tuple = ()):
    """One :class:`~mlx2onnx.capture.Trace` whose numbers are :class:`SymInt` where the
    traces differ; :class:`DynamicShapeError` where they are not one program. (``space``:
    the (trace, iteration) pairs of the loop whose bodies these traces are.)"""
    from .trace import GraphInput, GraphOutput, TensorSpec

    base = traces[0]
    rename = [_name_map(base, other) for other in traces]

    def spec(entries: list, where: str):
        first = entries[0]
        for t, other in enumerate(entries[1:], 1):
            if other.dtype != first.dtype or len(other.shape) != len(first.shape):
                raise _differs(plan, t, where, f"{_show(first)} vs {_show(other)}")
        dims = tuple(_number([e.shape[a] for e in entries], plan) for a in range(len(first.shape)))
        return TensorSpec(first.name, dims, first.dtype)

    for t, other in enumerate(traces[1:], 1):
        if len(other.primitives) != len(base.primitives):
            j = _first_difference(base, other)
            raise _differs(
                plan,
                t,
                f"record {j}",
                _record_pair(base, other, j),
                f"the traced program has {len(base.primitives)} records at the example sizes "
                f"and {len(other.primitives)} here",
            )
        if len(other.constants) != len(base.constants) or len(other.inputs) != len(base.inputs):
            raise _differs(plan, t, "the constants", "a different number of constants")
    constants, ranges = [], []
    for k, c in enumerate(base.constants):
        others = [tr.constants[k] for tr in traces]
        made = _counting(others, plan)
        if made is not None:  # np.arange(L) made in Python: the same numbers from Arange in the graph
            ranges.append(made)
            continue
        _same_constant(c, others, plan)
        constants.append(c)
    primitives = list(ranges)
    for j, rec in enumerate(base.primitives):
        recs = [tr.primitives[j] for tr in traces]
        for t, (other, names) in enumerate(zip(recs[1:], rename[1:]), 1):
            wiring = [names.get(s.name) for s in other.inputs]
            if (
                other.kind != rec.kind
                or other.name != rec.name
                or len(other.inputs) != len(rec.inputs)
                or len(other.outputs) != len(rec.outputs)
                or wiring != [s.name for s in rec.inputs]
                or not _same_record_structure(rec, other)
            ):
                raise _differs(plan, t, f"record {j}", _record_pair(base, traces[t], j))
        where = f"record {j} ({rec.name})"
        io = dict(
            inputs=tuple(spec([r.inputs[i] for r in recs], where) for i in range(len(rec.inputs))),
            outputs=tuple(spec([r.outputs[i] for r in recs], where) for i in range(len(rec.outputs))),
        )
        if rec.kind == "loop":
            primitives.append(replace(rec, **_merge_loop(recs, plan), **io))
        else:
            primitives.append(replace(rec, arguments=_merge_arguments([r.arguments for r in recs], plan, space), **io))
    inputs = tuple(
        GraphInput(spec([tr.inputs[i].spec for tr in traces], "the inputs"), g.label, g.position, g.keyword)
        for i, g in enumerate(base.inputs)
    )
    outputs = tuple(
        GraphOutput(spec([tr.outputs[i].spec for tr in traces], "the outputs"), g.label)
        for i, g in enumerate(base.outputs)
    )
    return replace(base, inputs=inputs, outputs=outputs, constants=tuple(constants), primitives=tuple(primitives))


def _same_constant(c, others: list, plan: Plan) -> None:
    """:class:`DynamicShapeError` unless constant ``c`` is the same in every trace (``others``,
    one per trace): a constant that changes with a size was computed in Python from it."""
    for t, o in enumerate(others[1:], 1):
        if (
            tuple(o.spec.shape) != tuple(c.spec.shape)
            or o.spec.dtype != c.spec.dtype
            or (c.array.size <= 4096 and not _same_values(o.array, c.array))
        ):
            what = c.path or (
                f"a scalar constant ({c.spec.name}), a Python number in the function,"
                if not c.spec.shape
                else f"constant {c.spec.name} of shape {list(c.spec.shape)}"
            )
            if tuple(o.spec.shape) != tuple(c.spec.shape):
                change = f"shape {list(c.spec.shape)} at {sizes_text(plan, 0)}, {list(o.spec.shape)} at {sizes_text(plan, t)}"
            elif c.array.size <= 4:
                change = (
                    f"value {c.array.tolist()} at {sizes_text(plan, 0)}, {o.array.tolist()} at {sizes_text(plan, t)}"
                )
            else:
                change = f"its values differ at {sizes_text(plan, t)}"
            raise at_trace(
                t,
                c.array,
                DynamicShapeError(
                    f"{plan.describe(trace_marker(plan, t))} cannot be dynamic: {what} changes with it "
                    f"({change}); it was computed in Python "
                    "(or NumPy) from the size. Compute it inside the function with MLX ops instead "
                    "(mx.arange, mx.triu, ...), or keep this dimension static"
                ),
            )


def _counting(constants: list, plan: Plan):
    """An ``Arange`` record for a 1-D constant that is ``start + step * arange(n)`` in every
    trace, ``n`` following a size (``mx.array(np.arange(L))``); else None."""
    from .trace import Primitive, TensorSpec

    dtype = constants[0].spec.dtype
    if (
        any(c.spec.dtype != dtype or c.array.ndim != 1 or c.array.size < 2 for c in constants)
        or len({c.array.size for c in constants}) == 1
        or not (dtype == mx.float32 or mx.issubdtype(dtype, mx.integer))
    ):
        return None
    arrays = [np.asarray(c.array) for c in constants]
    start, step = arrays[0][0].item(), (arrays[0][1] - arrays[0][0]).item()
    if step == 0 or not all(np.array_equal(a, start + step * np.arange(a.size, dtype=a.dtype)) for a in arrays):
        return None
    length = _number([a.size for a in arrays], plan)
    stop = _number([start + step * a.size for a in arrays], plan)
    spec = constants[0].spec
    return Primitive(
        -1, "Arange", (float(start), stop, float(step)), (), (TensorSpec(spec.name, (length,), spec.dtype),)
    )


def _name_map(base, other) -> dict[str, str]:
    """Callback names of ``other`` -> the names of the same values in ``base``."""
    names = {}
    for a, b in zip(base.inputs, other.inputs):
        names[b.spec.name] = a.spec.name
    for a, b in zip(base.constants, other.constants):
        names[b.spec.name] = a.spec.name
    for ra, rb in zip(base.primitives, other.primitives):
        for a, b in zip(ra.outputs, rb.outputs):
            names[b.name] = a.name
    return names


def _same_values(a: mx.array, b: mx.array) -> bool:
    try:
        return bool(mx.array_equal(a, b, equal_nan=True).item())
    except Exception:
        return False


def _merge_loop(recs: list, plan: Plan) -> dict:
    """A loop record's trip count and body over the traces: the trip count a size, the
    bodies merged with their :class:`Step` numbers as :class:`StepInt` over every
    iteration traced."""
    space = tuple((t, k) for t, rec in enumerate(recs) for k in range(rec.trips))
    return {"trips": _number([r.trips for r in recs], plan), "body": merge([r.body for r in recs], plan, space)}


def _same_record_structure(a, b) -> bool:
    """Whether two records of one kind are the same record up to their numbers."""
    if a.kind == "loop":
        return a.carried == b.carried
    return _same_structure(a.arguments, b.arguments)


def _same_structure(a, b) -> bool:
    if isinstance(a, Step) or isinstance(b, Step):
        return isinstance(a, Step) and isinstance(b, Step)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(_same_structure(x, y) for x, y in zip(a, b))
        )
    if _is_number(a) and _is_number(b):
        return True
    return type(a) is type(b) and a == b


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _number(values: list, plan: Plan):
    if all(v == values[0] for v in values):
        return values[0]
    if all(float(v).is_integer() for v in values):
        return SymInt(tuple(int(v) for v in values), plan)
    return SymFloat(tuple(values), plan)


def _merge_arguments(args: list, plan: Plan, space: tuple = ()):
    first = args[0]
    if isinstance(first, tuple):
        return tuple(_merge_arguments([a[i] for a in args], plan, space) for i in range(len(first)))
    if isinstance(first, Step):
        return StepInt.of(_number([a.a for a in args], plan), _number([a.b for a in args], plan), space, plan)
    if _is_number(first):
        merged = _number(args, plan)
        if isinstance(merged, SymInt) and isinstance(first, float):
            merged = SymFloat(merged.values, plan)
        return merged
    return first


def trace_marker(plan: Plan, t: int) -> tuple:
    """Values that differ exactly in trace ``t`` (for :meth:`Plan.describe`)."""
    return tuple(1 if k == t else 0 for k in range(plan.traces))


def sizes_text(plan: Plan, t: int) -> str:
    return ", ".join(f"{s}={v[t]}" for s, v in plan.sizes.items())


def _differs(plan: Plan, t: int, where: str, detail: str, summary: str = "") -> DynamicShapeError:
    example = ", ".join(f"{s}={v[0]}" for s, v in plan.sizes.items())
    return at_trace(
        t,
        None,
        DynamicShapeError(
            f"{plan.describe(trace_marker(plan, t))} cannot be dynamic: the traced program changes with "
            f"it{': ' + summary if summary else ''}. At {where}, {example} traces {detail.split(' | ')[0]} "
            f"but {sizes_text(plan, t)} traces {detail.split(' | ')[-1]}. Python code in the function "
            "(or in MLX, like pooling that crops odd sizes) branches, loops or computes shapes on that size; "
            "make the dimension static, write that part with MLX ops on the array, or, if the model only "
            "takes sizes in steps, declare them: mlx2onnx.Dim(name, multiple_of=N). (The exporter also traced "
            "again from its largest sizes, where a branch that only switches implementation past a threshold "
            "settles on one program; the program changed there too.)"
        ),
    )


def at_trace(trace: int, constant, error: DynamicShapeError) -> DynamicShapeError:
    """``error`` marked with the trace that differed (and the constant that changed), for
    :func:`_located`."""
    error.trace, error.constant = trace, constant
    return error


def _show(spec) -> str:
    return f"{list(spec.shape)} {spec.dtype}"


def _record_pair(a, b, j: int) -> str:
    def show(trace):
        if j >= len(trace.primitives):
            return "no record (the program ended)"
        rec = trace.primitives[j]
        what = f"{rec.trips} steps" if rec.kind == "loop" else f"arguments {list(rec.arguments)}"
        return f"{rec.name} with {what} on inputs {[list(s.shape) for s in rec.inputs]}"

    return f"{show(a)} | {show(b)}"


def _first_difference(a, b) -> int:
    for j, (x, y) in enumerate(zip(a.primitives, b.primitives)):
        if x.name != y.name:
            return j
    return min(len(a.primitives), len(b.primitives))
