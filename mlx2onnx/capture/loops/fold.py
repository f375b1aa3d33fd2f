"""Folding: a run of blocks checked to be one loop and replaced by a loop record."""

from __future__ import annotations

from dataclasses import replace

import mlx.core as mx

from ...errors import LoopError
from ..trace import GraphInput, GraphOutput, LoopRecord, Primitive, TensorSpec, Trace
from .order import coarse_key
from .steps import STEPPED, Step


def fold(trace: Trace, loops: list) -> Trace:
    """``trace`` with each ``(start, period, blocks)`` run replaced by one loop record."""
    records, outputs, shift = list(trace.primitives), list(trace.outputs), 0
    for n, (start, p, blocks) in enumerate(loops):
        before = len(records)
        records, outputs = fold_one(records, outputs, start + shift, p, blocks, f"_loop{n}", trace)
        shift += len(records) - before
    read = {s.name for rec in records for s in rec.inputs} | {o.spec.name for o in outputs}
    constants = tuple(c for c in trace.constants if c.spec.name in read)  # the steps' own indices go
    return replace(trace, primitives=tuple(records), outputs=tuple(outputs), constants=constants)


def fold_one(records: list, outputs: list, lo: int, p: int, r: int, tag: str, trace: Trace):
    if r < 2:
        raise LoopError("the loop runs fewer than twice at a traced size")
    try:  # a last step that skips records the next step would have read, as one more step
        return _fold_blocks(records, outputs, lo, p, r, tag, trace, last=True)
    except LoopError:
        return _fold_blocks(records, outputs, lo, p, r, tag, trace, last=False)


UNSAFE = (
    "Gather",
    "GatherAxis",
    "GatherMM",
    "GatherQMM",
    "Scatter",
    "ScatterAxis",
    "DynamicSlice",
    "DynamicSliceUpdate",
)  # records that would index out of range in a step that never ran


def _fold_blocks(records: list, outputs: list, lo: int, p: int, r: int, tag: str, trace: Trace, last: bool):
    """:func:`fold_one`; ``last``: the records after the ``r`` blocks that begin like a
    block are its last step, whose missing records nothing reads (jamba's scan does not
    slice the state after its last update). The loop then runs that step whole: only
    when the missing records can run there (their slices inside the input)."""
    blocks = _blocks(records, lo, p, r, last)
    where = {
        s.name: (k, i, o)
        for k, block in enumerate(blocks)
        for i, rec in enumerate(block)
        for o, s in enumerate(rec.outputs)
    }
    template = blocks[1]
    counters = _counters(blocks, where, trace)
    classes = _classes(blocks, where, counters)
    carried = _first_values(blocks, where, classes)
    arguments = [_stepped([b[i].arguments for b in blocks if i < len(b)], template[i]) for i in range(p)]
    for i in range(len(blocks[-1]), p):  # the records the last step skips run there too
        _runs_in_last_step(template[i], arguments[i], len(blocks) - 1)
    exits = _Exits(blocks, where, list(carried), tag)
    rest = [exits.read(rec) for rec in records[lo + (len(blocks) - 1) * p + len(blocks[-1]) :]]
    outputs = [replace(o, spec=exits.last(o.spec, "an output")) if o.spec.name in where else o for o in outputs]
    body, outer = _body(template, classes, counters, arguments, exits, tag, trace)
    loop = LoopRecord(
        blocks[0][0].index,
        len(blocks),
        body,
        len(carried),
        tuple(carried.values()) + tuple(outer),
        tuple(exits.finals.values()) + tuple(exits.scans.values()),
    )
    return records[:lo] + [loop] + exits.extra + rest, outputs


def _blocks(records: list, lo: int, p: int, r: int, last: bool) -> list[list]:
    """The ``r`` blocks of ``p`` records from ``lo``, and with ``last`` the partial block
    after them (:class:`LoopError` when there is none)."""
    blocks = [records[lo + k * p : lo + (k + 1) * p] for k in range(r)]
    if last:
        keys, start, e = [coarse_key(rec) for rec in blocks[-1]], lo + r * p, 0
        while e < p - 1 and start + e < len(records) and coarse_key(records[start + e]) == keys[e]:
            e += 1
        if e == 0:
            raise LoopError("no partial last step")
        blocks.append(records[start : start + e])
    return blocks


