"""Where the loops are: the traces compared where they part, the blocks counted in each."""

from __future__ import annotations

from ...errors import DynamicShapeError, LoopError
from ..symbolic import affine_fit
from ..trace import Trace
from .fold import fold, fold_one
from .order import ORDERS, coarse_key, hoisted


def find_loops(short: Trace, ka: list, kb: list) -> list[tuple[int, int, int]]:
    """``(start, period, blocks)`` of each loop of ``short``, found where its coarse keys
    ``ka`` and those of a trace at a size that runs the loops more often (``kb``) part."""
    loops = []
    i = j = segment = 0
    while True:
        while i < len(ka) and j < len(kb) and ka[i] == kb[j]:
            i, j = i + 1, j + 1
        if i == len(ka) and j == len(kb):
            return loops
        shift = j - i
        for p in range(1, (i - segment) // 2 + 1):
            if ka[i - p : i] != ka[i - 2 * p : i - p] or kb[j : j + p] != kb[j - p : j]:
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
                "the same way at both sizes"
            )
    return loops


def _phase(trace: Trace, ka, kb, lo: int, p: int, shift: int):
    """The first start in ``lo .. lo+p-1`` whose blocks form a loop: ``(start, blocks,
    blocks at the other size)``, or None."""
    reason = None
    for start in range(lo, lo + p):
        blocks = repeats(ka, start, p)
        more = repeats(kb, start + shift, p, ka[start : start + p])
        if blocks < 2 or more <= blocks:
            continue
        try:  # this loop alone (the loops before it are outside it)
            fold_one(list(trace.primitives), list(trace.outputs), start, p, blocks, "_probe", trace)
            return start, blocks, more
        except LoopError as exc:
            reason = reason or exc
    if reason is not None:
        raise reason
    return None


def repeats(keys: list, start: int, p: int, template: list | None = None) -> int:
    """How many whole blocks of ``template`` (default: the block at ``start``) follow
    each other from ``start``."""
    template = keys[start : start + p] if template is None else template
    n = 0
    while keys[start + n * p : start + (n + 1) * p] == template:
        n += 1
    return n


def locate(kx: list, ka: list, loops: list) -> list[tuple[int, int, int]]:
    """The loops found in the trace of coarse keys ``ka`` (:func:`find_loops`) in the
    trace of coarse keys ``kx``."""
    found, a, x = [], 0, 0
    for start, p, blocks in loops:
        n = start - a
        if kx[x : x + n] != ka[a:start]:
            raise LoopError("the records around the loop differ between the traced sizes")
        x += n
        count = repeats(kx, x, p, ka[start : start + p])
        found.append((x, p, count))
        a, x = start + blocks * p, x + count * p
    if kx[x:] != ka[a:]:
        raise LoopError("the records after the loop differ between the traced sizes")
    return found


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
        keys = [[coarse_key(r) for r in t.primitives] for t in ordered]
        try:
            loops = find_loops(ordered[short], keys[short], keys[long])
            found = [locate(k, keys[short], loops) for k in keys]
            _follow_sizes([[blocks for _, _, blocks in f] for f in found], plan)
            return [fold(t, f) for t, f in zip(ordered, found)], None
        except LoopError as exc:
            reason = reason or str(exc)
    return traces, reason


def _follow_sizes(blocks: list, plan) -> None:
    """Each loop's number of blocks must be a size less a fixed number in every trace."""
    for counts in zip(*blocks):
        if not any(
            affine_fit(counts, sizes) == (1, b) for sizes in plan.sizes.values() for b in [counts[0] - sizes[0]]
        ):
            sizes = ", ".join(f"{s}={list(v)}" for s, v in plan.sizes.items())
            raise LoopError(
                f"the loop repeats {list(counts)} times at the traced sizes ({sizes}), not once per "
                "position of a dynamic dimension less a fixed number"
            )


def check_trips(trace: Trace, plan) -> None:
    """Refuse a loop that would run a negative number of times at the smallest sizes the
    export admits (its first iterations are unrolled before it): name the bound to declare."""
    for rec in trace.primitives:
        if rec.kind != "loop":
            continue
        trips = rec.trips  # a SymInt: each trace runs it a size less a fixed number of times
        for symbol, sizes in plan.sizes.items():
            fit = affine_fit(trips.values, sizes)
            if fit is None or fit[0] != 1 or plan.lowest(symbol) + fit[1] >= 0:
                continue
            need, (label, axis) = int(-fit[1]), plan.where[symbol]
            error = DynamicShapeError(
                f"dimension {axis} ({symbol!r}) of input {label!r}: the loop recovered over it runs {trips!r} times "
                f"after {need} iterations unrolled before it, so it needs {symbol} >= {need}: declare "
                f"mlx2onnx.Dim({symbol!r}, min={need})"
            )
            error.trace = next(t for t, v in enumerate(trips.values) if v != trips.values[0])
            error.constant = None
            raise error
