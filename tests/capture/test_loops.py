"""Python loops over a dynamic size, recovered from the unrolled traces as one ONNX Loop
(``mlx2onnx/capture/loops/``): what folds, what the graph holds, and the refusals for
loops whose iterations are not one block."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import onnx
import pytest

from mlx2onnx import Dim, DynamicShapeError, Exporter, Verifier
from tests.support.harness import ort_session

DYNAMIC = {"x": {0: "batch", 1: "seq"}}
SIZES = {"batch": [1, 3], "seq": [1, 2, 5, 40]}
W = mx.random.normal((16, 16), key=mx.random.key(1)) * 0.3
U = mx.random.normal((16, 16), key=mx.random.key(2)) * 0.3
mx.eval(W, U)


def rnn(x):
    """An Elman RNN over x [batch, seq, 16]: every hidden state, stacked."""
    h = mx.zeros((x.shape[0], 16))
    ys = []
    for t in range(x.shape[1]):
        h = mx.tanh(x[:, t] @ W + h @ U)
        ys.append(h)
    return mx.stack(ys, axis=1)


def rnn_last(x):
    """The same RNN, first state None (the first step differs), returning the last state."""
    h = None
    for t in range(x.shape[1]):
        h = mx.tanh(x[:, t] @ W) if h is None else mx.tanh(x[:, t] @ W + h @ U)
    return h


def scan_in_place(x):
    """A linear recurrence written into a preallocated output, like recurrent_gemma."""
    a = mx.sigmoid(x @ W)
    h = mx.zeros_like(x[:, 0])
    y = mx.zeros_like(x)
    for t in range(x.shape[1]):
        h = a[:, t] * h + x[:, t]
        y[:, t] = h
    return y, h


def running_sum(x):
    """Rows read with an integer index (``x[i]``), one more step per row."""
    out = x[0]
    for i in range(1, x.shape[0]):
        out = out + x[i]
    return out


def repeated(x):
    """No slicing at all: the same update once per row of the input."""
    y = x
    for _ in range(x.shape[0]):
        y = y * 0.5 + mx.sin(y)
    return y


def two_loops(x):
    """A loop, a layer between, and a second loop over its output (two layers of a model)."""
    first = rnn(x)
    return rnn(mx.sin(first) * 2)


def export(fun, example, dynamic=DYNAMIC):
    proto = Exporter(dynamic=dynamic).export(fun, example)
    onnx.checker.check_model(proto, full_check=True)
    return proto


def loops_in(proto):
    """The Loop nodes of a model (each in the then-branch of the If on its trip count)."""
    found = []

    def walk(graph):
        for node in graph.node:
            if node.op_type == "Loop":
                found.append(node)
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH and node.op_type != "Loop":
                    walk(attribute.g)

    walk(proto.graph)
    return found


@pytest.mark.parametrize(
    "fun, count",
    [(rnn, 1), (rnn_last, 1), (scan_in_place, 1), (two_loops, 2)],
    ids=["stacked", "last-state", "slice-update", "two-loops"],
)
def test_loop_matches_mlx_at_every_length(fun, count):
    example = mx.random.normal((2, 8, 16))
    proto = export(fun, example)
    assert len(loops_in(proto)) == count
    body = onnx.helper.get_attribute_value(loops_in(proto)[0].attribute[0])
    assert len(body.node) < 40  # one step, not eight
    report = Verifier(sizes=SIZES).verify(proto, fun, example)
    assert report.passed, str(report)
    assert len(report.outputs) == 8 * len(proto.graph.output)


@pytest.mark.parametrize("fun", [running_sum, repeated])
def test_loop_over_the_rows(fun):
    example = mx.random.normal((6, 3, 4))
    proto = export(fun, example, dynamic={"x": {0: "rows"}})
    assert len(loops_in(proto)) == 1
    report = Verifier(sizes={"rows": [1, 2, 7, 30]}).verify(proto, fun, example)
    assert report.passed, str(report)


def test_loop_trip_count_follows_the_size():
    """The loop's trip count is read from the input's shape (the stacked output's length
    is the sequence itself), so the graph's output shapes stay symbolic."""
    proto = export(rnn, mx.random.normal((2, 8, 16)))
    dims = [d.dim_param or d.dim_value for d in proto.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq", 16]


def test_a_recovered_loop_is_a_loop_record_translated_by_its_kinds_handler():
    """The trace holds the loop as a record of its own kind (not a fake primitive): its
    trip count a size, its body a trace of one step; the registry dispatches the kind."""
    from mlx2onnx.capture.dynamic import capture_dynamic
    from mlx2onnx.capture.trace import LoopRecord
    from mlx2onnx.translate import registry
    from mlx2onnx.translate.loops import translate_loop

    trace, _ = capture_dynamic(rnn, (mx.random.normal((2, 8, 16)),), {}, DYNAMIC)
    loops = [r for r in trace.primitives if r.kind == "loop"]
    assert len(loops) == 1 and isinstance(loops[0], LoopRecord)
    loop = loops[0]
    assert repr(loop.trips) == "seq-1" and len(loop.body.primitives) < 10  # iteration 0 unrolled before it
    assert loop.nested == loop.body.primitives and all(r.kind == "primitive" for r in loop.nested)
    assert set(trace.all_records()) >= set(loop.nested)
    assert registry.lookup_kind("loop") is translate_loop and registry.lookup("Loop") is None
    with pytest.raises(registry.DuplicateRegistrationError, match="record kind 'loop'"):
        registry.handles_kind("loop")(lambda ctx, rec, translate: [])


def test_loop_that_reads_two_steps_back_carries_both():
    """``a, b = b, f(a, b)`` reads the value of two steps back: the block is cut so that
    it carries both (``a + b`` computed for the next step); the loop starts at the third
    position, so the model needs seq >= 2, which the refusal names with the loop's line."""

    def fibonacci_like(x):
        a, b = x[:, 0], x[:, 1]
        out = [a, b]
        for t in range(2, x.shape[1]):
            a, b = b, mx.tanh(a + b + x[:, t])
            out.append(b)
        return mx.stack(out, axis=1)

    example = mx.random.normal((2, 8, 16))
    with pytest.raises(
        DynamicShapeError,
        match=r"Dim\('seq', min=2\).*Line \d+ of .*test_loops\.py "
        r"\(`for t in range\(2, x\.shape\[1\]\):`\) is that loop",
    ):
        Exporter(dynamic=DYNAMIC).export(fibonacci_like, example)
    proto = Exporter(dynamic={"x": {0: "batch", 1: Dim("seq", min=2)}}).export(fibonacci_like, example)
    assert len(loops_in(proto)) == 1
    report = Verifier(sizes={"batch": [1, 3], "seq": [2, 3, 4, 5, 40]}).verify(proto, fibonacci_like, example)
    assert report.passed, str(report)


def test_loop_that_reads_far_back_is_refused_with_its_line():
    def far_back(x):
        ys = [x[:, 0]]
        for t in range(1, x.shape[1]):
            ys.append(mx.tanh(ys[-1] + ys[t // 2] + x[:, t]))
        return mx.stack(ys, axis=1)

    with pytest.raises(
        DynamicShapeError,
        match=r"\(`for t in range\(1, x\.shape\[1\]\):`\).*recovers a Python loop"
        r".*iterations back",
    ):
        Exporter(dynamic=DYNAMIC).export(far_back, mx.random.normal((2, 8, 16)))


def test_loop_over_half_the_size_is_refused_with_its_line():
    def middle(x):
        ys = []
        h = mx.zeros_like(x[:, 0])
        for t in range(x.shape[1]):
            h = mx.tanh(h + x[:, t])
            ys.append(h)
        return ys[len(ys) // 2]

    with pytest.raises(
        DynamicShapeError,
        match=r"\(`for t in range.*recovers a Python loop.*not once per position of a dynamic dimension",
    ):
        Exporter(dynamic=DYNAMIC).export(middle, mx.random.normal((2, 8, 16)))


def test_loop_needing_more_unrolled_steps_than_the_smallest_size_names_the_bound():
    def warmup(x):
        h = mx.tanh(x[:, 0] * 2)  # two special first steps, then the recurrence
        h = mx.tanh(h @ U + x[:, 1] * 3)
        for t in range(2, x.shape[1]):
            h = mx.tanh(h @ U + x[:, t])
        return h

    with pytest.raises(DynamicShapeError, match=r"runs seq-2 times.*Dim\('seq', min=2\)"):
        Exporter(dynamic=DYNAMIC).export(warmup, mx.random.normal((2, 8, 16)))
    proto = Exporter(dynamic={"x": {0: "batch", 1: Dim("seq", min=2)}}).export(warmup, mx.random.normal((2, 8, 16)))
    report = Verifier(sizes={"batch": [1, 3], "seq": [2, 3, 40]}).verify(proto, warmup, mx.random.normal((2, 8, 16)))
    assert report.passed, str(report)


def test_loop_values_match_numpy_recurrence():
    """The exported loop computes the recurrence itself, checked against NumPy (not only
    against MLX) at a length no trace used."""

    proto = export(rnn, mx.random.normal((2, 8, 16)))
    x = np.random.default_rng(0).standard_normal((3, 23, 16)).astype(np.float32)
    (out,) = ort_session(proto).run(None, {"x": x})
    h = np.zeros((3, 16), np.float32)
    w, u = np.array(W), np.array(U)
    for t in range(23):
        h = np.tanh(x[:, t] @ w + h @ u)
        np.testing.assert_allclose(out[:, t], h, atol=1e-5)
