"""The parity-test harness: a case table and one function that checks a case.

A :class:`Case` names an MLX function and how to make its inputs for one dtype. Checking
a case exports it (``onnx.checker`` full check included), runs onnxruntime and MLX on the
same fresh random inputs and compares under per-dtype tolerances. Case tables live in
``tests/support/cases/<family>.py`` as a list named ``CASES``; ``tests/translate/test_parity.py`` collects
them all. Inputs are random (seeded by ``MLX2ONNX_TEST_SEED``, default 0), never zeros
or hand-picked expectations; ``edges=True`` also plants NaN, +-inf, -0.0 and integer
extremes into the inputs.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import mlx.core as mx
import numpy as np
import onnx

import mlx2onnx
from mlx2onnx import dtypes
from mlx2onnx.translate.opset import MIN_OPSET, default_opset, target_opset

F32 = (mx.float32,)
FLOATS = (mx.float32, mx.float16, mx.bfloat16)
SIGNED = (mx.int8, mx.int16, mx.int32, mx.int64)
UNSIGNED = (mx.uint8, mx.uint16, mx.uint32, mx.uint64)
INTS = SIGNED + UNSIGNED
REALS = (mx.float32, mx.float16, mx.int32, mx.int64)

SEED = int(os.environ.get("MLX2ONNX_TEST_SEED", "0"))


@dataclass(frozen=True)
class Case:
    """One parity case.

    id: unique name, ``family.what``.
    fn: the MLX function (or module) to export.
    inputs: ``inputs(rng, dtype) -> tuple of arrays`` (or ``(args, kwargs)`` when
        ``keywords`` is true).
    dtypes: the dtypes to run it in; each becomes its own test.
    primitives: primitive names the trace must contain (checked), so coverage is real.
    onnx_ops: ONNX op types the export must contain (checked) - documents the mapping.
    tolerances: ``{"float32": (atol, rtol)}`` overrides.
    edges: plant edge values (NaN, inf, -0.0, integer extremes) into float/int inputs.
    opsets: opsets to export at; ``None`` means the default export's (24, the portable
        target's), onnxruntime's newest (28) and the minimum (17).
    xfail: a reason when the case is a known, documented failure (strict).
    order_insensitive: compare sorted along the last axis (Partition: MLX's order is
        implementation-defined).
    """

    id: str
    fn: Callable
    inputs: Callable[[np.random.Generator, mx.Dtype], Any]
    dtypes: Sequence[mx.Dtype] = F32
    primitives: Sequence[str] = ()
    onnx_ops: Sequence[str] = ()
    tolerances: dict = field(default_factory=dict)
    edges: bool = False
    keywords: bool = False
    opsets: Sequence[int] | None = None
    xfail: str | None = None
    order_insensitive: bool = False

    def resolved_opsets(self) -> list[int]:
        if self.opsets is not None:
            return list(self.opsets)
        return sorted({default_opset(), target_opset("portable"), MIN_OPSET}, reverse=True)


def rng_for(*parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(repr((SEED,) + parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


# -- input makers -------------------------------------------------------------------
def rand(rng: np.random.Generator, shape, dtype=mx.float32, lo=-3.0, hi=3.0) -> mx.array:
    """Uniform random values in [lo, hi) of any dtype (integers: inclusive range)."""
    shape = tuple(shape)
    if dtype == mx.bool_:
        return mx.array(rng.random(shape) < 0.5)
    if dtypes.is_integer(dtype):
        info = np.iinfo(dtypes.to_numpy(dtype))
        lo_i, hi_i = max(int(lo), info.min), min(int(hi), info.max)
        return mx.array(rng.integers(lo_i, hi_i, size=shape, endpoint=True).astype(dtypes.to_numpy(dtype)))
    values = rng.uniform(lo, hi, size=shape).astype(np.float32)
    return mx.array(values).astype(dtype)


def randn(rng, shape, dtype=mx.float32, scale=1.0) -> mx.array:
    return mx.array((rng.standard_normal(tuple(shape)) * scale).astype(np.float32)).astype(dtype)


def positive(rng, shape, dtype=mx.float32, lo=0.1, hi=4.0) -> mx.array:
    return rand(rng, shape, dtype, lo, hi)


def with_edges(rng: np.random.Generator, array: mx.array, fraction: float = 0.25) -> mx.array:
    """``array`` with a random ``fraction`` of its elements replaced by edge values."""
    dtype = array.dtype
    values = np.array(dtypes.array_to_numpy(array.astype(mx.float32) if dtype == mx.bfloat16 else array))
    if values.size == 0:
        return array
    if dtypes.is_float(dtype):
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, -1e-30, 6e4, -6e4], dtype=np.float32)
    elif dtypes.is_integer(dtype):
        info = np.iinfo(values.dtype)
        specials = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=values.dtype)
    else:
        return array
    mask = rng.random(values.shape) < fraction
    picks = specials[rng.integers(0, len(specials), size=values.shape)]
    values = np.where(mask, picks.astype(values.dtype), values)
    return mx.array(values).astype(dtype)


# -- checking -----------------------------------------------------------------------
def make_inputs(case: Case, dtype: mx.Dtype):
    rng = rng_for(case.id, dtypes.name(dtype))
    made = case.inputs(rng, dtype)
    if case.keywords:
        args, kwargs = made
    else:
        args, kwargs = (made if isinstance(made, tuple) else (made,)), {}
    if case.edges:
        args = tuple(with_edges(rng, a) if isinstance(a, mx.array) else a for a in args)
        kwargs = {k: with_edges(rng, v) if isinstance(v, mx.array) else v for k, v in kwargs.items()}
    return tuple(args), dict(kwargs)


def traced_primitives(case: Case, dtype: mx.Dtype) -> set[str]:
    args, kwargs = make_inputs(case, dtype)
    trace = mlx2onnx.capture(case.fn, args, kwargs)
    return {p.name for p in trace.primitives}


def onnx_op_types(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def check_case(case: Case, dtype: mx.Dtype, opset: int) -> mlx2onnx.VerifyReport:
    """Export, check and compare one case; raise AssertionError on any mismatch."""
    args, kwargs = make_inputs(case, dtype)
    trace = mlx2onnx.capture(case.fn, args, kwargs)
    traced = {p.name for p in trace.primitives}
    missing = set(case.primitives) - traced
    assert not missing, f"{case.id}: expected primitives {sorted(missing)} not in the trace {sorted(traced)}"
    model = mlx2onnx.Exporter(opset=opset).export(case.fn, *args, **kwargs)
    onnx.checker.check_model(model, full_check=True)
    ops = onnx_op_types(model)
    absent = set(case.onnx_ops) - ops
    assert not absent, f"{case.id}: expected ONNX ops {sorted(absent)}, the model has {sorted(ops)}"
    verifier = mlx2onnx.Verifier(random_inputs=False, tolerances=case.tolerances or None)
    if case.order_insensitive:
        report = _verify_sorted(verifier, model, case.fn, args, kwargs)
    else:
        report = verifier.verify(model, case.fn, *args, **kwargs)
    assert report.passed, f"{case.id} [{dtypes.name(dtype)}, opset {opset}]\n{report}"
    vacuous = [o.name for o in report.outputs if o.nan_in_reference and o.nan_in_reference == _size(o.shape)]
    assert not vacuous, f"{case.id}: MLX output(s) {vacuous} are all NaN: the comparison proves nothing"
    return report


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


def _verify_sorted(verifier, model, fn, args, kwargs):
    def sorted_fn(*a, **k):
        out = fn(*a, **k)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return tuple(mx.sort(o.astype(mx.float32), axis=-1) for o in outs)

    sorted_model = _append_sort(model)
    return verifier.verify(sorted_model, sorted_fn, *args, **kwargs)


def _append_sort(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with each output cast to float32 and sorted along its last axis."""
    from onnx import helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for out in graph.output:
        rank = len(out.type.tensor_type.shape.dim)
        dim = out.type.tensor_type.shape.dim[rank - 1].dim_value
        raw = out.name + "__raw"
        for node in graph.node:
            node.output[:] = [raw if o == out.name else o for o in node.output]
        k_name = out.name + "__k"
        graph.initializer.append(helper.make_tensor(k_name, onnx.TensorProto.INT64, [1], [dim]))
        graph.node.extend(
            [
                helper.make_node("Cast", [raw], [raw + "_f"], to=onnx.TensorProto.FLOAT),
                helper.make_node(
                    "TopK", [raw + "_f", k_name], [out.name, out.name + "__idx"], axis=-1, largest=0, sorted=1
                ),
            ]
        )
        out.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    del graph.value_info[:]
    return model


