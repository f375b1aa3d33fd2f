"""Loops recovered from unrolled traces: a Python loop over a dynamic size, as one ONNX loop.

A model that loops in Python over the sequence (``for t in range(T)``: mamba's selective
scan, rwkv7's state update, recurrent_gemma's linear recurrence) traces as the same block
of records T times. Traced at two lengths, the traces agree up to the loop and after it,
and differ by whole blocks inside it; :func:`recover_loops` finds each such run of
blocks and replaces it with one :data:`LOOP` record whose body is one block:

- the traces are first put in a canonical order: records that read constants only
  (weight transposes, ``-exp(A_log)``) move to the front, once each, wherever the loop
  first needed them;
- the coarse keys of two traces (record names, argument layouts, ranks) are compared
  from the front; where they part, the longer trace repeats a period ``p`` that the
  shorter one also repeats. The periodic run is grown backwards, and each phase of it is
  tried until its blocks form a loop (below). The first iterations the loop does not
  cover (an iteration 0 without a previous state, values computed once before the loop)
  stay before it, unrolled;
- blocks form a loop when every input of every record is the same in each block: a
  value of the same block, of the previous block (a carried state, whose first value
  comes from before the loop), or a value from outside (a weight, the whole sequence);
  their numbers are equal in every block, or, for a ``Slice`` or ``SliceUpdate``
  position, ``a * k + b`` at block ``k`` (a :class:`Step`, read in the graph from the
  iteration number); and after the loop, a block's values are read only as the last
  value of a carried state, or all of them, in order, by one ``Concatenate`` (a
  ``mx.stack`` of the steps): these become the loop's scan output.

The check of the blocks is the proof: the loop record computes what the unrolled records
computed, at every traced size, and :func:`~mlx2onnx.capture.dynamic.merge` then merges
the folded traces like any others (the trip count becomes a size, ``seq-1``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import DynamicShapeError
from .symbolic import SymInt, affine_fit
from .trace import GraphInput, GraphOutput, Primitive, TensorSpec, Trace

LOOP = "Loop"  # the record of a recovered loop (MLX has no primitive of this name)
STEPPED = ("Slice", "SliceUpdate")  # records whose positions may follow the iteration


@dataclass(frozen=True)
class Step:
    """A number of a block's record that is ``a * k + b`` at block ``k`` (one trace)."""

    a: int
    b: int


class LoopError(Exception):
    """These records repeat, but not as a loop ONNX can run: the reason."""


def loop_parts(rec: Primitive) -> tuple[Any, Trace, int]:
    """A :data:`LOOP` record's trip count, body and number of carried values. The body's
    inputs are the carried values, then the outside values it reads; its outputs are the
    carried values' next values, then the per-iteration values stacked by the loop. The
    record's inputs are the carried values' first values, then the same outside values;
    its outputs the carried values' last values, then the stacked ones (iterations first)."""
    trips, body, carried = rec.arguments
    return trips, body, carried


# -- canonical order ---------------------------------------------------------------------
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
        key = (rec.name, repr(rec.arguments), tuple(s.name for s in rec.inputs),
               tuple((tuple(s.shape), str(s.dtype)) for s in rec.outputs))
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
    anchors = sorted((n for n, rec in enumerate(records)
                      if all(records[c].name == "Concatenate" for c in readers[n])),
                     key=lambda n: (depth[n], n))
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
    return (rec.name, _erased(rec.arguments), None if rec.name == "Concatenate" else len(rec.inputs),
            tuple((len(o.shape), str(o.dtype)) for o in rec.outputs))


def _erased(x):
    if isinstance(x, tuple):
        return tuple(_erased(y) for y in x)
    return "#" if isinstance(x, (int, float)) and not isinstance(x, bool) else repr(x)


