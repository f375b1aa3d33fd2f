"""Generate ``docs/primitives.md``: every primitive MLX can emit and how it is exported.

The table is built from the handler registry and the parity case tables, never by hand:

* status: handled, refused (with the registered reason), not emitted (MLX removes the
  primitive before export) or missing;
* ONNX ops: the op types of the nodes each primitive's handler emitted while exporting
  every parity case (nodes carry ``mlx.primitive`` = ``"Name:index"`` metadata);
* restrictions: a handler's ``RESTRICTIONS`` note (module-level dict keyed by primitive),
  else the first line of its docstring;
* tested dtypes: the dtypes of the primitive's first input (its output when it has none)
  in the records the parity cases traced.

Run from a checkout (the case tables live in ``tests/``)::

    python -m mlx2onnx.coverage --write docs/primitives.md
    python -m mlx2onnx.coverage --check docs/primitives.md
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from . import dtypes
from .translate import registry
from .exporter import Exporter

# The keys of PrimitiveFactory in MLX's mlx/export.cpp (0.32.2 source), plus FloorDivide
# (added in 0.32.4): every name the export callback can report.
CALLBACK_PRIMITIVES = (
    "Abs", "Add", "AddMM", "Arange", "ArcCos", "ArcCosh", "ArcSin", "ArcSinh", "ArcTan", "ArcTan2",
    "ArcTanh", "ArgPartition", "ArgReduce", "ArgSort", "AsStrided", "AsType", "BitwiseBinary",
    "BlockMaskedMM", "Broadcast", "BroadcastAxes", "Ceil", "Cholesky", "Concatenate", "Conjugate",
    "Convolution", "Copy", "Cos", "Cosh", "CustomKernel", "Depends", "DivMod", "Divide",
    "DynamicSlice", "DynamicSliceUpdate", "Eig", "Eigh", "Equal", "Erf", "ErfInv", "Exp",
    "ExpandDims", "Expm1", "FFT", "Flatten", "Floor", "FloorDivide", "Full", "Gather", "GatherAxis",
    "GatherMM", "GatherQMM", "Greater", "GreaterEqual", "Hadamard", "Imag", "Inverse", "LayerNorm",
    "LayerNormVJP", "Less", "LessEqual", "Log", "Log1p", "LogAddExp", "LogSumExp", "LogicalAnd",
    "LogicalNot", "LogicalOr", "MaskedScatter", "Matmul", "Maximum", "Minimum", "Multiply",
    "Negative", "NotEqual", "NumberOfElements", "Pad", "Partition", "Power", "QRF", "Quantize",
    "QuantizedMatmul", "RMSNorm", "RMSNormVJP", "RandomBits", "Real", "Reduce", "Remainder",
    "Reshape", "RoPE", "Round", "SVD", "ScaledDotProductAttention", "Scan", "Scatter",
    "ScatterAxis", "SearchSorted", "Select", "Sigmoid", "Sign", "Sin", "Sinh", "Slice",
    "SliceUpdate", "Softmax", "Sort", "Split", "Sqrt", "Square", "Squeeze", "StopGradient",
    "Subtract", "Tan", "Tanh", "Transpose", "Unflatten", "View",
)

# In the factory, but removed by MLX's compile_simplify before the callback sees them.
NOT_EMITTED = {
    "Copy": "removed by MLX's simplify pass before export (a no-op copy)",
    "StopGradient": "removed by MLX's simplify pass before export (no-op in inference)",
}

DOC_OPSET = 28  # fixed, so the table does not depend on the installed onnxruntime


@dataclass
class Observed:
    ops: set[str] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)
    cases: int = 0


def tests_dir() -> Path:
    here = Path(__file__).resolve().parent.parent / "tests"
    if not (here / "harness.py").exists():
        raise SystemExit("mlx2onnx.coverage needs the tests/ directory of a source checkout (case tables)")
    return here


def load_cases():
    """Every parity case and every module's COVERS set (tests/ is put on sys.path)."""
    path = str(tests_dir())
    if path not in sys.path:
        sys.path.insert(0, path)
    cases_pkg = importlib.import_module("cases")
    modules = [
        importlib.import_module(f"cases.{info.name}")
        for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda i: i.name)
    ]
    found, covers = [], {}
    for module in modules:
        found.extend(getattr(module, "CASES", []))
        for name in getattr(module, "COVERS", ()):
            covers.setdefault(name, module.__name__.split(".")[-1])
    return found, covers