def case_params(cases: Sequence[Case]):
    """pytest params: one per (case, dtype, opset), with strict xfail where declared. A case
    without opsets of its own runs at the default opset in the fast core and at the other
    two (onnxruntime's newest, the oldest supported) as ``slow``."""
    import pytest

    params = []
    for case in cases:
        for dtype in case.dtypes:
            for opset in case.resolved_opsets():
                marks = [pytest.mark.xfail(reason=case.xfail, strict=True)] if case.xfail else []
                if case.opsets is None and opset != default_opset():
                    marks.append(pytest.mark.slow)
                params.append(
                    pytest.param(case, dtype, opset, id=f"{case.id}-{dtypes.name(dtype)}-op{opset}", marks=marks)
                )
    return params


def ort_session(model, options=None):
    """The tests' one onnxruntime session opener: ``model`` a ModelProto, a path or bytes, in
    the CPU provider, with ``options`` (an ``ort.SessionOptions``) or a plain session as
    users open one."""
    import onnxruntime as ort

    if isinstance(model, onnx.ModelProto):
        model = model.SerializeToString()
    elif isinstance(model, os.PathLike):
        model = str(model)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


# -- hand-built records: the one way to test a record MLX does not trace here ----------------
@dataclass(frozen=True)
class Arg:
    """One input of a hand-built record: a graph input fed at run time, or a Constant (a weight)."""

    label: str
    array: mx.array
    constant: bool = False


