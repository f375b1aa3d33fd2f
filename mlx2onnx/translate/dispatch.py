"""Translate: dispatch every record of a :class:`Trace` to its handler: a primitive to
its name's handler, a record of another kind (a recovered loop) to its kind's."""

from __future__ import annotations

from collections import Counter

from ..capture.symbolic import NeedsStatic, StepInt, SymInt
from ..capture.trace import Trace
from ..errors import (
    ConversionError,
    DynamicShapeError,
    Mlx2OnnxError,
    UnsupportedPrimitiveError,
)
from . import (
    loops,  # noqa: F401  (registers the loop record kind's handler)
    registry,
)
from .context import Context, is_complex, refuse_complex_io
from .rounding import round_inputs, round_outputs


def check_supported(trace: Trace) -> None:
    """Raise one :class:`UnsupportedPrimitiveError` naming every primitive we cannot export."""
    counts = Counter(p.name for p in trace.all_records() if p.kind == "primitive")
    missing = {n: c for n, c in counts.items() if registry.lookup(n) is None and registry.refusal(n) is None}
    refused = {n: (c, str(registry.refusal(n))) for n, c in counts.items() if registry.refusal(n) is not None}
    if missing or refused:
        raise UnsupportedPrimitiveError(missing, refused)


def translate(trace: Trace, ctx: Context, input_names: list[str]) -> None:
    """Fill ``ctx`` with the ONNX nodes for every record of ``trace``."""
    check_supported(trace)
    for graph_input, name in zip(trace.inputs, input_names):
        ctx.bind_input(graph_input.spec, name)
    round_inputs(ctx, trace)
    for graph_output in trace.outputs:
        refuse_complex_io(graph_output.spec, "graph output")
    translate_records(ctx, trace.primitives)


def translate_records(ctx: Context, records) -> None:
    for rec in records:
        if rec.kind != "primitive":
            with ctx.primitive(rec):
                outputs = registry.lookup_kind(rec.kind)(ctx, rec, lambda inner: translate_records(ctx, inner))
                ctx.bind_outputs(rec, outputs)
            continue
        handler = registry.lookup(rec.name)
        if any(is_complex(s) for s in rec.inputs + rec.outputs):
            handler = registry.lookup_complex(rec.name)
            if handler is None:
                raise ConversionError(
                    rec.name,
                    "complex64 values are not supported by this primitive's handler; the primitives "
                    f"that handle complex64 are {', '.join(registry.complex_primitives())}",
                    rec.index,
                )
        with ctx.primitive(rec):
            try:
                outputs = round_outputs(ctx, rec, handler(ctx, rec))  # MLX rounds each output to its dtype
                ctx.bind_outputs(rec, outputs)
            except NeedsStatic as exc:
                raise fixed_by(rec, exc) from None
            except Mlx2OnnxError:
                raise
            except Exception as exc:  # a handler bug: say where it happened
                if carries_dynamic(rec):
                    raise DynamicShapeError(
                        f"primitive {rec.name} (record {rec.index}) has a size that changes with "
                        f"{describe_dynamic(rec)}, and its handler cannot compute it in the graph "
                        f"(arguments {list(rec.arguments)!r}, inputs {[list(s.shape) for s in rec.inputs]}: "
                        f"{type(exc).__name__}: {exc}). Keep that dimension static"
                    ) from exc
                raise ConversionError(
                    rec.name,
                    f"handler {handler.__module__}.{handler.__name__} failed on arguments "
                    f"{list(rec.arguments)!r} with inputs {[(s.shape, str(s.dtype)) for s in rec.inputs]}: "
                    f"{type(exc).__name__}: {exc}",
                    rec.index,
                ) from exc


def carries_dynamic(rec) -> bool:
    return bool(_syms(rec))


def describe_dynamic(rec) -> str:
    syms = _syms(rec)
    sizes = [s for s in syms if not isinstance(s, StepInt)]
    if not sizes:
        return "the iteration of the loop recovered around it"
    return sizes[0].plan.describe(sizes[0].values)


def _syms(rec) -> list:
    found = []

    def walk(x):
        if isinstance(x, SymInt):
            found.append(x)
        elif isinstance(x, tuple):
            for y in x:
                walk(y)

    walk(rec.arguments)
    for spec in rec.inputs + rec.outputs:
        walk(tuple(spec.shape))
    return found


def fixed_by(rec, exc: NeedsStatic) -> DynamicShapeError:
    """The error for a handler that needed a fixed number where a dynamic size flows."""
    if isinstance(exc.sym, StepInt):
        return DynamicShapeError(
            f"primitive {rec.name} (record {rec.index}, arguments {list(rec.arguments)!r}) runs in the body of a "
            f"loop the exporter recovered from the unrolled trace, and {exc.what} where it moves with the "
            f"iteration ({exc.sym!r}); keep that dimension static"
        )
    plan = exc.sym.plan
    sizes = ", ".join(f"{s}={v[0]}" for s, v in plan.sizes.items())
    symbol = (plan.symbols_of(exc.sym.values) or list(plan.sizes))[0]
    return DynamicShapeError(
        f"{plan.describe(exc.sym.values)} cannot be dynamic: primitive {rec.name} (record {rec.index}, "
        f"arguments {list(rec.arguments)!r}, inputs {[list(s.shape) for s in rec.inputs]}) {exc.what} "
        f"(it is {exc.sym.example} at {sizes}, and {list(exc.sym.values[1:])} at the other traced sizes). "
        "Keep that dimension static, or compute the value with MLX ops instead of Python numbers; "
        "if it floors the size (strided convolutions, pooling), declare the steps the model takes "
        f"sizes in: mlx2onnx.Dim({symbol!r}, multiple_of=N)"
    )