def _classes(blocks: list, where: dict, counters: dict) -> dict[tuple, tuple]:
    """What each input of each record of a block reads, the same in every block but the
    first: ``("in", record, output)`` of its own block, ``("prev", record, output)`` of the
    block before, ``("outer", name)``, or ``("counter",)`` (:func:`_counters`)."""
    classes: dict[tuple, tuple] = {}
    for k, block in enumerate(blocks):
        for i, rec in enumerate(block):
            _same_record(rec, blocks[1][i])
            for m, spec in enumerate(rec.inputs):
                source = where.get(spec.name)
                if (i, m) in counters:
                    kind = ("counter",)
                elif source is None:
                    kind = ("outer", spec.name)
                elif source[0] in (k, k - 1):
                    kind = ("in" if source[0] == k else "prev", source[1], source[2])
                else:
                    raise LoopError(
                        f"record {rec.index} ({rec.name}) reads a value from {k - source[0]} iterations back"
                    )
                if k and classes.setdefault((i, m), kind) != kind:
                    raise LoopError(f"record {rec.index} ({rec.name}) reads other values in other iterations")
    return classes


def _first_values(blocks: list, where: dict, classes: dict) -> dict[tuple, TensorSpec]:
    """The carried values, ``(record, output)`` of the block -> the value the first block
    reads in its place (from before the loop); the first block's other inputs checked."""
    carried: dict[tuple, TensorSpec] = {}
    for i, rec in enumerate(blocks[0]):
        for m, spec in enumerate(rec.inputs):
            kind = classes[(i, m)]
            if kind[0] == "prev":
                first = carried.setdefault(kind[1:], spec)
                produced = blocks[1][kind[1]].outputs[kind[2]]
                if (
                    spec.name in where
                    or first.name != spec.name
                    or (tuple(spec.shape), spec.dtype) != (tuple(produced.shape), produced.dtype)
                ):
                    raise LoopError(f"the first iteration of record {rec.index} ({rec.name}) starts from another value")
            elif (
                kind[0] == "in"
                and where.get(spec.name) != (0, *kind[1:])
                or kind[0] == "outer"
                and kind[1] != spec.name
            ):
                raise LoopError(f"the first iteration of record {rec.index} ({rec.name}) reads other values")
    return carried


class _Exits:
    """How the records after the loop read its blocks: the last value of a carried state
    (:attr:`finals`), or every step's value stacked by a Concatenate (:attr:`scans`,
    moved to the Concatenate's axis by the records of :attr:`extra`)."""

    def __init__(self, blocks: list, where: dict, state: list, tag: str):
        self.blocks, self.where, self.tag = blocks, where, tag
        self.finals = {key: TensorSpec(f"{tag}/last{j}", *_layout(blocks[1], key)) for j, key in enumerate(state)}
        self.scans: dict[tuple, TensorSpec] = {}
        self.reshaped: dict[tuple, TensorSpec] = {}
        self.extra: list[Primitive] = []

    def read(self, rec: Primitive) -> Primitive:
        """``rec`` (after the loop) reading the loop's outputs instead of its blocks."""
        inputs = list(rec.inputs)
        if rec.name == "Concatenate":
            axis = int(rec.arguments[0]) % len(rec.outputs[0].shape)
            inputs = _runs(inputs, self.where, len(self.blocks), lambda key: self.stacked(key, axis, rec.index))
        inputs = [self.last(s, f"record {rec.index} ({rec.name})") if s.name in self.where else s for s in inputs]
        return replace(rec, inputs=tuple(inputs)) if inputs != list(rec.inputs) else rec

    def last(self, spec: TensorSpec, what: str) -> TensorSpec:
        k, i, o = self.where[spec.name]
        if k == len(self.blocks) - 1 and (i, o) in self.finals:
            return self.finals[(i, o)]
        rec = self.blocks[k][i]
        raise LoopError(
            f"{what} reads the value of record {rec.index} ({rec.name}) of iteration {k} alone, not as "
            "a state the loop carries or a stack of every iteration"
        )

    def stacked(self, key: tuple, axis: int, index: int) -> TensorSpec:
        trips, (shape, dtype) = len(self.blocks), _layout(self.blocks[1], key)
        if key not in self.scans:
            self.scans[key] = TensorSpec(f"{self.tag}/steps{len(self.scans)}", (trips, *shape), dtype)
        if (key, axis) not in self.reshaped:
            scan = self.scans[key]
            perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, len(shape) + 1))
            moved = TensorSpec(f"{scan.name}/t{axis}", (*shape[:axis], trips, *shape[axis:]), dtype)
            merged = TensorSpec(f"{scan.name}/r{axis}", (*shape[:axis], trips * shape[axis], *shape[axis + 1 :]), dtype)
            self.extra.append(Primitive(index, "Transpose", (perm,), (scan,), (moved,)))
            self.extra.append(Primitive(index, "Reshape", (merged.shape,), (moved,), (merged,)))
            self.reshaped[(key, axis)] = merged
        return self.reshaped[(key, axis)]


