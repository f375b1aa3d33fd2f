"""Translate: dispatch every primitive record of a :class:`Trace` to its handler."""

from __future__ import annotations

from collections import Counter

from . import registry
from .capture import Trace
from .context import Context, is_complex, refuse_complex_io
from .errors import ConversionError, Mlx2OnnxError, UnsupportedPrimitiveError


def check_supported(trace: Trace) -> None:
    """Raise one :class:`UnsupportedPrimitiveError` naming every primitive we cannot export."""
    counts = Counter(p.name for p in trace.primitives)
    missing = {n: c for n, c in counts.items() if registry.lookup(n) is None and registry.refusal(n) is None}
    refused = {n: (c, str(registry.refusal(n))) for n, c in counts.items() if registry.refusal(n) is not None}
    if missing or refused:
        raise UnsupportedPrimitiveError(missing, refused)


def translate(trace: Trace, ctx: Context, input_names: list[str]) -> None:
    """Fill ``ctx`` with the ONNX nodes for every record of ``trace``."""
    check_supported(trace)
    for graph_input, name in zip(trace.inputs, input_names):
        ctx.bind_input(graph_input.spec, name)
    for graph_output in trace.outputs:
        refuse_complex_io(graph_output.spec, "graph output")
    for rec in trace.primitives:
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
                outputs = handler(ctx, rec)
            except Mlx2OnnxError:
                raise
            except Exception as exc:  # a handler bug: say where it happened
                raise ConversionError(
                    rec.name,
                    f"handler {handler.__module__}.{handler.__name__} failed on arguments "
                    f"{list(rec.arguments)!r} with inputs {[(s.shape, str(s.dtype)) for s in rec.inputs]}: "
                    f"{type(exc).__name__}: {exc}",
                    rec.index,
                ) from exc
            ctx.bind_outputs(rec, outputs)