# -- finding the loops -----------------------------------------------------------------
def find_loops(short: Trace, long: Trace) -> list[tuple[int, int, int]]:
    """``(start, period, blocks)`` of each loop of ``short``, found where it and ``long``
    (traced at a size that runs the loops more often) part."""
    ka, kb = [coarse_key(r) for r in short.primitives], [coarse_key(r) for r in long.primitives]
    loops = []
    i = j = segment = 0
    while True:
        while i < len(ka) and j < len(kb) and ka[i] == kb[j]:
            i, j = i + 1, j + 1
        if i == len(ka) and j == len(kb):
            return loops
        shift = j - i
        for p in range(1, (i - segment) // 2 + 1):
            if ka[i - p:i] != ka[i - 2 * p:i - p] or kb[j:j + p] != kb[j - p:j]:
                continue
            lo = i - p
            while lo > segment and ka[lo - 1] == ka[lo - 1 + p]:
                lo -= 1
            found = _phase(short, ka, kb, lo, p, shift)
            if found is not None:
                start, blocks, more = found
                loops.append((start, p, blocks))
                i, j = start + blocks * p, start + shift + more * p
                segment = i
                break
        else:
            where = short.primitives[min(i, len(ka) - 1)]
            raise LoopError(
                f"the traces part at record {where.index} ({where.name}) and no block of records repeats there "
                "the same way at both sizes")
    return loops


def _phase(trace: Trace, ka, kb, lo: int, p: int, shift: int):
    """The first start in ``lo .. lo+p-1`` whose blocks form a loop: ``(start, blocks,
    blocks at the other size)``, or None."""
    reason = None
    for start in range(lo, lo + p):
        blocks = repeats(ka, start, p)
        more = repeats(kb, start + shift, p, ka[start:start + p])
        if blocks < 2 or more <= blocks:
            continue
        try:  # this loop alone (the loops before it are outside it)
            _fold_one(list(trace.primitives), list(trace.outputs), start, p, blocks, "_probe", trace)
            return start, blocks, more
        except LoopError as exc:
            reason = reason or exc
    if reason is not None:
        raise reason
    return None


def repeats(keys: list, start: int, p: int, template: list | None = None) -> int:
    """How many whole blocks of ``template`` (default: the block at ``start``) follow
    each other from ``start``."""
    template = keys[start:start + p] if template is None else template
    n = 0
    while keys[start + n * p:start + (n + 1) * p] == template:
        n += 1
    return n


def locate(trace: Trace, template: Trace, loops: list) -> list[tuple[int, int, int]]:
    """The loops of ``template`` (found by :func:`find_loops`) in ``trace``."""
    kx, ka = [coarse_key(r) for r in trace.primitives], [coarse_key(r) for r in template.primitives]
    found, a, x = [], 0, 0
    for start, p, blocks in loops:
        n = start - a
        if kx[x:x + n] != ka[a:start]:
            raise LoopError("the records around the loop differ between the traced sizes")
        x += n
        count = repeats(kx, x, p, ka[start:start + p])
        found.append((x, p, count))
        a, x = start + blocks * p, x + count * p
    if kx[x:] != ka[a:]:
        raise LoopError("the records after the loop differ between the traced sizes")
    return found


# -- folding -----------------------------------------------------------------------------
def fold(trace: Trace, loops: list) -> Trace:
    """``trace`` with each ``(start, period, blocks)`` run replaced by one loop record."""
    records, outputs, shift = list(trace.primitives), list(trace.outputs), 0
    for n, (start, p, blocks) in enumerate(loops):
        before = len(records)
        records, outputs = _fold_one(records, outputs, start + shift, p, blocks, f"_loop{n}", trace)
        shift += len(records) - before
    read = {s.name for rec in records for s in rec.inputs} | {o.spec.name for o in outputs}
    constants = tuple(c for c in trace.constants if c.spec.name in read)  # the steps' own indices go
    return replace(trace, primitives=tuple(records), outputs=tuple(outputs), constants=constants)


def _fold_one(records: list, outputs: list, lo: int, p: int, r: int, tag: str, trace: Trace):
    if r < 2:
        raise LoopError("the loop runs fewer than twice at a traced size")
    try:  # a last step that skips records the next step would have read, as one more step
        return _fold_blocks(records, outputs, lo, p, r, tag, trace, last=True)
    except LoopError:
        return _fold_blocks(records, outputs, lo, p, r, tag, trace, last=False)


UNSAFE = ("Gather", "GatherAxis", "GatherMM", "GatherQMM", "Scatter", "ScatterAxis", "DynamicSlice",
          "DynamicSliceUpdate")  # records that would index out of range in a step that never ran


def _fold_blocks(records: list, outputs: list, lo: int, p: int, r: int, tag: str, trace: Trace, last: bool):
    """:func:`_fold_one`; ``last``: the records after the ``r`` blocks that begin like a
    block are its last step, whose missing records nothing reads (jamba's scan does not
    slice the state after its last update). The loop then runs that step whole: only
    when the missing records can run there (their slices inside the input)."""
    blocks = [records[lo + k * p:lo + (k + 1) * p] for k in range(r)]
    if last:
        keys = [coarse_key(rec) for rec in blocks[-1]]
        e = 0
        while e < p - 1 and lo + r * p + e < len(records) and coarse_key(records[lo + r * p + e]) == keys[e]:
            e += 1
        if e == 0:
            raise LoopError("no partial last step")
        blocks.append(records[lo + r * p:lo + r * p + e])
    r = len(blocks)
    where = {s.name: (k, i, o) for k, block in enumerate(blocks)
             for i, rec in enumerate(block) for o, s in enumerate(rec.outputs)}
    template = blocks[1]
    counters = _counters(blocks, where, trace)
    classes: dict[tuple, tuple] = {}
    for k, block in enumerate(blocks):
        for i, rec in enumerate(block):
            _same_record(rec, template[i])
            for m, spec in enumerate(rec.inputs):
                source = where.get(spec.name)
                if (i, m) in counters:
                    kind = ("counter",)
                elif source is None:
                    kind = ("outer", spec.name)
                elif source[0] == k:
                    kind = ("in", source[1], source[2])
                elif source[0] == k - 1:
                    kind = ("prev", source[1], source[2])
                else:
                    raise LoopError(f"record {rec.index} ({rec.name}) reads a value from {k - source[0]} iterations back")
                if k == 0:
                    continue
                if classes.setdefault((i, m), kind) != kind:
                    raise LoopError(f"record {rec.index} ({rec.name}) reads other values in other iterations")
    carried: dict[tuple, TensorSpec] = {}  # (record, output) of the block -> its first value
    for i, rec in enumerate(blocks[0]):
        for m, spec in enumerate(rec.inputs):
            kind = classes[(i, m)]
            if kind[0] == "prev":
                first = carried.setdefault(kind[1:], spec)
                produced = template[kind[1]].outputs[kind[2]]
                if spec.name in where or first.name != spec.name or \
                        (tuple(spec.shape), spec.dtype) != (tuple(produced.shape), produced.dtype):
                    raise LoopError(f"the first iteration of record {rec.index} ({rec.name}) starts from another value")
            elif kind[0] == "in" and where.get(spec.name) != (0, *kind[1:]) or kind[0] == "outer" and kind[1] != spec.name:
                raise LoopError(f"the first iteration of record {rec.index} ({rec.name}) reads other values")
    state = list(carried)
    arguments = [_stepped([b[i].arguments for b in blocks if i < len(b)], template[i]) for i in range(p)]
    for i in range(len(blocks[-1]), p):  # the records the last step skips run there too
        _runs_in_last_step(template[i], arguments[i], r - 1)

    # After the loop: last values of carried states, and stacks of every iteration's value.
    finals = {key: TensorSpec(f"{tag}/last{j}", *_layout(template, key)) for j, key in enumerate(state)}
    scans: dict[tuple, TensorSpec] = {}
    reshaped: dict[tuple, TensorSpec] = {}
    extra: list[Primitive] = []

    def stacked(key, axis, index):
        if key not in scans:
            shape, dtype = _layout(template, key)
            scans[key] = TensorSpec(f"{tag}/steps{len(scans)}", (r, *shape), dtype)
        if (key, axis) not in reshaped:
            shape, dtype = _layout(template, key)
            scan = scans[key]
            perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(shape) + 1))
            moved = TensorSpec(f"{scan.name}/t{axis}", (*shape[:axis], r, *shape[axis:]), dtype)
            merged = TensorSpec(f"{scan.name}/r{axis}", (*shape[:axis], r * shape[axis], *shape[axis + 1:]), dtype)
            extra.append(Primitive(index, "Transpose", (perm,), (scan,), (moved,)))
            extra.append(Primitive(index, "Reshape", (merged.shape,), (moved,), (merged,)))
            reshaped[(key, axis)] = merged
        return reshaped[(key, axis)]

    def after(spec, what):
        k, i, o = where[spec.name]
        if k == r - 1 and (i, o) in finals:
            return finals[(i, o)]
        raise LoopError(f"{what} reads the value of record {blocks[k][i].index} ({blocks[k][i].name}) of "
                        f"iteration {k} alone, not as a state the loop carries or a stack of every iteration")

    rest = []
    for rec in records[lo + (r - 1) * p + len(blocks[-1]):]:
        inputs = list(rec.inputs)
        if rec.name == "Concatenate":
            inputs = _runs(inputs, where, r, lambda key: stacked(key, int(rec.arguments[0]) % len(rec.outputs[0].shape),
                                                                 rec.index))
        inputs = [after(s, f"record {rec.index} ({rec.name})") if s.name in where else s for s in inputs]
        rest.append(replace(rec, inputs=tuple(inputs)) if inputs != list(rec.inputs) else rec)
    outputs = [replace(o, spec=after(o.spec, "an output")) if o.spec.name in where else o for o in outputs]

    carry_in = {key: TensorSpec(f"{tag}/carry{j}", *_layout(template, key)) for j, key in enumerate(state)}
    outer: dict[str, TensorSpec] = {}
    body = []
    for i, rec in enumerate(template):
        inputs = []
        for m, spec in enumerate(rec.inputs):
            kind = classes[(i, m)]
            if kind[0] == "counter":  # the index as arange(a*k + b, a*k + b + 1) read as a scalar
                a, b = counters[(i, m)]
                row = TensorSpec(f"{tag}/count{i}_{m}/row", (1,), spec.dtype)
                spec = TensorSpec(f"{tag}/count{i}_{m}", tuple(spec.shape), spec.dtype)
                body.append(Primitive(rec.index, "Arange", (Step(a, b), Step(a, b + 1), 1.0), (), (row,)))
                body.append(Primitive(rec.index, "Reshape", (tuple(spec.shape),), (row,), (spec,)))
            elif kind[0] == "prev":
                spec = carry_in[kind[1:]]
            elif kind[0] == "outer":
                outer.setdefault(spec.name, spec)
            inputs.append(spec)
        body.append(replace(rec, arguments=arguments[i], inputs=tuple(inputs)))
    produced = [template[i].outputs[o] for i, o in state] + [template[i].outputs[o] for i, o in scans]
    inner = Trace(
        inputs=tuple(GraphInput(s, s.name, None, None) for s in [*carry_in.values(), *outer.values()]),
        outputs=tuple(GraphOutput(s, None) for s in produced),
        constants=(), primitives=tuple(body), device=trace.device, function_name=tag,
    )
    loop = Primitive(blocks[0][0].index, LOOP, (r, inner, len(state)),
                     tuple(carried[key] for key in state) + tuple(outer.values()),
                     tuple(finals.values()) + tuple(scans.values()))
    return records[:lo] + [loop] + extra + rest, outputs


