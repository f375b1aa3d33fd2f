"""The vocabulary of recovered loops: the numbers that follow the step (the loop record
itself is :class:`~mlx2onnx.capture.trace.LoopRecord`)."""

from __future__ import annotations

from dataclasses import dataclass

STEPPED = ("Slice", "SliceUpdate")  # records whose positions may follow the iteration


@dataclass(frozen=True)
class Step:
    """A number of a block's record that is ``a * k + b`` at block ``k`` (one trace)."""

    a: int
    b: int