def _letters(k: int) -> str:
    """MLX's NodeNamer names: A..Z, AA, AB, ..."""
    name = ""
    k += 1
    while k:
        k, r = divmod(k - 1, 26)
        name = chr(65 + r) + name
    return name


def record_trace(
    name: str,
    arguments: Sequence,
    inputs: Sequence[Arg],
    outputs: Sequence[tuple[tuple[int, ...], mx.Dtype]],
    device: str = "Device(gpu, 0)",
):
    """``(trace, feeds)``: the Trace of a function made of the single primitive record
    ``name`` (``arguments`` laid out as docs/records.md says) on ``inputs``, with outputs of
    the given shapes and dtypes, as MLX would report it (on a GPU stream by default, where
    the fused records appear), and the graph inputs' feeds by label."""
    from mlx2onnx.capture.trace import Constant, GraphInput, GraphOutput, Primitive, TensorSpec, Trace

    specs = [TensorSpec(_letters(i), tuple(a.array.shape), a.array.dtype) for i, a in enumerate(inputs)]
    out_specs = [TensorSpec(_letters(len(inputs) + i), tuple(s), d) for i, (s, d) in enumerate(outputs)]
    graph_inputs, constants, feeds = [], [], {}
    for spec, arg in zip(specs, inputs):
        if arg.constant:
            constants.append(Constant(spec, arg.array, arg.label))
        else:
            graph_inputs.append(GraphInput(spec, arg.label, len(graph_inputs), None))
            feeds[arg.label] = dtypes.array_to_numpy(arg.array)
    record = Primitive(0, name, tuple(arguments), tuple(specs), tuple(out_specs))
    trace = Trace(
        inputs=tuple(graph_inputs),
        outputs=tuple(GraphOutput(s, None) for s in out_specs),
        constants=tuple(constants),
        primitives=(record,),
        device=device,
        function_name=name,
    )
    return trace, feeds


def export_and_run(trace, feeds: dict, exporter: mlx2onnx.Exporter) -> tuple[onnx.ModelProto, list[np.ndarray]]:
    """Translate ``trace``, check the model (full check), and run it in onnxruntime on ``feeds``."""
    import onnx_ir as ir

    from mlx2onnx.verify.session import as_declared_types, run_session

    proto = ir.serde.serialize_model(exporter.trace_to_ir(trace))
    onnx.checker.check_model(proto, full_check=True)
    session = ort_session(proto)
    feeds = as_declared_types(session, feeds)  # the float policy may carry bfloat16 as float32
    return proto, run_session(session, [o.name for o in session.get_outputs()], feeds)


def run_onnx(model: onnx.ModelProto, *args: mx.array) -> np.ndarray:
    """The first output of ``model`` in onnxruntime's CPU provider, fed ``args`` in order."""
    session = ort_session(model)
    feeds = {i.name: np.array(a) for i, a in zip(session.get_inputs(), args)}
    return session.run(None, feeds)[0]
