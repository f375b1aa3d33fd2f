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


def reversed_slice_starting_before_the_beginning(x):
    """``x[3:0:-1][-4::-1]``: the second slice starts before the first element, so it is
    empty; MLX records start -1, which ONNX Slice read as the last element (3 elements, and
    a shape-inference error). Fixed in op_mappings/indexing.py: empty axes slice 0:0."""
    return x[3:0:-1][-4::-1] + 1, x[:, -5::-1] * 2


def select_and_cast_sharing_a_cast(x):
    """``where(x, x, x)`` on bools casts x to uint8 inside the Select handler, and the
    second output is the same cast: CSE made that handler-internal value the graph output,
    which had no shape, and onnx.checker refused the model. Fixed in mlx2onnx/passes.py:
    graph outputs keep their declared shape and type."""
    y = mx.where(x, x, x)
    return mx.logical_not(mx.stack([y, y, y], axis=-2)), x.astype(mx.uint8)


def two_clips_of_one_value(x):
    """Two clips of the same value: onnxscript's Max/Min -> Clip rule named both bounds
    after the value, and the second pair was left unregistered, so the model referred to
    undefined values (checker: "not topologically sorted"). Fixed in mlx2onnx/passes.py:
    such constants are registered under a free name."""
    y = mx.nan_to_num(x, neginf=-1000.0, posinf=1000.0)
    return mx.clip(y, -128.0, 127.0).astype(mx.int8), mx.clip(y, -0.5, 1.25)


def product_of_an_empty_uint8_slice(x):
    """prod(uint8) is uint32; over an empty slice the Reduce handler fell back to a uint32
    ReduceProd, which onnxruntime has no kernel for. Fixed in op_mappings/reduce.py: an
    empty integer sum or product is its identity, filled in."""
    empty = x[2:-2]
    return mx.prod(empty, keepdims=True), mx.sum(empty)


def floor_divide_bfloat16(x):
    """MLX rounds the bfloat16 quotient before flooring; the default float policy carries
    bfloat16 as float32, so the ONNX Floor sees the unrounded quotient and is off by one
    where the rounding crosses an integer. Needs a round-to-bfloat16 Cast pair before the
    Floor in the FloorDivide/DivMod handlers (not done: a float-policy design decision)."""
    return mx.floor_divide(x, 0.42), mx.divmod(x, 0.42)[0]


CASES = [
    Case("regressions.cummax_length_two_opset17", cummax_of_two_split_by_onnxscript,
         lambda rng, dt: rand(rng, (2, 1, 1), dt), dtypes=(mx.int8, mx.float32), primitives=("Scan",)),
    Case("regressions.negative_stride_slice_before_start", reversed_slice_starting_before_the_beginning,
         lambda rng, dt: rand(rng, (4, 3), dt), dtypes=(mx.float32, mx.float16, mx.int32), primitives=("Slice",)),
    Case("regressions.cse_output_keeps_its_shape", select_and_cast_sharing_a_cast,
         lambda rng, dt: rand(rng, (1,), dt), dtypes=(mx.bool_,), primitives=("Select", "AsType")),
    Case("regressions.floor_divide_bfloat16_carried_as_float32", floor_divide_bfloat16,
         lambda rng, dt: rand(rng, (256,), dt, -6.0, 6.0), dtypes=(mx.bfloat16,),
         primitives=("FloorDivide", "DivMod")),
    Case("regressions.two_clips_of_one_value", two_clips_of_one_value,
         lambda rng, dt: rand(rng, (2, 5), dt), dtypes=(mx.float16, mx.float32), edges=True,
         primitives=("Maximum", "Minimum")),
    Case("regressions.empty_integer_product", product_of_an_empty_uint8_slice,
         lambda rng, dt: rand(rng, (3, 2), dt, 0, 9), dtypes=(mx.uint8, mx.int8, mx.int32),
         primitives=("Reduce",)),
]
