"""Loops recovered from unrolled traces: a Python loop over a dynamic size, as one ONNX loop.

A model that loops in Python over the sequence (``for t in range(T)``: mamba's selective
scan, rwkv7's state update, recurrent_gemma's linear recurrence) traces as the same block
of records T times. Traced at two lengths, the traces agree up to the loop and after it,
and differ by whole blocks inside it; :func:`recover_loops` finds each such run of
blocks and replaces it with one :class:`~mlx2onnx.capture.trace.LoopRecord` whose body is one block
(:mod:`.order`, :mod:`.find`, :mod:`.fold`):

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
  position, ``a * k + b`` at block ``k`` (a :class:`~.steps.Step`, read in the graph from the
  iteration number); and after the loop, a block's values are read only as the last
  value of a carried state, or all of them, in order, by one ``Concatenate`` (a
  ``mx.stack`` of the steps): these become the loop's scan output.

The check of the blocks is the proof: the loop record computes what the unrolled records
computed, at every traced size, and :func:`~mlx2onnx.capture.merge.merge` then merges
the folded traces like any others (the trip count becomes a size, ``seq-1``).
"""

from __future__ import annotations

from ...errors import LoopError
from .find import check_trips, recover_loops
from .steps import STEPPED, Step

__all__ = ["STEPPED", "LoopError", "Step", "check_trips", "recover_loops"]
