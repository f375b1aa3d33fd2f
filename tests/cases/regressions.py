"""Regression cases: each one a failure the differential fuzzer (tests/fuzzgen.py,
scripts/fuzz.py) found, minimised by hand. The id names the bug; the docstring of the
function says what went wrong and where it was fixed."""

from __future__ import annotations

import mlx.core as mx

from harness import Case, rand


def cummax_of_two_split_by_onnxscript(x):
    """A length-2 reverse cummax slices [0:1] and [1:2]; onnxscript's SlicesSplit rule turned
    the two Slices into Split(num_outputs=2), an opset-18 attribute, at opset 17 (fixed in
    mlx2onnx/passes.py: explicit split sizes below opset 18)."""
    return mx.cummax(mx.squeeze(x), axis=-1, reverse=True)


CASES = [
    Case("regressions.cummax_length_two_opset17", cummax_of_two_split_by_onnxscript,
         lambda rng, dt: rand(rng, (2, 1, 1), dt), dtypes=(mx.int8, mx.float32), primitives=("Scan",)),
]