def _body(
    template: list, classes: dict, counters: dict, arguments: list, exits: _Exits, tag: str, trace: Trace
) -> tuple[Trace, list[TensorSpec]]:
    """The loop's body (one block: the carried values and the outside values it reads as
    inputs, the carried values' next values and the stacked values as outputs) and the
    outside values."""
    state = list(exits.finals)
    carry_in = {key: TensorSpec(f"{tag}/carry{j}", *_layout(template, key)) for j, key in enumerate(state)}
    outer: dict[str, TensorSpec] = {}
    records = []
    for i, rec in enumerate(template):
        inputs = []
        for m, spec in enumerate(rec.inputs):
            kind = classes[(i, m)]
            if kind[0] == "counter":  # the index as arange(a*k + b, a*k + b + 1) read as a scalar
                a, b = counters[(i, m)]
                row = TensorSpec(f"{tag}/count{i}_{m}/row", (1,), spec.dtype)
                spec = TensorSpec(f"{tag}/count{i}_{m}", tuple(spec.shape), spec.dtype)
                records.append(Primitive(rec.index, "Arange", (Step(a, b), Step(a, b + 1), 1.0), (), (row,)))
                records.append(Primitive(rec.index, "Reshape", (tuple(spec.shape),), (row,), (spec,)))
            elif kind[0] == "prev":
                spec = carry_in[kind[1:]]
            elif kind[0] == "outer":
                outer.setdefault(spec.name, spec)
            inputs.append(spec)
        records.append(replace(rec, arguments=arguments[i], inputs=tuple(inputs)))
    produced = [template[i].outputs[o] for i, o in state] + [template[i].outputs[o] for i, o in exits.scans]
    body = Trace(
        inputs=tuple(GraphInput(s, s.name, None, None) for s in [*carry_in.values(), *outer.values()]),
        outputs=tuple(GraphOutput(s, None) for s in produced),
        constants=(),
        primitives=tuple(records),
        device=trace.device,
        function_name=tag,
    )
    return body, list(outer.values())


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
            if (
                len(set(names)) == 1
                or any(n in where for n in names)
                or any(a is None or a.size != 1 or not mx.issubdtype(a.dtype, mx.integer) for a in arrays)
            ):
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
    if (
        rec.name != like.name
        or len(rec.inputs) != len(like.inputs)
        or any((tuple(a.shape), a.dtype) != (tuple(b.shape), b.dtype) for a, b in zip(rec.outputs, like.outputs))
        or len(rec.outputs) != len(like.outputs)
    ):
        raise LoopError(f"record {rec.index} ({rec.name}) differs from its place in the next iteration")


def _runs(inputs: list, where: dict, r: int, stacked) -> list:
    """``inputs`` of a Concatenate with each run of every iteration's value, in order,
    replaced by the loop's stack of it."""
    out, m = [], 0
    while m < len(inputs):
        source = where.get(inputs[m].name)
        if (
            source is not None
            and source[0] == 0
            and m + r <= len(inputs)
            and all(where.get(inputs[m + k].name) == (k, *source[1:]) for k in range(r))
        ):
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
    raise LoopError(
        f"record {rec.index} ({rec.name}) has arguments {values[0]!r}, {values[1]!r}, ... in its "
        "iterations, not one position that moves by the same step"
    )
