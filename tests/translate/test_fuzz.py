"""A short differential fuzz run: random MLX programs (tests/support/fuzzgen.py), exported and
compared in onnxruntime against MLX. The long run is ``python -m scripts.fuzz``."""

from __future__ import annotations

import mlx.core as mx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from tests.support import fuzzgen
from tests.support.harness import ort_session


@pytest.mark.slow
@settings(max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**40), low_opset=st.booleans())
def test_random_programs_agree(seed, low_opset):
    program = fuzzgen.generate(seed)
    outcome = fuzzgen.check(program, MIN_OPSET if low_opset else default_opset())
    assert outcome.status in ("pass", "skip", "explained"), f"{outcome.status}: {outcome.detail}\n\n{program.source()}"


@settings(max_examples=12, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**40), low_opset=st.booleans())
def test_shapeless_traces_agree(seed, low_opset):
    """The same programs traced with MLX's shapeless=True (as dynamic exports trace)."""
    program = fuzzgen.generate(seed)
    outcome = fuzzgen.check(program, MIN_OPSET if low_opset else default_opset(), shapeless=True)
    assert outcome.status in ("pass", "skip", "explained"), f"{outcome.status}: {outcome.detail}\n\n{program.source()}"


@settings(max_examples=24, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**40))
def test_random_records_agree(seed):
    """Random records of the primitives MLX on this CPU never emits (tests/support/fuzzrecords.py)."""
    from tests.support import fuzzrecords

    record = fuzzrecords.generate(seed)
    outcome = fuzzrecords.check(record)
    assert outcome.status == "pass", f"{outcome.status}: {outcome.detail}\n{record.describe()}"


def _findings():
    import os
    import re

    text = open(os.path.join(os.path.dirname(__file__), "..", "support", "fuzz_findings.txt")).read()
    for block in text.split("\n## ")[1:]:
        head, source = block.split("\n", 1)
        k, opset, shapeless, expected = re.match(r"(\d+) opset (\d+)( shapeless)? -> (\w+):", head).groups()
        yield pytest.param(source, int(opset), bool(shapeless), expected, id=k)


@pytest.mark.parametrize("source, opset, shapeless, expected", list(_findings()))
def test_fuzz_findings(source, opset, shapeless, expected):
    """Every program of the last fresh run that failed passes now, or its mismatch is
    measured as MLX's own half-precision arithmetic ("explained")."""
    outcome = fuzzgen.check(fuzzgen.from_source(source), opset, shapeless=shapeless)
    assert outcome.status == expected, f"{outcome.status}: {outcome.detail}"


def test_half_precision_explains_only_what_the_float32_program_gives():
    """The explanation is a measurement: an export of another program (sin for cos) fails
    against MLX's bfloat16 result and against the float32 program alike, so it stays a
    mismatch; and a program without half-precision values has no float32 twin to ask."""
    import mlx2onnx

    source = dict((p.id, p.values[0]) for p in _findings())["10386"]
    program = fuzzgen.from_source(source)
    verifier = mlx2onnx.Verifier(random_inputs=False, tolerances=program.tolerances)
    other = fuzzgen.from_source(source.replace("mx.cos(", "mx.sin("))
    wrong = mlx2onnx.Exporter().export(other, *other.inputs)
    assert not verifier.verify(wrong, program, *program.inputs).passed
    assert fuzzgen._half_precision(program, wrong, verifier) is None
    right = mlx2onnx.Exporter().export(program, *program.inputs)
    assert fuzzgen._half_precision(program, right, verifier) is not None
    float32 = fuzzgen.from_source(source.replace(".astype(mx.bfloat16)", ""))
    assert float32.in_float32() is None


def test_erfinv_reads_only_values_it_keeps_close():
    """Found by the fuzzer: erfinv is steep near +-1, so a last-bit difference in an
    inexact input (a tanh) became 0.016; it reads inexact values only up to 0.99."""
    assert fuzzgen._tame_for_erfinv(mx.array([0.5, -0.99, float("nan"), float("inf")]))
    assert not fuzzgen._tame_for_erfinv(mx.tanh(mx.array([3.0, 0.1])))
    assert not fuzzgen._tame_for_erfinv(mx.array([-0.995]).astype(mx.bfloat16))