def _runs_in_last_step(rec: Primitive, arguments: tuple, k: int) -> None:
    """Refuse a record the last step skipped that cannot run there: one that indexes by
    data, or a slice that would start outside its input at step ``k``."""
    if rec.name in UNSAFE:
        raise LoopError(f"record {rec.index} ({rec.name}) would index in a step that never ran")
    if rec.name not in STEPPED:
        return
    start = arguments[0] if rec.name == "Slice" else arguments[1]
    width = rec.outputs[0].shape if rec.name == "Slice" else rec.inputs[1].shape
    for d, s in enumerate(start):
        if isinstance(s, Step) and not 0 <= s.a * k + s.b <= rec.inputs[0].shape[d] - width[d]:
            raise LoopError(f"record {rec.index} ({rec.name}) would slice outside its input in a step that never ran")


def _counters(blocks: list, where: dict, trace: Trace) -> dict[tuple, tuple[int, int]]:
    """The inputs that read a constant integer ``a * k + b`` in block ``k`` (``x[i]``
    gathers with the Python integer ``i``): ``{(record, input): (a, b)}``."""
    constants = {c.spec.name: c.array for c in trace.constants}
    found = {}
    for i, rec in enumerate(blocks[0]):
        for m, spec in enumerate(rec.inputs):
            names = [b[i].inputs[m].name for b in blocks if i < len(b)]
            arrays = [constants.get(n) for n in names]
            if len(set(names)) == 1 or any(n in where for n in names) or any(
                    a is None or a.size != 1 or not np.issubdtype(np.dtype(str(a.dtype).split(".")[-1]), np.integer)
                    for a in arrays):
                continue
            values = [int(a.item()) for a in arrays]
            step = values[1] - values[0]
            if step and all(v == values[0] + step * k for k, v in enumerate(values)):
                found[(i, m)] = (step, values[0])
    return found


