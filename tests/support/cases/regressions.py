"""Regression cases: each one a failure the differential fuzzer (tests/support/fuzzgen.py,
scripts/fuzz.py) found, minimised by hand. The id names the bug; the docstring of the
function says what went wrong and where it was fixed."""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from tests.support.harness import Case, rand


def cummax_of_two_split_by_onnxscript(x):
    """A length-2 reverse cummax slices [0:1] and [1:2]; onnxscript's SlicesSplit rule turned
    the two Slices into Split(num_outputs=2), an opset-18 attribute, at opset 17 (fixed in
    mlx2onnx/passes/constants.py: explicit split sizes below opset 18)."""
    return mx.cummax(mx.squeeze(x), axis=-1, reverse=True)


def reversed_slice_starting_before_the_beginning(x):
    """``x[3:0:-1][-4::-1]``: the second slice starts before the first element, so it is
    empty; MLX records start -1, which ONNX Slice read as the last element (3 elements, and
    a shape-inference error). Fixed in op_mappings/slicing.py: empty axes slice 0:0."""
    return x[3:0:-1][-4::-1] + 1, x[:, -5::-1] * 2


def select_and_cast_sharing_a_cast(x):
    """``where(x, x, x)`` on bools casts x to uint8 inside the Select handler, and the
    second output is the same cast: CSE made that handler-internal value the graph output,
    which had no shape, and onnx.checker refused the model. Fixed in mlx2onnx/passes/base.py:
    graph outputs keep their declared shape and type after every pass."""
    y = mx.where(x, x, x)
    return mx.logical_not(mx.stack([y, y, y], axis=-2)), x.astype(mx.uint8)


def one_value_returned_twice_beside_a_cast(x):
    """``abs(log(x))`` returned twice beside a float32 cast of ``log(x)``, x bfloat16 (found by
    fresh fuzzing, 5 programs): the second output is an Identity of the first, and after
    onnxscript's optimizer that output had no type (the pass contract refused the export).
    Fixed in mlx2onnx/passes/base.py: an output a pass re-made takes its declared type before the
    contract compares the outputs."""
    y = mx.log(x)
    return y.astype(mx.float32), mx.abs(y), mx.abs(y)


