"""Dynamic dimensions: trace at several sizes and find which numbers follow which size.

MLX's export callback only ever reports concrete shapes (``docs/records.md``),
even under ``shapeless=True``. So an export with dynamic dimensions traces the function
several times, ``shapeless=True`` each time (then Broadcast names the operands it follows
and ``mean`` counts its elements with ``NumberOfElements`` instead of baking ``1/N``):
at the example sizes, once more per named dimension with that one size changed, and
twice with all of them changed, near and far (:func:`trace_values`). The traces must be
the same program; every number that differs between them (a dimension of a value, or a
number in a primitive's ``arguments``) becomes a :class:`~mlx2onnx.symbolic.SymInt`
holding its value in each trace (:func:`merge`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

import mlx.core as mx
import numpy as np

from ..errors import DynamicShapeError, DynamicSpecError
from .loops import LOOP, Step, check_trips, loop_parts, recover_loops
from .symbolic import Plan, StepInt, SymFloat, SymInt


@dataclass(frozen=True)
class Dim:
    """A dynamic dimension: ``Dim("seq")``, or ``Dim("h", multiple_of=32)`` for a size the
    model only accepts in steps (an image through five stride-2 stages), with ``min`` and
    ``max`` for a size the model only takes in a range (``Dim("seq", max=512)`` for learned
    positions). A plain string in the ``dynamic`` mapping means ``Dim(name)``. The export
    is traced, and verified, at such sizes only; others are outside what it promises."""

    name: str
    multiple_of: int = 1
    min: int | None = None
    max: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise DynamicSpecError(f"Dim name {self.name!r} must be an identifier like 'batch'")
        for what in ("multiple_of", "min", "max"):
            v = getattr(self, what)
            if (v is not None or what == "multiple_of") and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise DynamicSpecError(f"Dim({self.name!r}, {what}={v!r}): a positive integer is needed")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise DynamicSpecError(f"Dim({self.name!r}, min={self.min}, max={self.max}): min is above max")

    def __repr__(self):
        extra = [f"{k}={getattr(self, k)}" for k in ("multiple_of", "min", "max")
                 if getattr(self, k) not in (None, 1) or k == "min" and self.min == 1]
        return f"Dim({', '.join([repr(self.name), *extra])})"

    @property
    def bounds(self) -> tuple[int, int | None]:
        """The smallest and largest size it may take (multiples of ``multiple_of``;
        ``None``: no largest)."""
        step = self.multiple_of
        low = -(-(self.min or step) // step) * step
        high = None if self.max is None else self.max // step * step
        return low, high


# -- the specification -------------------------------------------------------------------
def normalize_spec(dynamic: Any, labels: list[str], shapes: dict[str, tuple[int, ...]]) -> dict[str, dict[int, Dim]]:
    """Check ``{input: {axis: symbol or Dim}}`` against the function's inputs: axes made
    >= 0, symbols made :class:`Dim`."""
    if not isinstance(dynamic, Mapping):
        raise DynamicSpecError(
            f"dynamic must be a mapping like {{'x': {{0: 'batch', 1: 'seq'}}}}, got {type(dynamic).__name__}"
        )
    spec: dict[str, dict[int, str]] = {}
    for label, axes in dynamic.items():
        if label not in shapes:
            raise DynamicSpecError(f"dynamic names input {label!r}, but the array inputs are {labels}")
        if isinstance(axes, (list, tuple)):  # [0, 1] -> symbols named after the input
            axes = {a: f"{label}_{a}" for a in axes}
        if not isinstance(axes, Mapping):
            raise DynamicSpecError(
                f"dynamic[{label!r}] must map axes to symbol names, like {{0: 'batch'}}, got {axes!r}"
            )
        rank = len(shapes[label])
        for axis, symbol in axes.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
                raise DynamicSpecError(
                    f"dynamic[{label!r}] names axis {axis!r}, but input {label!r} has shape "
                    f"{list(shapes[label])} (axes 0..{rank - 1})"
                )
            if isinstance(symbol, str) and symbol.isidentifier():
                symbol = Dim(symbol)
            if not isinstance(symbol, Dim):
                raise DynamicSpecError(
                    f"dynamic[{label!r}][{axis}] = {symbol!r}: name the dimension with an identifier like "
                    "'batch', or mlx2onnx.Dim('h', multiple_of=32)"
                )
            spec.setdefault(label, {})[axis % rank] = symbol
    if not spec:
        raise DynamicSpecError("dynamic names no dimension; leave it None for a static export")
    return spec


def trace_sizes(spec: dict[str, dict[int, Dim]], shapes: dict[str, tuple[int, ...]]) -> Plan:
    """The plan: per symbol its size in each trace, where it first appears, its step."""
    example: dict[str, int] = {}
    where: dict[str, tuple[str, int]] = {}
    dims: dict[str, Dim] = {}
    for label, axes in spec.items():
        for axis, dim in axes.items():
            symbol, size = dim.name, shapes[label][axis]
            if dims.setdefault(symbol, dim) != dim:
                raise DynamicSpecError(
                    f"symbol {symbol!r} is declared as {dims[symbol]} and as {dim}; declare it once"
                )
            if size % dim.multiple_of:
                raise DynamicSpecError(
                    f"dimension {axis} of input {label!r} is {size} in the example, not a multiple of "
                    f"{dim.multiple_of} as Dim({symbol!r}, multiple_of={dim.multiple_of}) says"
                )
            low, high = dim.bounds
            if size < (dim.min or 0) or high is not None and size > dim.max:
                raise DynamicSpecError(
                    f"dimension {axis} of input {label!r} is {size} in the example, outside {dim}'s range"
                )
            if symbol in example and example[symbol] != size:
                first = where[symbol]
                raise DynamicSpecError(
                    f"symbol {symbol!r} names dimension {first[1]} of input {first[0]!r} (size "
                    f"{example[symbol]}) and dimension {axis} of input {label!r} (size {size}); "
                    "one symbol is one size: give the examples equal sizes there, or use two symbols"
                )
            example.setdefault(symbol, size)
            where.setdefault(symbol, (label, axis))
    symbols = list(example)
    sizes = {}
    for k, s in enumerate(symbols):
        base, near, nearer, far = trace_values(dims[s], example[s])
        row = [base] + [near if j == k else base for j in range(len(symbols))]
        sizes[s] = tuple(row + [nearer, far])
    names = {label: {a: d.name for a, d in axes.items()} for label, axes in spec.items()}
    return Plan(sizes, where, names, {s: d.multiple_of for s, d in dims.items()},
                bounds={s: d.bounds for s, d in dims.items()})


def trace_values(dim: Dim, example: int) -> tuple[int, int, int, int]:
    """Four distinct sizes of ``dim`` to trace at: the example (raised to 2 steps' worth at
    1, where MLX may trace a broadcast-special program), one and two steps away, and one
    :func:`far_offset` away; inside ``dim``'s range, going down where up has no room."""
    step = dim.multiple_of
    low, high = dim.bounds
    low = max(low, 2 if step == 1 else step)
    base = min(max(example, low), high) if high is not None else max(example, low)

    def fits(v):
        return v >= low and (high is None or v <= high)

    picked = []
    for v in (base + step, base + 2 * step, base - step, base - 2 * step, base + 3 * step, base - 3 * step):
        if fits(v) and len(picked) < 2:
            picked.append(v)
    far = base + far_offset(step)
    if not fits(far):  # the farthest size left in the range, one step inside its end
        # (at the very end MLX may trace a special program: x[:n] of an n-long table is no Slice)
        ends = [v for v in (high - step, high, low) if fits(v) and v != base and v not in picked]
        far = ends[0] if ends else None
    if len(picked) < 2 or far is None:
        raise DynamicSpecError(
            f"{dim} allows fewer than 4 sizes ({low} to {high} in steps of {step}); tracing needs 4 to tell "
            "which numbers follow it: widen its range, or keep the dimension static"
        )
    return (base, picked[0], picked[1], far)


