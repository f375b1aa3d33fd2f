"""The order of a trace's records in which each iteration of a loop is one block."""

from __future__ import annotations

from dataclasses import replace

from ..trace import Primitive, Trace

ORDERS = ("listed", "sunk")  # the record orders recover_loops tries (see hoisted)


def hoisted(trace: Trace, order: str = "listed") -> Trace:
    """``trace`` with the records that read constants only first, each computed once; the
    others as MLX listed them (``order="listed"``), or ``"sunk"`` (:func:`_sunk`)."""
    live = {i.spec.name for i in trace.inputs}
    first, rest, seen, rename = [], [], {}, {}
    for rec in trace.primitives:
        rec = _renamed(rec, rename)
        if any(s.name in live for s in rec.inputs):
            live.update(s.name for s in rec.outputs)
            rest.append(rec)
            continue
        key = (
            rec.name,
            repr(rec.arguments),
            tuple(s.name for s in rec.inputs),
            tuple((tuple(s.shape), str(s.dtype)) for s in rec.outputs),
        )
        if key in seen:
            rename.update({a.name: b for a, b in zip(rec.outputs, seen[key].outputs)})
            continue
        seen[key] = rec
        first.append(rec)
    outputs = tuple(replace(o, spec=rename.get(o.spec.name, o.spec)) for o in trace.outputs)
    return replace(trace, primitives=tuple(first + (_sunk(rest) if order == "sunk" else rest)), outputs=outputs)


def _sunk(records: list) -> list:
    """``records`` in the order that keeps each iteration of a loop together: a record
    that is read only by a ``Concatenate`` (a stack of every iteration) or by nothing but
    the outputs stays where its depth puts it; every other record goes just before the
    first record that reads it, the deepest of a record's inputs first. (MLX lists records
    depth first from the outputs in input order, so ``x[:, t] @ W + h @ U`` lists every
    step's ``x[:, t] @ W`` before the first state.)"""
    made = {s.name: n for n, rec in enumerate(records) for s in rec.outputs}
    readers: list[list[int]] = [[] for _ in records]
    depth = [0] * len(records)
    for n, rec in enumerate(records):
        for s in rec.inputs:
            if s.name in made:
                readers[made[s.name]].append(n)
                depth[n] = max(depth[n], depth[made[s.name]] + 1)
    key: list = [None] * len(records)
    anchors = sorted(
        (n for n, rec in enumerate(records) if all(records[c].name == "Concatenate" for c in readers[n])),
        key=lambda n: (depth[n], n),
    )
    for rank, n in enumerate(anchors):
        key[n] = (rank, 1)
    for n in range(len(records) - 1, -1, -1):
        if key[n] is None:
            first = min(key[c] for c in readers[n])
            key[n] = first[:-1] + (0, -depth[n], n, 1)  # the deepest of a record's inputs first
    return [records[n] for n in sorted(range(len(records)), key=key.__getitem__)]


def _renamed(rec: Primitive, rename: dict) -> Primitive:
    if not any(s.name in rename for s in rec.inputs):
        return rec
    return replace(rec, inputs=tuple(rename.get(s.name, s) for s in rec.inputs))


def coarse_key(rec: Primitive) -> tuple:
    """What two traces at other sizes, and two blocks of one loop, have in common (a
    Concatenate may stack every iteration: its number of inputs is not)."""
    return (
        rec.name,
        _erased(rec.arguments),
        None if rec.name == "Concatenate" else len(rec.inputs),
        tuple((len(o.shape), str(o.dtype)) for o in rec.outputs),
    )


def _erased(x):
    if isinstance(x, tuple):
        return tuple(_erased(y) for y in x)
    return "#" if isinstance(x, (int, float)) and not isinstance(x, bool) else repr(x)
