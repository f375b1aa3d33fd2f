"""The catalogue of primitives: every name MLX's export callback can report and every
registered one, with its status (handled, refused with its reason, not emitted, missing)
and the restriction its handler documents. ``mlx2onnx primitives`` prints it;
``scripts/generate_docs.py`` adds the ONNX ops and dtypes the parity cases exercise
(docs/primitives.md)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from ..capture.records import CALLBACK_PRIMITIVES, NOT_EMITTED
from . import registry


@dataclass
class Observed:
    """What exporting the parity cases showed of one primitive."""

    ops: set[str] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)
    cases: int = 0


_DTYPE_ORDER = [
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "bool",
    "complex64",
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


def rows(seen: dict[str, Observed] | None = None, covers: dict[str, str] | None = None) -> list[list[str]]:
    """[primitive, status, ONNX ops, restriction, tested dtypes, reason] per primitive."""
    seen, covers = seen or {}, covers or {}
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