def test_overflow_explains_only_non_finite_differences():
    """A float32 overflow inside a sum is explained only where both sides overflowed: an
    export with other weights (the rest of the rows differ) stays a mismatch, and a
    program with no value near FLT_MAX is never asked."""
    import mlx2onnx

    source = dict((p.id, p.values[0]) for p in _findings())["424"]
    program = fuzzgen.from_source(source)
    verifier = mlx2onnx.Verifier(random_inputs=False)
    right = mlx2onnx.Exporter().export(program, *program.inputs)
    assert "both sides overflowed" in fuzzgen._overflow_order(program, right, verifier)
    other = fuzzgen.from_source(source.replace("628", "629"))
    wrong = mlx2onnx.Exporter().export(other, *other.inputs)
    assert fuzzgen._overflow_order(program, wrong, verifier) is None
    tame = fuzzgen.from_source(source.replace("mx.nan_to_num(v0)", "mx.nan_to_num(v0, posinf=1.0, neginf=-1.0)"))
    assert fuzzgen._overflow_order(tame, mlx2onnx.Exporter().export(tame, *tame.inputs), verifier) is None


def test_periodic_functions_read_only_values_they_keep_close():
    """Found by the fuzzer: tan of an inexact float32 near 300 turned a few ulps of sum
    order into 5e-4; sin, cos and tan read inexact values only where slope x 8 ulps <= 1e-5."""
    assert fuzzgen._keeps_close("sin", mx.array([0.5, -3.0, 10.0, float("nan")]))
    assert not fuzzgen._keeps_close("cos", mx.array([300.0]))
    assert fuzzgen._keeps_close("tan", mx.array([0.3, -1.0]))
    assert not fuzzgen._keeps_close("tan", mx.array([1.5707]))  # near the pole
    assert not fuzzgen._keeps_close("tan", mx.array([-1.2, 300.0]))


def test_inverse_functions_read_only_values_away_from_their_branch_points():
    """Found by the fuzzer: arctanh(tanh(-6.33)) in float32, tanh one ulp from 1 on either
    side, was 0.0095 off (seed 20261210 program 2227); replayed as the generator builds it."""
    assert fuzzgen._keeps_close("arctanh", mx.array([0.5, -0.9, 2.0, float("nan")]))  # 2.0: NaN on both sides
    assert not fuzzgen._keeps_close("arctanh", mx.tanh(mx.array([-6.333333])))
    assert fuzzgen._keeps_close("arcsin", mx.array([0.3, -0.99]))
    assert not fuzzgen._keeps_close("arccos", mx.array([0.9999999]))
    assert fuzzgen._keeps_close("arccosh", mx.array([1.5, 40.0]))
    assert not fuzzgen._keeps_close("arccosh", mx.array([1.0000001]))


def test_dfts_read_only_values_whose_rounding_stays_small():
    assert fuzzgen._dft_resolvable(mx.array([[1.5, -99.0], [0.0, 3.0]]))
    assert not fuzzgen._dft_resolvable(mx.array([1.0, 1e36]))
    assert not fuzzgen._dft_resolvable(mx.array([1.0, float("inf")]))


def test_generation_is_deterministic():
    for seed in (0, 1, 12345):
        a, b = fuzzgen.generate(seed), fuzzgen.generate(seed)
        assert a.source() == b.source()
        assert [s.op for s in a.steps] == [s.op for s in b.steps]
    assert fuzzgen.generate(1).source() != fuzzgen.generate(2).source()


def test_generator_reaches_the_corners():
    """Across a few hundred programs: every dtype, 0-d, size-0 and size-1 dims, and the
    main op families all occur (so the fuzzer is not silently narrow)."""
    dtypes, shapes, ops = set(), set(), set()
    for seed in range(300):
        program = fuzzgen.generate(seed)
        for array in program.inputs:
            dtypes.add(array.dtype)
            shapes.add(tuple(array.shape))
        ops.update(s.op for s in program.steps)
    assert set(fuzzgen.DTYPES.values()) <= dtypes
    assert () in shapes
    assert any(0 in s for s in shapes) and any(1 in s for s in shapes)
    for op in (
        "sum",
        "matmul",
        "take",
        "concatenate",
        "split",
        "cumsum",
        "argsort",
        "astype",
        "pad",
        "where",
        "softmax",
        "logsumexp",
        "reshape",
        "transpose",
        "getitem",
        "take_along_axis",
        "argpartition",
        "searchsorted",
        "depends",
        "gather_mm",
        "quantized_matmul",
        "scatter_add_axis",
    ):
        assert op in ops, op


def test_reproducer_names_every_step():
    program = fuzzgen.generate(7)
    text = program.source()
    assert text.count(" = ") >= len(program.steps) + len(program.inputs)
    assert "def fn(" in text and "return" in text
    out = program(*program.inputs)
    mx.eval(out)