def _layout(template: list, key: tuple) -> tuple:
    spec = template[key[0]].outputs[key[1]]
    return tuple(spec.shape), spec.dtype


def _same_record(rec: Primitive, like: Primitive) -> None:
    if rec.name != like.name or len(rec.inputs) != len(like.inputs) or any(
            (tuple(a.shape), a.dtype) != (tuple(b.shape), b.dtype) for a, b in zip(rec.outputs, like.outputs)) \
            or len(rec.outputs) != len(like.outputs):
        raise LoopError(f"record {rec.index} ({rec.name}) differs from its place in the next iteration")


def _runs(inputs: list, where: dict, r: int, stacked) -> list:
    """``inputs`` of a Concatenate with each run of every iteration's value, in order,
    replaced by the loop's stack of it."""
    out, m = [], 0
    while m < len(inputs):
        source = where.get(inputs[m].name)
        if source is not None and source[0] == 0 and m + r <= len(inputs) and all(
                where.get(inputs[m + k].name) == (k, *source[1:]) for k in range(r)):
            out.append(stacked(source[1:]))
            m += r
        else:
            out.append(inputs[m])
            m += 1
    return out


def _stepped(values: list, rec: Primitive):
    """The arguments of one record over the blocks: equal, or (positions of a Slice or
    SliceUpdate) :class:`Step`."""
    first = values[0]
    if isinstance(first, tuple):
        if any(not isinstance(v, tuple) or len(v) != len(first) for v in values):
            raise LoopError(f"record {rec.index} ({rec.name}) has other arguments in other iterations")
        return tuple(_stepped([v[n] for v in values], rec) for n in range(len(first)))
    if all(v == first and type(v) is type(first) for v in values):
        return first
    numbers = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    a = values[1] - first if numbers else None
    if rec.name in STEPPED and numbers and all(v == first + a * k for k, v in enumerate(values)):
        return Step(a, first)
    raise LoopError(f"record {rec.index} ({rec.name}) has arguments {values[0]!r}, {values[1]!r}, ... in its "
                    "iterations, not one position that moves by the same step")