def far_offset(step: int) -> int:
    """How far the last trace moves every size: at least 37 and five steps, so numbers that
    floor a size (a stride-2 stage, a pooling window; five of them divide by 32) take
    values no affine function of the nearby traces predicts, and a size an image net
    pools down to a constant at the nearby sizes changes there."""
    return step * max(5, -(-37 // step))


def shaped(shape: tuple, axes: Mapping[int, str], sizes: dict[str, tuple[int, ...]], t: int) -> tuple:
    return tuple(sizes[axes[a]][t] if a in axes else d for a, d in enumerate(shape))


def example_arrays(arrays: dict[str, mx.array], spec, sizes, t: int) -> dict[str, mx.array]:
    """Arrays of trace ``t``'s shapes (zeros: tracing reads shapes, never values)."""
    out = {}
    for label, array in arrays.items():
        shape = shaped(tuple(array.shape), spec.get(label, {}), sizes, t)
        out[label] = array if shape == tuple(array.shape) else mx.zeros(shape, array.dtype)
    return out


# -- merging traces --------------------------------------------------------------------
def merge(traces: list, plan: Plan, space: tuple = ()):
    """One :class:`~mlx2onnx.capture.Trace` whose numbers are :class:`SymInt` where the
    traces differ; :class:`DynamicShapeError` where they are not one program. (``space``:
    the (trace, iteration) pairs of the loop whose bodies these traces are.)"""
    from .trace import GraphInput, GraphOutput, Primitive, TensorSpec

    base = traces[0]
    rename = [_name_map(base, other) for other in traces]

    def spec(entries: list, where: str):
        first = entries[0]
        for t, other in enumerate(entries[1:], 1):
            if other.dtype != first.dtype or len(other.shape) != len(first.shape):
                raise _differs(plan, t, where, f"{_show(first)} vs {_show(other)}")
        dims = tuple(
            _number([e.shape[a] for e in entries], plan) for a in range(len(first.shape))
        )
        return TensorSpec(first.name, dims, first.dtype)

    for t, other in enumerate(traces[1:], 1):
        if len(other.primitives) != len(base.primitives):
            j = _first_difference(base, other)
            raise _differs(plan, t, f"record {j}", _record_pair(base, other, j),
                           f"the traced program has {len(base.primitives)} records at the example sizes "
                           f"and {len(other.primitives)} here")
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
            if (other.name != rec.name or len(other.inputs) != len(rec.inputs)
                    or len(other.outputs) != len(rec.outputs)
                    or wiring != [s.name for s in rec.inputs]
                    or rec.name == LOOP and loop_parts(rec)[2] != loop_parts(other)[2]
                    or rec.name != LOOP and not _same_structure(rec.arguments, other.arguments)):
                raise _differs(plan, t, f"record {j}", _record_pair(base, traces[t], j))
        where = f"record {j} ({rec.name})"
        primitives.append(Primitive(
            index=rec.index,
            name=rec.name,
            arguments=_merge_loop(recs, plan) if rec.name == LOOP else
            _merge_arguments([r.arguments for r in recs], plan, space),
            inputs=tuple(spec([r.inputs[i] for r in recs], where) for i in range(len(rec.inputs))),
            outputs=tuple(spec([r.outputs[i] for r in recs], where) for i in range(len(rec.outputs))),
        ))
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
        if tuple(o.spec.shape) != tuple(c.spec.shape) or o.spec.dtype != c.spec.dtype or (
            c.array.size <= 4096 and not _same_values(o.array, c.array)
        ):
            what = c.path or (f"a scalar constant ({c.spec.name}), a Python number in the function,"
                              if not c.spec.shape else f"constant {c.spec.name} of shape {list(c.spec.shape)}")
            if tuple(o.spec.shape) != tuple(c.spec.shape):
                change = f"shape {list(c.spec.shape)} at {_sizes_text(plan, 0)}, {list(o.spec.shape)} at {_sizes_text(plan, t)}"
            elif c.array.size <= 4:
                change = f"value {c.array.tolist()} at {_sizes_text(plan, 0)}, {o.array.tolist()} at {_sizes_text(plan, t)}"
            else:
                change = f"its values differ at {_sizes_text(plan, t)}"
            raise _at(t, c.array, DynamicShapeError(
                f"{plan.describe(_trace_marker(plan, t))} cannot be dynamic: {what} changes with it "
                f"({change}); it was computed in Python "
                "(or NumPy) from the size. Compute it inside the function with MLX ops instead "
                "(mx.arange, mx.triu, ...), or keep this dimension static"
            ))


def _counting(constants: list, plan: Plan):
    """An ``Arange`` record for a 1-D constant that is ``start + step * arange(n)`` in every
    trace, ``n`` following a size (``mx.array(np.arange(L))``); else None."""
    from .trace import Primitive, TensorSpec

    dtype = constants[0].spec.dtype
    if any(c.spec.dtype != dtype or c.array.ndim != 1 or c.array.size < 2 for c in constants) or \
            len({c.array.size for c in constants}) == 1 or not (dtype == mx.float32 or mx.issubdtype(dtype, mx.integer)):
        return None
    arrays = [np.asarray(c.array) for c in constants]
    start, step = arrays[0][0].item(), (arrays[0][1] - arrays[0][0]).item()
    if step == 0 or not all(np.array_equal(a, start + step * np.arange(a.size, dtype=a.dtype)) for a in arrays):
        return None
    length = _number([a.size for a in arrays], plan)
    stop = _number([start + step * a.size for a in arrays], plan)
    spec = constants[0].spec
    return Primitive(-1, "Arange", (float(start), stop, float(step)), (), (TensorSpec(spec.name, (length,), spec.dtype),))


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


def _merge_loop(recs: list, plan: Plan) -> tuple:
    """A loop record's arguments over the traces: the trip count a size, the bodies merged
    with their :class:`Step` numbers as :class:`StepInt` over every iteration traced."""
    parts = [loop_parts(r) for r in recs]
    space = tuple((t, k) for t, (trips, _, _) in enumerate(parts) for k in range(trips))
    body = merge([b for _, b, _ in parts], plan, space)
    return _number([trips for trips, _, _ in parts], plan), body, parts[0][2]


def _same_structure(a, b) -> bool:
    if isinstance(a, Step) or isinstance(b, Step):
        return isinstance(a, Step) and isinstance(b, Step)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            _same_structure(x, y) for x, y in zip(a, b))
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


def _trace_marker(plan: Plan, t: int) -> tuple:
    """Values that differ exactly in trace ``t`` (for :meth:`Plan.describe`)."""
    return tuple(1 if k == t else 0 for k in range(plan.traces))


def _sizes_text(plan: Plan, t: int) -> str:
    return ", ".join(f"{s}={v[t]}" for s, v in plan.sizes.items())


def _differs(plan: Plan, t: int, where: str, detail: str, summary: str = "") -> DynamicShapeError:
    example = ", ".join(f"{s}={v[0]}" for s, v in plan.sizes.items())
    return _at(t, None, DynamicShapeError(
        f"{plan.describe(_trace_marker(plan, t))} cannot be dynamic: the traced program changes with "
        f"it{': ' + summary if summary else ''}. At {where}, {example} traces {detail.split(' | ')[0]} "
        f"but {_sizes_text(plan, t)} traces {detail.split(' | ')[-1]}. Python code in the function "
        "(or in MLX, like pooling that crops odd sizes) branches, loops or computes shapes on that size; "
        "make the dimension static, write that part with MLX ops on the array, or, if the model only "
        "takes sizes in steps, declare them: mlx2onnx.Dim(name, multiple_of=N). (The exporter also traced "
        "again from its largest sizes, where a branch that only switches implementation past a threshold "
        "settles on one program; the program changed there too.)"
    ))


def _at(trace: int, constant, error: DynamicShapeError) -> DynamicShapeError:
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
        return f"{rec.name} with arguments {list(rec.arguments)} on inputs {[list(s.shape) for s in rec.inputs]}"
    return f"{show(a)} | {show(b)}"


def _first_difference(a, b) -> int:
    for j, (x, y) in enumerate(zip(a.primitives, b.primitives)):
        if x.name != y.name:
            return j
    return min(len(a.primitives), len(b.primitives))


# -- tracing -------------------------------------------------------------------------------
def capture_dynamic(fun: Any, args: tuple, kwargs: Mapping[str, Any], dynamic: Any):
    """Trace ``fun`` at the sizes of :func:`trace_sizes` and merge the traces:
    ``(trace, plan)``."""
    from .inputs import input_labels, normalize_inputs, resolve_callable

    call, module, display = resolve_callable(fun)
    signature = normalize_inputs(args, kwargs)
    arrays = input_labels(call, signature)
    shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    spec = normalize_spec(dynamic, list(arrays), shapes)
    plan = trace_sizes(spec, shapes)
    traces, unrolled = _traced(call, module, display, signature, arrays, plan)
    try:
        trace = merge(traces, plan)
    except DynamicShapeError as first:
        # The program may change once a size passes a threshold and stay the same above it
        # (mlx-lm's MoE layers sort their routing from 64 indices up: same results, another
        # program). Trace again from the largest sizes traced: if those traces agree, the
        # graph is that program, which the check then runs at the example sizes too.
        larger = {label: shaped(shape, plan.spec.get(label, {}), plan.sizes, plan.traces - 1)
                  for label, shape in shapes.items()}
        try:
            retried = trace_sizes(spec, larger)
            again, _ = _traced(call, module, display, signature,
                               example_arrays(arrays, plan.spec, plan.sizes, plan.traces - 1), retried)
            trace = merge(again, retried)
            if not _same_output_shapes(trace, retried, traces[0], {s: v[0] for s, v in plan.sizes.items()}):
                raise first
            plan = retried
        except Exception:  # not one program there either (or the function fails there): the first reason
            raise _located(first, call, module, display, signature, arrays, plan, unrolled) from None
    try:
        check_trips(trace, plan)
    except DynamicShapeError as error:
        raise _located(error, call, module, display, signature, arrays, plan, how="is that loop") from None
    return trace, plan


def _same_output_shapes(trace, plan: Plan, example, sizes: dict) -> bool:
    """Whether ``trace`` (merged at the sizes of ``plan``) gives the outputs of ``example``
    (one trace at ``sizes``) their shapes: a program traced from larger sizes stands for
    the example only then (a size the function treats specially, like a padding as long
    as the input, has other shapes there)."""
    for out, seen in zip(trace.outputs, example.outputs):
        for d, e in zip(out.spec.shape, seen.spec.shape):
            form = plan.form(plan.dim_name(d.values)) if isinstance(d, SymInt) else d
            if form is not None and (form.at(sizes) if isinstance(d, SymInt) else form) != e:
                return False
    return True


def _located(error: DynamicShapeError, call, module, display, signature, arrays, plan: Plan,
             unrolled: str | None = None, how: str | None = None) -> DynamicShapeError:
    """``error`` with the user's line that fixes the size (:mod:`.locate`), where found, and
    why the records that repeat are no loop the exporter can recover (``unrolled``);
    ``how``: what to say of the line, when not the refusal's usual advice."""
    from .inputs import with_arrays
    from .locate import branch_line, constant_line
    from .tracing import capture_signature

    trace = getattr(error, "trace", None)
    if trace is None:
        return error

    def run(t):
        trial = with_arrays(signature, call, example_arrays(arrays, plan.spec, plan.sizes, t))
        return lambda: capture_signature(call, module, display, trial, shapeless=True)

    constant = getattr(error, "constant", None)
    if constant is not None:
        found = constant_line(run(0), constant)
        how = ("builds it from the size in Python or NumPy; build it with MLX ops on the array instead "
               "(mx.arange(x.shape[1]) is traced as a size, np.arange(L) as a constant)")
    else:
        found = branch_line(run(0), run(trace))
        how = how or ("branches or loops on the size in Python, so each size traces another program: compute that "
                      "part with MLX ops on whole arrays (a mask and mx.where for a branch; for a loop over the "
                      "sequence, an MLX op that takes the whole axis, or a static size)")
    loop = ("" if unrolled is None else " (The exporter recovers a Python loop over the size as an ONNX Loop "
            f"when its iterations repeat the same records; here {unrolled}.)")
    if found is None:
        return _at(trace, constant, DynamicShapeError(f"{error}{loop}"))
    file, line, text = found
    return _at(trace, constant, DynamicShapeError(f"{error} Line {line} of {file} (`{text}`) {how}.{loop}"))


def _traced(call, module, display, signature, arrays, plan: Plan) -> tuple[list, str | None]:
    """The traces at the sizes of ``plan``, their loops recovered (:func:`recover_loops`)."""
    return recover_loops(_trace_plan(call, module, display, signature, arrays, plan), plan)


def _trace_plan(call, module, display, signature, arrays, plan: Plan) -> list:
    """The traces of ``call`` at each size of ``plan`` (``arrays``: the example's)."""
    from ..errors import CaptureError
    from .inputs import with_arrays
    from .tracing import capture_signature

    traces = []
    for t in range(plan.traces):
        trial = with_arrays(signature, call, example_arrays(arrays, plan.spec, plan.sizes, t))
        try:
            traces.append(capture_signature(call, module, display, trial, shapeless=True))
        except CaptureError as exc:
            if t == 0:
                raise
            raise DynamicShapeError(
                f"{plan.describe(_trace_marker(plan, t))} cannot be dynamic: the function does not trace at "
                f"{_sizes_text(plan, t)} (the example sizes work): {exc}"
            ) from exc
        except Exception as exc:  # the user's code failed at another size
            if t == 0:
                raise
            raise DynamicShapeError(
                f"{plan.describe(_trace_marker(plan, t))} cannot be dynamic: the function fails at "
                f"{_sizes_text(plan, t)} (a size fixed in its code?): {type(exc).__name__}: {exc}"
            ) from exc
    return traces
