"""The vocabulary of recovered loops: the loop record, the numbers that follow the step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..trace import Primitive, Trace

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
