"""Dynamic dimensions: trace at several sizes and find which numbers follow which size.

MLX's export callback only ever reports concrete shapes (``docs/records.md``),
even under ``shapeless=True``. So an export with dynamic dimensions traces the function
several times, ``shapeless=True`` each time (then Broadcast names the operands it follows
and ``mean`` counts its elements with ``NumberOfElements`` instead of baking ``1/N``):
at the example sizes, once more per named dimension with that one size changed, and
twice with all of them changed, near and far (:func:`trace_values`). The traces must be
the same program; every number that differs between them (a dimension of a value, or a
number in a primitive's ``arguments``) becomes a :class:`~mlx2onnx.capture.symbolic.SymInt`
holding its value in each trace (:func:`~.merge.merge`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import mlx.core as mx

from ..errors import DynamicShapeError, DynamicSpecError
from .loops import check_trips, recover_loops
from .merge import at_trace, merge, sizes_text, trace_marker
from .symbolic import Plan, SymInt


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
        extra = [
            f"{k}={getattr(self, k)}"
            for k in ("multiple_of", "min", "max")
            if getattr(self, k) not in (None, 1) or k == "min" and self.min == 1
        ]
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
                raise DynamicSpecError(f"symbol {symbol!r} is declared as {dims[symbol]} and as {dim}; declare it once")
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
    return Plan(
        sizes, where, names, {s: d.multiple_of for s, d in dims.items()}, bounds={s: d.bounds for s, d in dims.items()}
    )


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
    far = base + far_offset(step, base)
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


def far_offset(step: int, base: int = 0) -> int:
    """How far the last trace moves every size: at least 37 and five steps, so numbers that
    floor a size (a stride-2 stage, a pooling window; five of them divide by 32) take
    values no affine function of the nearby traces predicts, and a size an image net
    pools down to a constant at the nearby sizes changes there; and at least half the
    example size, so that a size floored by more than 37 (an audio encoder's strided
    convolutions divide 16000 samples by 384: the same frame count at every nearby size)
    changes there too and is followed from the traced values (or the dimension refused
    where nothing follows it), not taken for a constant."""
    return step * max(5, -(-37 // step), -(-base // (2 * step)))


def shaped(shape: tuple, axes: Mapping[int, str], sizes: dict[str, tuple[int, ...]], t: int) -> tuple:
    return tuple(sizes[axes[a]][t] if a in axes else d for a, d in enumerate(shape))


def example_arrays(arrays: dict[str, mx.array], spec, sizes, t: int) -> dict[str, mx.array]:
    """Arrays of trace ``t``'s shapes (zeros: tracing reads shapes, never values)."""
    out = {}
    for label, array in arrays.items():
        shape = shaped(tuple(array.shape), spec.get(label, {}), sizes, t)
        out[label] = array if shape == tuple(array.shape) else mx.zeros(shape, array.dtype)
    return out


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
        larger = {
            label: shaped(shape, plan.spec.get(label, {}), plan.sizes, plan.traces - 1)
            for label, shape in shapes.items()
        }
        try:
            retried = trace_sizes(spec, larger)
            again, _ = _traced(
                call,
                module,
                display,
                signature,
                example_arrays(arrays, plan.spec, plan.sizes, plan.traces - 1),
                retried,
            )
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


def _located(
    error: DynamicShapeError,
    call,
    module,
    display,
    signature,
    arrays,
    plan: Plan,
    unrolled: str | None = None,
    how: str | None = None,
) -> DynamicShapeError:
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
        how = (
            "builds it from the size in Python or NumPy; build it with MLX ops on the array instead "
            "(mx.arange(x.shape[1]) is traced as a size, np.arange(L) as a constant)"
        )
    else:
        found = branch_line(run(0), run(trace))
        how = how or (
            "branches or loops on the size in Python, so each size traces another program: compute that "
            "part with MLX ops on whole arrays (a mask and mx.where for a branch; for a loop over the "
            "sequence, an MLX op that takes the whole axis, or a static size)"
        )
    loop = (
        ""
        if unrolled is None
        else " (The exporter recovers a Python loop over the size as an ONNX Loop "
        f"when its iterations repeat the same records; here {unrolled}.)"
    )
    if found is None:
        return at_trace(trace, constant, DynamicShapeError(f"{error}{loop}"))
    file, line, text = found
    return at_trace(trace, constant, DynamicShapeError(f"{error} Line {line} of {file} (`{text}`) {how}.{loop}"))


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
                f"{plan.describe(trace_marker(plan, t))} cannot be dynamic: the function does not trace at "
                f"{sizes_text(plan, t)} (the example sizes work): {exc}"
            ) from exc
        except Exception as exc:  # the user's code failed at another size
            if t == 0:
                raise
            raise DynamicShapeError(
                f"{plan.describe(trace_marker(plan, t))} cannot be dynamic: the function fails at "
                f"{sizes_text(plan, t)} (a size fixed in its code?): {type(exc).__name__}: {exc}"
            ) from exc
    return traces