def test_reduction_over_an_empty_axis_is_the_identity():
    """Found by the fuzzer: MLX 0.32's CPU reductions of empty arrays are wrong (an extent-0
    axis into a non-empty result reads uninitialised memory, a full product gives 0) unless
    the input is a broadcast like mx.zeros, so the parity check cannot judge them; the
    export must still give the identity element."""
    import numpy as np

    import mlx2onnx

    x = np.random.default_rng(0).standard_normal((0, 5, 3, 2)).astype(np.float32)

    def fn(a):
        t = mx.transpose(a, [2, 3, 0, 1])
        return (
            mx.sum(t, axis=[1, 2]),
            mx.prod(t, axis=[1, 2]),
            mx.all(a, axis=0),
            mx.any(t, axis=2),
            mx.prod(a),
            mx.prod(a.astype(mx.int32)),
        )

    for opset in (MIN_OPSET, default_opset()):
        model = mlx2onnx.Exporter(opset=opset).export(fn, mx.array(x))
        session = ort_session(model)
        got = session.run(None, {session.get_inputs()[0].name: x})
        want = [
            np.zeros((3, 5)),
            np.ones((3, 5)),
            np.ones((5, 3, 2), bool),
            np.zeros((3, 2, 5), bool),
            np.float32(1),
            np.int32(1),
        ]  # (MLX 0.32 says 0 for both products)
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.array_equal(g, w), (g, w)


def test_var_and_std_skip_spreads_below_the_summation_error():
    """Found by the fuzzer: std of 8 equal values 5.6e7 is 4 in MLX and 0 in onnxruntime
    (each subtracts a mean rounded its own way), so the generator only asks for var/std
    whose spread is resolvable at the verifier's tolerance."""
    import numpy as np

    equal = mx.broadcast_to(mx.array(55716040.0), (4, 1, 2))
    spread = mx.array(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    assert not fuzzgen._spread_is_resolvable(equal, [0, 1, 2], "std")
    assert not fuzzgen._spread_is_resolvable(equal + mx.array([0.0, 1.0]), None, "var")
    assert fuzzgen._spread_is_resolvable(spread, None, "std") and fuzzgen._spread_is_resolvable(spread, -1, "var")
    assert fuzzgen._spread_is_resolvable(mx.array([1.0, np.inf]), 0, "std")  # NaN on both sides


def test_block_masked_mm_with_a_broadcast_operand():
    """Found by the fuzzer: MLX 0.32's CPU BlockMaskedMM applies per-batch operand masks
    wrongly when one operand's batch is broadcast (a [2, 5, 40], b [40, 2]: batch 1 gets the
    rhs mask of batch 0, it seems), so the generator
    only multiplies equal batches; the export follows the definition (masks expanded to
    their blocks, then a matmul), which MLX itself gives once b is batched."""
    import numpy as np

    import mlx2onnx

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 5, 40)).astype(np.float32), rng.standard_normal((40, 2)).astype(np.float32)
    lhs, rhs = np.array([[[True, True]], [[True, True]]]), np.array([[[True], [False]], [[True], [True]]])

    def expand(m, rows, cols):
        return np.repeat(np.repeat(m, 32, -2), 32, -1)[..., :rows, :cols]

    want = (a * expand(lhs, 5, 40)) @ (b * expand(rhs, 40, 2))

    def fn(x, y):
        return mx.block_masked_mm(x, y, 32, None, mx.array(lhs), mx.array(rhs))

    batched = fn(mx.array(a), mx.array(np.ascontiguousarray(np.broadcast_to(b, (2, 40, 2)))))
    assert np.allclose(np.array(batched), want, atol=1e-4)
    assert not np.allclose(np.array(fn(mx.array(a), mx.array(b))), want, atol=1e-4)  # (MLX's bug)
    model = mlx2onnx.Exporter().export(fn, mx.array(a), mx.array(b))
    session = ort_session(model)
    got = session.run(None, {i.name: v for i, v in zip(session.get_inputs(), (a, b))})[0]
    assert np.allclose(got, want, atol=1e-4)


def test_record_reproducers_name_the_right_dtypes():
    """``Record.describe`` used to print bfloat16 as "float16" and bool as "ool"."""
    from tests.support.fuzzrecords import Record
    from tests.support.harness import Arg

    inputs = [
        Arg("q", mx.zeros((2,), mx.bfloat16) + 1),
        Arg("m", mx.array([True, False])),
        Arg("x", mx.ones((1,), mx.float16)),
        Arg("i", mx.array([3], mx.uint32)),
    ]
    text = Record(0, "RMSNorm", [], inputs, [], [], 17).describe()
    assert "q[2]:bfloat16" in text and "m[2]:bool" in text and "x[1]:float16" in text and "i[1]:uint32" in text, text
