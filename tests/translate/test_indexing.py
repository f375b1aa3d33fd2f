"""Indexing handlers beyond the parity table: refusals that name the opset, records only
MLX's C++ API produces (hand-built from a real trace), and documented out-of-bounds
behaviour of the dynamic slices."""

from __future__ import annotations

import dataclasses

import mlx.core as mx
import numpy as np
import onnx_ir as ir
import pytest

import mlx2onnx
from mlx2onnx.errors import ConversionError
from tests.support.harness import Arg, ort_session, record_trace

RNG = np.random.default_rng(1234)


def run_onnx(model, *arrays):
    proto = model if not isinstance(model, ir.Model) else ir.serde.serialize_model(model)
    session = ort_session(proto)
    feeds = {i.name: np.array(a) for i, a in zip(session.get_inputs(), arrays)}
    return session.run(None, feeds)


@pytest.mark.parametrize("method, code", [("maximum", 0), ("minimum", 1)])
def test_scatter_max_min_refused_below_opset_18(method, code):
    x = mx.array(RNG.standard_normal((4, 3)).astype(np.float32))
    i = mx.array([0, 2, 2])
    u = mx.array(RNG.standard_normal((3, 3)).astype(np.float32))
    fn = lambda x, i, u: getattr(x.at[i], method)(u)  # noqa: E731
    with pytest.raises(ConversionError) as info:
        mlx2onnx.Exporter(opset=17).export(fn, x, i, u)
    message = str(info.value)
    assert "Scatter" in message and f"reduce={code}" in message
    assert "opset 18" in message and "opset 17" in message
    assert mlx2onnx.verify(mlx2onnx.Exporter(opset=18).export(fn, x, i, u), fn, x, i, u)


def single_record_trace(args, name, arguments, out_shape):
    """One ``name`` record on ``args``, argued and shaped by hand: the form MLX's C++
    ``gather``/``scatter`` produce but Python indexing never does."""
    inputs = [Arg(f"x{k}", a) for k, a in enumerate(args)]
    return record_trace(name, arguments, inputs, [(tuple(out_shape), args[0].dtype)], device="cpu")[0]


@pytest.mark.parametrize("opset", [28, 17])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.int32])
def test_gather_wide_slice_on_indexed_axis(opset, dtype):
    """Gather[[0], (2, 3)] on a [5, 4] array: out[i, j, k] = a[idx[i] + j, k] (negative
    indices wrapped first), an index grid."""
    a = mx.array(RNG.integers(-50, 50, (5, 4))).astype(dtype)
    idx = mx.array(RNG.choice([-5, -4, -3, -2, 0, 1, 2, 3], (3,)).astype(np.int32))  # idx + 1 stays in range
    trace = single_record_trace((a, idx), "Gather", [[0], (2, 3)], (3, 2, 3))
    (got,) = run_onnx(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace), a, idx)
    start = mx.where(idx < 0, idx + 5, idx)
    want = mx.stack([mx.take(a, start + j, axis=0)[:, :3] for j in range(2)], axis=1)
    np.testing.assert_array_equal(got, np.array(want.astype(mx.float32)).astype(got.dtype))


@pytest.mark.parametrize("opset", [28, 17])
def test_gather_two_axes_partial_slices(opset):
    """Gather[[0, 2], (1, 2, 2)] on [3, 4, 5]: slices narrower than the non-indexed axis and
    wider than 1 on an indexed one."""
    a = mx.array(RNG.standard_normal((3, 4, 5)).astype(np.float32))
    i = mx.array(RNG.integers(-3, 3, (2, 2)).astype(np.int64))
    j = mx.array(RNG.integers(0, 4, (2, 2)).astype(np.uint32))  # j + 1 < 5
    trace = single_record_trace((a, i, j), "Gather", [[0, 2], (1, 2, 2)], (2, 2, 1, 2, 2))
    (got,) = run_onnx(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace), a, i, j)
    i0 = mx.where(i < 0, i + 3, i)
    want = mx.stack([a[i0, :2, j + k] for k in range(2)], axis=-1)[:, :, None]
    np.testing.assert_array_equal(got, np.array(want))


@pytest.mark.parametrize("opset", [28, 17])
def test_gather_no_index_is_a_slice(opset):
    a = mx.array(RNG.standard_normal((3, 4)).astype(np.float32))
    i = mx.array([1])
    trace = single_record_trace((a, i), "Gather", [[], (2, 3)], (2, 3))
    trace = dataclasses.replace(
        trace, primitives=(dataclasses.replace(trace.primitives[0], inputs=trace.primitives[0].inputs[:1]),)
    )
    trace = dataclasses.replace(trace, inputs=trace.inputs[:1])
    (got,) = run_onnx(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace), a)
    np.testing.assert_array_equal(got, np.array(a[:2, :3]))