def observe(cases, opset: int = DOC_OPSET) -> dict[str, Observed]:
    """Export every (case, dtype) once and record ONNX op types and dtypes per primitive."""
    harness = importlib.import_module("harness")
    # What the handlers emit (no optimisation passes), under a fixed float policy, so the
    # table depends neither on the passes nor on the installed onnxruntime's kernels.
    exporter = Exporter(opset=opset, check=False, optimize=False, bfloat16="float32")
    seen: dict[str, Observed] = defaultdict(Observed)
    for case in cases:
        if case.xfail:
            continue
        for dtype in case.dtypes:
            try:
                args, kwargs = harness.make_inputs(case, dtype)
                trace = exporter.trace(case.fn, *args, **kwargs)
                model = exporter.trace_to_ir(trace)
            except Exception:  # a case that does not export yet documents nothing
                continue
            for rec in trace.primitives:
                spec = rec.inputs[0] if rec.inputs else rec.outputs[0]
                entry = seen[rec.name]
                entry.dtypes.add(dtypes.name(spec.dtype))
                entry.cases += 1
            for node in model.graph:
                tag = node.metadata_props.get("mlx.primitive")
                if tag:
                    seen[tag.rsplit(":", 1)[0]].ops.add(node.op_type)
    return seen


_DTYPE_ORDER = [
    "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "bool", "complex64",
]


def _dtype_list(names) -> str:
    return ", ".join(sorted(names, key=lambda n: (_DTYPE_ORDER.index(n) if n in _DTYPE_ORDER else 99, n)))


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def restriction(name: str) -> str:
    handler = registry.lookup(name)
    if handler is None:
        return ""
    module = sys.modules.get(handler.__module__)
    notes = getattr(module, "RESTRICTIONS", {}) or {}
    if name in notes:
        return notes[name]
    doc = (handler.__doc__ or "").strip()
    first = doc.split("\n\n", 1)[0]
    return " ".join(first.split())


def rows(seen: dict[str, Observed], covers: dict[str, str]) -> list[list[str]]:
    handlers, refusals = registry.handlers(), registry.refusals()
    complex_ok = set(registry.complex_primitives())
    names = sorted(set(CALLBACK_PRIMITIVES) | set(handlers) | set(refusals))
    table = []
    for name in names:
        obs = seen.get(name, Observed())
        tested = _dtype_list(obs.dtypes)
        if name in covers and not obs.dtypes:
            tested = f"hand-built records ({covers[name]})"
        reason = ""
        if name in handlers:
            status = "handled" + (" (+complex64)" if name in complex_ok else "")
        elif name in refusals:
            status, reason = "refused", str(refusals[name])
        elif name in NOT_EMITTED:
            status, reason = "not emitted", NOT_EMITTED[name]
        else:
            status = "missing"
        ops = ", ".join(sorted(obs.ops))
        if not ops and obs.cases:
            ops = "none (a constant initializer, or the input value reused)"
        table.append([f"`{name}`", status, ops, _cell(restriction(name)), tested, _cell(reason)])
    return table


def generate(opset: int = DOC_OPSET) -> str:
    cases, covers = load_cases()
    seen = observe(cases, opset)
    table = rows(seen, covers)
    counts = defaultdict(int)
    for row in table:
        counts[row[1].split(" ")[0] if not row[1].startswith("not") else "not emitted"] += 1
    lines = [
        "# MLX primitives and their ONNX export",
        "",
        "Generated by `python -m mlx2onnx.coverage --write docs/primitives.md` from the handler",
        "registry (`op_mappings/`) and the parity case tables (`tests/cases/`); do not edit by hand.",
        f"ONNX ops are those emitted while exporting every parity case at opset {opset}; tested dtypes",
        "are the dtypes of each primitive's first input in those cases. `+complex64`: the handler",
        "also accepts complex values inside the graph (carried as float32 pairs, see `op_mappings/fft.py`).",
        "",
        f"{len(table)} primitives: " + ", ".join(f"{counts[k]} {k}" for k in ("handled", "refused", "not emitted", "missing") if counts[k]) + ".",
        "",
        "| primitive | status | ONNX ops emitted | restrictions | tested dtypes | reason when refused |",
        "|---|---|---|---|---|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in table]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mlx2onnx.coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="write the table to PATH")
    parser.add_argument("--check", metavar="PATH", help="exit 1 when PATH differs from the generated table")
    parser.add_argument("--opset", type=int, default=DOC_OPSET)
    options = parser.parse_args(argv)
    text = generate(options.opset)
    if options.check:
        current = Path(options.check).read_text() if Path(options.check).exists() else ""
        if current != text:
            print(f"{options.check} is stale: run python -m mlx2onnx.coverage --write {options.check}")
            return 1
        return 0
    if options.write:
        Path(options.write).parent.mkdir(parents=True, exist_ok=True)
        Path(options.write).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
