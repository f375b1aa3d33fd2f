"""The handler API: what a handler may read from ``ctx`` and how it emits.

A handler is one function per MLX primitive, registered with
``@registry.handles("Name")`` (or ``registry.register`` from a table):
``handler(ctx, rec) -> list[ir.Value]``, one ONNX value per ``rec.outputs``. It reads
the record (``rec.args.<field>`` as :mod:`~mlx2onnx.capture.records` names them,
``rec.inputs`` / ``rec.outputs`` as :class:`~mlx2onnx.capture.trace.TensorSpec`) and
``ctx`` through the members of :data:`HANDLER_API` only: the translator's own state
(its table of values, node list, initializers, the trace) is not part of it, and
``tests/translate/test_coverage.py`` holds every module of ``op_mappings/`` to this list.

Choices that depend on the target opset go through ``ctx.has(feature)``, one name per
feature in :data:`~.opset.FEATURES`; choices that depend on onnxruntime's kernels go
through ``ctx.has_kernel`` / ``ctx.work_dtype`` / ``ctx.run`` (:mod:`~.kernels`). The
records the exporter makes itself (a recovered loop) have a handler per record kind
(:func:`~.registry.handles_kind`), called with a third argument that translates the
records they hold.
"""

from __future__ import annotations

import inspect

HANDLER_API: dict[str, dict[str, str]] = {
    "The export's choices": {
        "settings": "The export's `ExportSettings`, read only (`quantized_weights`, `int8_activations`, ...).",
        "has": "Whether the target opset has a named feature (`opset.FEATURES`: the one place opset choices are named).",
        "needs": "The end of a refusal for want of a feature: the opset targeted and the one needed.",
        "has_kernel": "Whether onnxruntime's CPU provider runs an op on a dtype at the target opset.",
        "serves": "Whether onnxruntime has a kernel, of any type, for the op version the target opset uses.",
        "work_dtype": "The dtype to compute an op in for a value carried as `dtype` (a kernel exists; portable).",
        "portable": "Whether the export targets every portable runtime (choose spellings they all run exactly).",
        "opset": "The target opset, for messages; choose spellings with `has`.",
        "carried": "The MLX dtype whose ONNX type carries `dtype` in this export (the float policy).",
        "onnx_type": "The ONNX element type that carries MLX dtype `dtype`.",
        "numpy_type": "The NumPy dtype of that ONNX type.",
    },
    "Reading the record's values": {
        "inputs": "The ONNX values of the record's inputs, in order.",
        "value": "The ONNX value of one MLX value (a constant becomes an initializer on first use).",
        "constant": "`(array, parameter path)` when an MLX value is a constant, else None; makes no initializer.",
    },
    "Constants": {
        "const": "An initializer holding a NumPy array (shared with an equal one already made).",
        "scalar": "A 0-d constant of an MLX dtype.",
        "ints": "An int64 constant (1-D for a sequence, 0-d for one number), computed from `Shape` where it holds dynamic sizes.",
        "empty": "A zero-size tensor of a value's type with a given shape.",
    },
    "Emitting": {
        "op": "`ctx.op.X(*inputs, **attributes)` emits ONNX op `X` (`_outputs=n` for several outputs).",
        "run": "Emit an op on values of an MLX dtype, computing in the nearest dtype onnxruntime has a kernel for.",
        "via": "Build a composite in the dtype onnxruntime has kernels for, result back in `dtype`.",
        "cast": "Cast to (the dtype carrying) an MLX dtype; no node when it already is one.",
        "cast_like": "Cast to an ONNX element type.",
        "reshape": "Reshape to a shape that may hold dynamic sizes.",
        "slice": "Slice with starts, ends, axes and steps given as numbers.",
        "squeeze": "Squeeze axes.",
        "unsqueeze": "Unsqueeze axes.",
        "split": "Split along an axis into parts of the given sizes.",
        "pad": "Pad, `pads` in ONNX layout (all begins, then all ends).",
        "reduce": "A Reduce* op over axes, spelled for the target opset.",
        "reduce_via": "`reduce` computed in a dtype onnxruntime has a kernel for, result in `dtype`.",
        "isnan": "IsNaN of a value of an MLX dtype (in a dtype that has the kernel).",
        "isinf": "IsInf of a value of an MLX dtype.",
        "axis_range": "int64 `0 .. length-1` laid along one axis (the length may be dynamic).",
        "fresh": "A name not yet used in the graph, from a base (for subgraphs a handler builds).",
    },
    "Leaving facts for the passes": {
        "mark": "Leave a node metadata key of `markers` on the node that makes a value.",
        "marking": "A block in which every node emitted gets a node metadata key.",
        "relaid": "A constant stored in another layout under its own name, once per constant.",
    },
    "Refusing": {
        "fail": "A `ConversionError` naming the record: `raise ctx.fail('why, and what would work')`.",
    },
}


def members() -> set[str]:
    """Every name a handler may read from ``ctx``."""
    return {name for section in HANDLER_API.values() for name in section}


def _signature(cls, name: str) -> str:
    attribute = inspect.getattr_static(cls, name, None)
    if callable(attribute) and not isinstance(attribute, property):
        target = attribute.__func__ if isinstance(attribute, staticmethod) else attribute
        parameters = list(inspect.signature(target).parameters.values())
        if parameters and parameters[0].name == "self":
            parameters = parameters[1:]
        shown = [str(p.replace(annotation=inspect.Parameter.empty)) for p in parameters]
        return f"ctx.{name}({', '.join(shown)})"
    return f"ctx.{name}"


def reference_markdown() -> str:
    """docs/handlers.md: the handler contract, the record kinds and :data:`HANDLER_API`
    with each member's signature as :class:`~.context.Context` defines it."""
    from .context import Context

    lines = [
        "# The handler API",
        "",
        "Generated by `python -m scripts.generate_docs handlers.md` from",
        "`mlx2onnx/translate/handler_api.py`; do not edit by hand.",
        "",
        "## Records and their handlers",
        "",
        "A trace holds records of two kinds (`record.kind`), each translated by its own handler:",
        "",
        "| kind | record | handler |",
        "|---|---|---|",
        "| `primitive` | `capture.trace.Primitive`: one MLX primitive as the callback reported it "
        "(`name`, `arguments`, `inputs`, `outputs`; `rec.args` names the arguments, "
        "[records.md](records.md)) | `handler(ctx, rec)`, registered by primitive name with "
        '`@registry.handles("Name")`, or `registry.refuses(name, reason, advice)` |',
        "| `loop` | `capture.trace.LoopRecord`: a Python loop over a dynamic size, recovered from the "
        "unrolled traces (`trips`, `body` a trace of one step, `carried`, `inputs`, `outputs`) | "
        '`handler(ctx, rec, translate)`, registered by kind with `@registry.handles_kind("loop")`; '
        "`translate(records)` translates the body |",
        "",
        "A handler returns one ONNX value per output of the record. It reads the record and the",
        "members of `ctx` below, nothing else (`tests/translate/test_coverage.py` holds every module of",
        "`op_mappings/` to this list); a family of handlers imports shared helper modules, never",
        "another family.",
    ]
    for section, entries in HANDLER_API.items():
        lines += ["", f"## {section}", "", "| member | what it gives |", "|---|---|"]
        lines += [f"| `{_signature(Context, name)}` | {text} |" for name, text in entries.items()]
    return "\n".join(lines) + "\n"