def test_scatter_none_duplicates_last_write_wins_large():
    """Thousands of writes to 4 rows: every row ends up with its last writer's values."""

    def fn(x, i, u):
        x[i] = u
        return x

    x = mx.array(RNG.standard_normal((4, 64)).astype(np.float32))
    i = mx.array(RNG.integers(-4, 4, 3000).astype(np.int32))
    u = mx.array(RNG.standard_normal((3000, 64)).astype(np.float32))
    expected = np.array(fn(mx.array(x), i, u))
    for opset, finder in ((28, "ScatterElements"), (24, "ScatterElements"), (17, "Unique")):
        model = mlx2onnx.Exporter(opset=opset).export(fn, x, i, u)
        ops = {n.op_type for n in model.graph.node}
        assert finder in ops and ("Unique" in ops) == (finder == "Unique")  # tract reads no 4-output Unique
        (got,) = run_onnx(model, x, i, u)
        np.testing.assert_array_equal(got, expected)
    from mlx2onnx.verify.runtimes import registry

    if registry.available("tract"):  # the portable default, in the runtime that refused Unique (and
        # whose integer Mod takes the dividend's sign: negative indices wrap with Where)
        model = mlx2onnx.export(fn, x, i, u)
        runner = registry.open_runtime("tract", model.SerializeToString())
        feeds = {v.name: np.array(a) for v, a in zip(model.graph.input, (x, i, u))}
        np.testing.assert_array_equal(runner.run(feeds, [model.graph.output[0].name])[0], expected)


def test_dynamic_slice_out_of_bounds_start_is_clamped():
    """MLX leaves an out-of-range start undefined; the export clamps it into
    [0, dim - size] (the declared output shape always holds)."""
    x = mx.array(RNG.standard_normal((5, 4)).astype(np.float32))
    fn = lambda x, s: mx.slice(x, s, [0], (2, 4))  # noqa: E731
    model = mlx2onnx.export(fn, x, mx.array([1]))
    for start, clamped in [(4, 3), (100, 3), (-7, 0)]:
        (got,) = run_onnx(model, x, mx.array([start]))
        np.testing.assert_array_equal(got, np.array(x[clamped : clamped + 2]))


def test_dynamic_slice_update_out_of_bounds_start_is_clamped():
    x = mx.array(RNG.standard_normal((5, 4)).astype(np.float32))
    u = mx.array(RNG.standard_normal((2, 4)).astype(np.float32))
    fn = lambda x, u, s: mx.slice_update(x, u, s, [0])  # noqa: E731
    model = mlx2onnx.export(fn, x, u, mx.array([1]))
    for start, clamped in [(4, 3), (-2, 0)]:
        (got,) = run_onnx(model, x, u, mx.array([start]))
        np.testing.assert_array_equal(got, np.array(fn(x, u, mx.array([clamped]))))


@pytest.mark.parametrize("opset", [28, 17])
@pytest.mark.parametrize("dtype", [mx.float32, mx.float16, mx.int8])
def test_gather_narrow_slices_on_other_axes(opset, dtype):
    """Gather[[1], (2, 1, 3)] on [3, 5, 4] and Gather[[0, 2], (1, 2, 1)]: the slices on the
    non-indexed axes start at 0 and are narrower than the axis."""
    a = mx.array(RNG.integers(-50, 50, (3, 5, 4))).astype(dtype)
    i = mx.array(RNG.integers(-5, 5, (2, 3)).astype(np.int32))
    trace = single_record_trace((a, i), "Gather", [[1], (2, 1, 3)], (2, 3, 2, 1, 3))
    (got,) = run_onnx(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace), a, i)
    want = mx.take(a[:2, :, :3], i, axis=1).transpose(1, 2, 0, 3)[:, :, :, None]
    np.testing.assert_array_equal(got, np.array(want.astype(mx.float32)).astype(got.dtype))

    j = mx.array(RNG.integers(0, 4, (2, 3)).astype(np.uint32))
    i3 = mx.array(RNG.integers(-3, 3, (2, 3)).astype(np.int64))
    trace = single_record_trace((a, i3, j), "Gather", [[0, 2], (1, 2, 1)], (2, 3, 1, 2, 1))
    (got,) = run_onnx(mlx2onnx.Exporter(opset=opset).trace_to_ir(trace), a, i3, j)
    want = a[i3, :2, j][:, :, None, :, None]
    np.testing.assert_array_equal(got, np.array(want.astype(mx.float32)).astype(got.dtype))
