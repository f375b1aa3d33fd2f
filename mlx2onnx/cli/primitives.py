"""``mlx2onnx primitives``: the table of MLX primitives mlx2onnx supports or refuses."""

from __future__ import annotations

import json

from .common import EXIT_OK
from .progress import Progress


# -- primitives ------------------------------------------------------------------------------
def coverage_rows() -> list[tuple[str, str, str]]:
    """(primitive, status, note) for every primitive MLX can emit and every registered one
    (statuses handled / refused / not emitted / missing)."""
    from ..translate import catalog

    result = []
    for name, status, _ops, restriction, _tested, reason in catalog.rows():
        result.append((name.strip("`"), status, reason if reason else restriction.replace("\\|", "|")))
    return result


def cmd_primitives(ns, progress: Progress) -> int:
    rows = coverage_rows()
    if ns.status:
        rows = [r for r in rows if r[1].split(" ")[0] == ns.status or r[1] == ns.status]
    if ns.json:
        print(json.dumps([{"primitive": n, "status": s, "note": d} for n, s, d in rows], indent=2))
        return EXIT_OK
    width = max((len(n) for n, _, _ in rows), default=9)
    swidth = max((len(s) for _, s, _ in rows), default=6)
    print(f"{'primitive':<{width}}  {'status':<{swidth}}  note")
    for name, status, note in rows:
        print(f"{name:<{width}}  {status:<{swidth}}  {note}")
    counts: dict[str, int] = {}
    for _, status, _ in rows:
        key = status.split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    print("\n" + ", ".join(f"{c} {k}" for k, c in counts.items()))
    return EXIT_OK