# -- the traces of a dynamic export -------------------------------------------------------
def recover_loops(traces: list, plan) -> tuple[list, str | None]:
    """``traces`` (at the sizes of ``plan``) with their loops folded, when their record
    counts differ by whole blocks of loops that run a fixed number of times fewer than a
    size: ``(folded, None)``; else ``(traces, reason)`` (the reason None when every trace
    has as many records)."""
    counts = [len(t.primitives) for t in traces]
    if len(set(counts)) == 1:
        return traces, None
    short = min(range(len(traces)), key=lambda t: counts[t])
    long = next(t for t in range(len(traces)) if counts[t] > counts[short])
    reason = None
    for order in ORDERS:  # MLX's own order first: the reason a loop is refused is given in it
        ordered = [hoisted(t, order) for t in traces]
        try:
            loops = find_loops(ordered[short], ordered[long])
            found = [locate(t, ordered[short], loops) for t in ordered]
            _follow_sizes([[blocks for _, _, blocks in f] for f in found], plan)
            return [fold(t, f) for t, f in zip(ordered, found)], None
        except LoopError as exc:
            reason = reason or str(exc)
    return traces, reason


def _follow_sizes(blocks: list, plan) -> None:
    """Each loop's number of blocks must be a size less a fixed number in every trace."""
    for n, counts in enumerate(zip(*blocks)):
        if not any(affine_fit(counts, sizes) == (1, b) for sizes in plan.sizes.values() for b in [counts[0] - sizes[0]]):
            sizes = ", ".join(f"{s}={list(v)}" for s, v in plan.sizes.items())
            raise LoopError(f"the loop repeats {list(counts)} times at the traced sizes ({sizes}), not once per "
                            "position of a dynamic dimension less a fixed number")


ORDERS = ("listed", "sunk")  # the record orders recover_loops tries (see hoisted)


def check_trips(trace: Trace, plan) -> None:
    """Refuse a loop that would run a negative number of times at the smallest sizes the
    export admits (its first iterations are unrolled before it): name the bound to declare."""
    for rec in trace.primitives:
        trips = loop_parts(rec)[0] if rec.name == LOOP else None
        if not isinstance(trips, SymInt):
            continue
        for symbol, sizes in plan.sizes.items():
            fit = affine_fit(trips.values, sizes)
            if fit is None or fit[0] != 1 or plan.lowest(symbol) + fit[1] >= 0:
                continue
            need, (label, axis) = int(-fit[1]), plan.where[symbol]
            error = DynamicShapeError(
                f"dimension {axis} ({symbol!r}) of input {label!r}: the loop recovered over it runs {trips!r} times "
                f"after {need} iterations unrolled before it, so it needs {symbol} >= {need}: declare "
                f"mlx2onnx.Dim({symbol!r}, min={need})")
            error.trace = next(t for t, v in enumerate(trips.values) if v != trips.values[0])
            error.constant = None
            raise error