def two_clips_of_one_value(x):
    """Two clips of the same value: onnxscript's Max/Min -> Clip rule named both bounds
    after the value, and the second pair was left unregistered, so the model referred to
    undefined values (checker: "not topologically sorted"). Fixed in mlx2onnx/passes/constants.py:
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


def matmul_of_a_reshaped_scalar(x, s):
    """``reshape(s, [-1, 1, 1]) @ x`` with a 0-d ``s``: onnxscript's Reshape -> MatMul ->
    Reshape rule read ``shape[-1]`` of the 0-d value and its IndexError failed the whole
    export (PassError). Fixed in mlx2onnx/passes/exact_rules.py: our collapse needs operands of rank >= 2."""
    return mx.matmul(mx.reshape(s, [-1, 1, 1]), x)


def reciprocal_of_where_negative_zero(c, x, y):
    """``1 / where(c, x, y)`` with -0.0 in x and y: onnxruntime's Where gives a selected -0.0
    as +0.0, so 1 / -0.0 was +inf instead of -inf. Fixed in op_mappings/elementwise.py
    (select_value): the sign of a selected zero is repaired. nan_to_num and clip trace to
    Select too (``reciprocal(clip(nan_to_num(x)))`` was the fuzzer's find)."""
    clipped = mx.clip(mx.nan_to_num(x, neginf=-1000.0, posinf=1000.0), -128.0, 127.0)
    return 1 / mx.where(c, x, y), mx.reciprocal(clipped), 1 / mx.where(c, 1.5, y)


def reciprocal_of_extrema_of_signed_zeros(x, y):
    """``1 / maximum(x, y)`` where x and y hold zeros of both signs: MLX returns y of two
    equal values (maximum(+0.0, -0.0) is -0.0, relu(-0.0) is +0.0); onnxruntime's float16
    Max returned x, its float32 Max the operand that broadcasts, and a Relu keeps -0.0:
    1 / -0.0 came out +inf for MLX's -inf (fuzz seed 20261213 program 22180). Fixed in
    op_mappings/elementwise.py (extremum): x leaves a tie before the Max; the passes make a
    relu of a value that cannot be -0.0 one Relu again (passes/zero_sign.py)."""
    relu, bias = nn.relu(x), nn.relu(x + 0.25)  # the second is never -0.0: a Relu
    return (1 / mx.maximum(x, y), 1 / mx.minimum(x, y), 1 / relu, 1 / bias, 1 / mx.maximum(0.0, x),
            1 / mx.minimum(x, -0.0), 1 / mx.minimum(mx.maximum(x, 0.0), 6.0), 1 / mx.maximum(x, 2.0))


def rsqrt_of_log1p_of_negative_zero(x):
    """``rsqrt(log1p(-0.0))`` is -inf in MLX (log1p(-0.0) = -0.0, IEEE); the Log1p composite
    selected x with a Where where 1 + x == 1, and onnxruntime's Where gave +0.0, so the
    export said +inf. Fixed in op_mappings/elementwise.py: log1p and expm1 multiply x by a
    selected factor instead of selecting x."""
    return mx.rsqrt(mx.log1p(x)), 1 / mx.expm1(x)


def power_of_negative_bases(x):
    """Negative bases: an integer exponent gives a number, any other exponent NaN, and a
    zero base -0.0 keeps its sign for odd exponents. The fuzzer's mismatches here were an
    exponent off by a last bit (bfloat16 carried as float32, an FFT's imaginary part of
    1e-8 for 0), which turns a number into NaN: the generator gives power only exact
    exponents (tests/support/fuzzgen.py, step_binary); the export itself was right."""
    return mx.power(x, mx.round(x)), mx.power(x, 3.0), mx.power(x, -3.0), mx.power(x, 0.5)


def std_of_equal_large_values(c, x):
    """std of 8 equal values 5.6e7 (a where of a broadcast mean): MLX subtracts a mean
    summed in its own order, which is off by a few units, and gives 4; the exact answer,
    and onnxruntime's, is 0. MLX's rounding, not an export bug: the fuzzer skips var/std
    whose spread is below the summation error (tests/support/fuzzgen.py, _spread_is_resolvable)."""
    m = mx.mean(x, keepdims=True)
    return mx.std(mx.where(c, m, m), axis=[0, 1, 2])


def reciprocal_of_rfft_imaginary_parts(x):
    """``1 / rfft(x).imag``: the imaginary parts of the DC bin (and of the Nyquist bin for an
    even length) are exactly +0.0 in MLX, so their reciprocals are +inf; onnxruntime's DFT
    left 8.6e-7 there for length 5 (reciprocal 1.2e6). Fixed in op_mappings/fft.py
    (real_bins_exact): those bins are set to +0.0 after the one-sided DFT. (Not done for the
    full DFTs over rfftn's other axes, where which bins pocketfft leaves exactly 0 depends on
    its radix: for shape (4, 3, 6) also [2, 0, 0], for (6, 5) not [3, 0].)"""
    return 1 / mx.fft.rfft(x, axis=-1).imag, 1 / mx.fft.rfft(x, axis=0).imag


def bitwise_or_with_an_empty_split_part(x):
    """``bitwise_or(a, b)`` with a of shape (1,) and b the empty last part of a split: MLX
    broadcasts a to (0,), an Expand to [0]; onnxruntime infers that Expand's output as (1,),
    and below opset 18 the bit-plane BitwiseOr after it failed at run time ("Shape mismatch
    attempting to re-use buffer {0,8} != {1,8}"). Fixed in op_mappings/shape.py: a Broadcast
    to an empty shape is an empty slice, not an Expand."""
    _, _, last = mx.split(x, [1, 3], axis=0)
    a, b = mx.split(last, [1], axis=0)
    return mx.bitwise_or(a, b), mx.broadcast_to(x[:1], (0, 3)) * 2


def clip_of_a_scalar_broadcast_to_one_element(x):
    """``clip(broadcast_to(x, [1]), lo, hi)`` of a 0-d x (squeezed back by a prod over the
    axis): the optimizer folded the bounds' Expands into [1]-shaped constants, and
    onnxscript's Max/Min -> Clip rule took them as Clip's scalar bounds, so Clip(x[]) lost
    the axis the Max had broadcast (checker: "Inferred shape and existing shape differ in
    rank"). Fixed in mlx2onnx/passes/exact_rules.py (.MinMaxToClip): no Clip where a bound outranks x."""
    y = mx.clip(mx.broadcast_to(x, [1]), -0.5, 1.25)
    return mx.prod(y, axis=0), mx.clip(mx.broadcast_to(x, [1, 1]), None, 0.25)


def with_signed_zeros(rng, array):
    """``array`` (float) with about a third of its elements set to -0.0 and a sixth to +0.0."""
    r = rng.random(array.shape)
    values = np.array(array.astype(mx.float32))
    values = np.where(r < 1 / 3, np.float32(-0.0), np.where(r < 1 / 2, np.float32(0.0), values))
    return mx.array(values.astype(np.float32)).astype(array.dtype)


_WEIGHT = mx.array(np.random.default_rng(20261207).standard_normal((3, 2, 4)).astype(np.float32))


def transposed_weight_returned(x):
    """A transposed constant returned as it is: the weight-transpose fold replaced the
    graph output's uses and onnx-ir refused (export error). Fixed in mlx2onnx/passes/weights.py:
    fold_weight_transposes leaves a Transpose that is a graph output."""
    return x * 2, mx.transpose(_WEIGHT, [1, 0, 2])


def reciprocal_of_fft_dc_imaginary_part(x):
    """``1 / fft(x).imag`` at the DC bin: MLX's pocketfft gives exactly +0.0 there (so
    +inf), onnxruntime's DFT ~1e-7 * scale (so 1e7). Fixed in op_mappings/fft.py: the DC
    bin's imaginary part is the sum of the input's imaginary parts."""
    return 1.0 / mx.fft.fft(x).imag[:, :1], 1.0 / mx.fft.ifft(x, axis=0).imag[:1]


def addmm_without_its_addend(c, a, b):
    """``addmm(c, a, b, beta=0)`` of rank 3: MLX never reads c, but the export computed
    ``0 * c``, so an inf or NaN in c made the result NaN (the 2-D Gemm path was right).
    Fixed in op_mappings/matmul.py: beta 0 drops the addend."""
    return mx.addmm(c, a, b, alpha=0.75, beta=0.0)


def addmm_inputs(rng, dt):
    c = np.asarray(rand(rng, (2, 3, 5), mx.float32))
    c[0, 1, 2], c[1, 0, 0], c[1, 2, 4] = np.inf, -np.inf, np.nan
    return mx.array(c).astype(dt), rand(rng, (2, 3, 4), dt), rand(rng, (2, 4, 5), dt)


def floor_divide_float16(x):
    """float16 ``x // 0.28``: onnxruntime has no float16 Div here, so the quotient was
    computed in float32 and floored unrounded: -23.25 // 0.28 is -83 in MLX (the float16
    quotient rounds to -83.0), -84 exported. Fixed in op_mappings/elementwise.py: the
    quotient is rounded to the MLX dtype whenever the work dtype is wider."""
    return x // 0.28, mx.divmod(x, 0.28)[0], mx.array([-23.25], x.dtype) // 0.28


def relative_position_einsum(r_q, rel):
    """SAM-style relative positions, ``einsum("bhwc,hkc->bhwk")`` with b == h: onnxscript's
    Reshape-MatMul-Reshape collapse saw only that the plain MatMul had the final shape, and
    paired the query's batch axis with the table's h axis. Fixed in mlx2onnx/passes/exact_rules.py
    (ReshapeMatMulReshape): the collapse is applied only where the axes line up."""
    return mx.einsum("bhwc,hkc->bhwk", r_q, rel)


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
    Case("regressions.one_value_returned_twice_keeps_its_type", one_value_returned_twice_beside_a_cast,
         lambda rng, dt: rand(rng, (3, 4), dt, 0.1, 4.0), dtypes=(mx.bfloat16, mx.float32), primitives=("Log", "Abs")),
    Case("regressions.two_clips_of_one_value", two_clips_of_one_value,
         lambda rng, dt: rand(rng, (2, 5), dt), dtypes=(mx.float16, mx.float32), edges=True,
         primitives=("Maximum", "Minimum")),
    Case("regressions.empty_integer_product", product_of_an_empty_uint8_slice,
         lambda rng, dt: rand(rng, (3, 2), dt, 0, 9), dtypes=(mx.uint8, mx.int8, mx.int32),
         primitives=("Reduce",)),
    Case("regressions.matmul_of_a_reshaped_scalar", matmul_of_a_reshaped_scalar,
         lambda rng, dt: (rand(rng, (1, 3), dt), rand(rng, (), dt)), primitives=("Reshape", "Matmul")),
    Case("regressions.where_keeps_negative_zero", reciprocal_of_where_negative_zero,
         lambda rng, dt: (rand(rng, (4, 5), mx.bool_), with_signed_zeros(rng, rand(rng, (4, 5), dt)),
                          with_signed_zeros(rng, rand(rng, (4, 5), dt))),
         dtypes=(mx.float32, mx.float16, mx.bfloat16), primitives=("Select", "Divide")),
    Case("regressions.extrema_of_signed_zeros", reciprocal_of_extrema_of_signed_zeros,
         lambda rng, dt: (with_signed_zeros(rng, rand(rng, (4, 5), dt)), with_signed_zeros(rng, rand(rng, (4, 5), dt))),
         dtypes=(mx.float32, mx.float16, mx.bfloat16), primitives=("Maximum", "Minimum")),
    Case("regressions.log1p_of_negative_zero", rsqrt_of_log1p_of_negative_zero,
         lambda rng, dt: with_signed_zeros(rng, rand(rng, (4, 3), dt, -0.5, 2.0)),
         dtypes=(mx.float32, mx.float16), primitives=("Log1p", "Expm1", "Sqrt")),
    Case("regressions.power_of_negative_bases", power_of_negative_bases,
         lambda rng, dt: with_signed_zeros(rng, rand(rng, (3, 4), dt, -4.0, 4.0)),
         dtypes=(mx.float32, mx.float16), primitives=("Power",)),
    Case("regressions.std_of_equal_large_values", std_of_equal_large_values,
         lambda rng, dt: (rand(rng, (4, 1, 2), mx.bool_),
                          mx.array(np.array([[[1698902297], [1607294205], [969644187]], [[-1085315122], [1751930140], [-813362909]],
                                             [[-560013614], [1671751428], [377885161]], [[931240131], [-1344820892], [-241575269]]],
                                            np.int32))),
         dtypes=(mx.int32,), primitives=("Reduce", "Select"),
         xfail="MLX's std of 8 equal values 5.6e7 is 4 (its mean's rounding); the exact std is 0"),
    Case("regressions.broadcast_to_empty_is_no_expand", bitwise_or_with_an_empty_split_part,
         lambda rng, dt: rand(rng, (4,), dt), dtypes=(mx.uint8, mx.int32), primitives=("Broadcast", "BitwiseBinary")),
    Case("regressions.clip_bounds_that_broadcast", clip_of_a_scalar_broadcast_to_one_element,
         lambda rng, dt: rand(rng, (), dt), dtypes=(mx.float32, mx.float16), primitives=("Maximum", "Minimum")),
    Case("regressions.transposed_weight_returned", transposed_weight_returned,
         lambda rng, dt: rand(rng, (2, 3), dt), primitives=("Transpose",)),
    Case("regressions.reshape_matmul_reshape_with_misaligned_batch_axes", relative_position_einsum,
         lambda rng, dt: (rand(rng, (3, 3, 4, 8), dt), rand(rng, (3, 5, 8), dt)), dtypes=(mx.float32, mx.float16),
         primitives=("Matmul",)),
    Case("regressions.reshape_matmul_reshape_two_equal_batches", relative_position_einsum,
         lambda rng, dt: (rand(rng, (2, 2, 6, 4), dt), rand(rng, (2, 7, 4), dt)), primitives=("Matmul",)),
    Case("regressions.addmm_beta_zero_ignores_its_addend", addmm_without_its_addend, addmm_inputs,
         dtypes=(mx.float32, mx.float16), primitives=("AddMM",)),
    Case("regressions.floor_divide_rounds_the_float16_quotient", floor_divide_float16,
         lambda rng, dt: rand(rng, (512,), dt, -30.0, 30.0), dtypes=(mx.float16,),
         primitives=("FloorDivide", "DivMod"), tolerances={"float16": (0.0, 0.0)}),
    Case("regressions.fft_of_real_input_has_a_zero_dc_imaginary_part", reciprocal_of_fft_dc_imaginary_part,
         lambda rng, dt: rand(rng, (6, 5), dt), primitives=("FFT", "Imag", "Divide")),
    Case("regressions.rfft_real_bins_have_zero_imaginary_parts", reciprocal_of_rfft_imaginary_parts,
         lambda rng, dt: rand(rng, (6, 5), dt), primitives=("FFT", "Imag", "Divide")),
]
