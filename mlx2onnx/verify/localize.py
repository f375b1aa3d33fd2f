"""Localize a parity mismatch: name the first MLX primitive whose ONNX translation diverges.

The ONNX model is run with every MLX-bound intermediate exposed as an extra graph output
(the exporter names the value of record ``i`` of primitive ``P`` ``p_i``, or ``p_i:k`` for
its k-th output, and tags its nodes with ``mlx.primitive = "P:i"``). Each record is then
evaluated in MLX by :mod:`mlx2onnx.verify.interpret` **on the ONNX side's own input values**
(a local check), so an error upstream does not blame the nodes downstream of it. The
first record, in topological order, whose ONNX output differs from that local MLX value
beyond the tolerance is the culprit. Records the interpreter cannot evaluate are skipped
and listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import mlx.core as mx
import numpy as np
import onnx

from .. import dtypes
from ..capture import records
from ..capture.inputs import normalize_inputs
from ..capture.trace import Primitive, Trace
from ..capture.tracing import capture
from ..errors import VerificationError
from ..io import metadata
from ..translate.markers import PRIMITIVE_TAG, layout_perm, primitive_tag, value_name
from . import interpret
from .compare import DEFAULT_TOLERANCES, EXACT, compare
from .inputs import random_like
from .localize_report import LocalizeReport, RecordCheck
from .session import as_declared_types, open_session, run_session

# Records whose output order is implementation-defined: compare values sorted on the axis.
ORDER_INSENSITIVE = {"Partition"}
# Records whose outputs may legitimately differ between runtimes: not judged.
NOT_JUDGED = {"ArgPartition": "its index order is implementation-defined (any valid partition is correct)"}


def _spec_text(spec) -> str:
    return f"{spec.name} {dtypes.name(spec.dtype)}{list(spec.shape)}"


def _random_inputs(args: tuple, kwargs: Mapping[str, Any], seed: int, random_inputs: bool):
    """The inputs :class:`~mlx2onnx.verify.parity.Verifier` feeds, drawn in the same order."""
    signature = normalize_inputs(args, kwargs)
    rng = np.random.default_rng(seed)
    call_args = [random_like(a, rng) if random_inputs and isinstance(a, mx.array) else a for a in signature.args]
    call_kwargs = {
        k: random_like(v, rng) if random_inputs and isinstance(v, mx.array) else v
        for k, v in sorted(signature.kwargs.items())
    }
    return call_args, call_kwargs


def onnx_names(proto: onnx.ModelProto, trace: Trace) -> tuple[dict[str, str], str]:
    """MLX value name -> ONNX value name for every exposed record output, and a problem
    description when the model was evidently not exported from this trace."""
    outputs = metadata.read(proto).outputs
    produced: dict[str, str] = {}  # ONNX value name -> the node's mlx.primitive tag
    for node in proto.graph.node:
        tag = next((p.value for p in node.metadata_props if p.key == PRIMITIVE_TAG), "")
        for out in node.output:
            produced[out] = tag
    mapping: dict[str, str] = {}
    problem = ""
    foreign = sorted({t for t in produced.values() if t} - {primitive_tag(r) for r in trace.primitives})
    if foreign:
        return {}, (
            f"the model has nodes for MLX records {', '.join(foreign[:4])} that this function's trace does "
            "not contain: it was not exported from this function and these example inputs (or its export "
            "folded a loop, whose records are numbered otherwise)"
        )
    for rec in trace.primitives:
        for k, spec in enumerate(rec.outputs):
            name = value_name(rec, k)
            if name in produced:
                if produced[name] not in ("", primitive_tag(rec)):
                    problem = (
                        f"the model's value {name} comes from MLX record {produced[name]}, not "
                        f"{primitive_tag(rec)}: the model was not exported from this function and inputs"
                    )
                    return {}, problem
                mapping[spec.name] = name
    for out, entry in zip(trace.outputs, outputs):
        mapping[out.spec.name] = entry.name
    return mapping, problem


def _with_outputs(proto: onnx.ModelProto, names: list[str], specs: dict) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    existing = {o.name for o in model.graph.output}
    meta = metadata.read(proto)
    for name in names:
        if name in existing:
            continue
        elem = int(dtypes.to_onnx(meta.carried(specs[name].dtype)))  # no shape: the value's own layout and sizes
        model.graph.output.append(onnx.helper.make_tensor_value_info(name, elem, None))
    return model


def in_mlx_layout(proto: onnx.ModelProto, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The runtime's ``values`` in MLX's layout: a value the layout pass left channels-first
    (its node's ``mlx.layout``, :func:`~mlx2onnx.translate.markers.layout_perm`) transposed back."""
    perms = {
        out: perm for node in proto.graph.node if (perm := layout_perm(node)) is not None for out in node.output[:1]
    }
    return {name: np.transpose(value, perms[name]) if name in perms else value for name, value in values.items()}


def _tolerance(dtype: mx.Dtype, tolerances: Mapping[str, tuple[float, float]] | None) -> tuple[float, float]:
    table = dict(DEFAULT_TOLERANCES)
    table.update(tolerances or {})
    return table.get(dtypes.name(dtype), EXACT)


def _numpy(value: mx.array, rec: Primitive, k: int) -> np.ndarray:
    array = dtypes.array_to_numpy(value)
    if rec.name in ORDER_INSENSITIVE:
        array = np.sort(array, axis=rec.arguments[1])
    return array


def localize(
    model: Any,
    fun: Any,
    args: tuple,
    kwargs: Mapping[str, Any],
    *,
    seed: int = 0,
    random_inputs: bool = True,
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    graph_optimization_level: str = "all",
    session_config: Mapping[str, str] | None = None,
    progress=None,
    limit: int = 20,
) -> LocalizeReport:
    """Find the first record whose ONNX value differs from MLX evaluated on the same inputs.

    ``model`` is a path or an ``onnx.ModelProto`` exported from ``fun`` traced on the
    example inputs ``args``/``kwargs``; the inputs compared are those
    :func:`mlx2onnx.verify` uses for the same ``seed``; onnxruntime runs with the session
    config entries ``session_config`` (the check's runtime options).
    """

    proto = onnx.load(str(model), load_external_data=False) if not isinstance(model, onnx.ModelProto) else model
    base_dir = None if isinstance(model, onnx.ModelProto) else str(Path(model).parent)
    # a dynamic export was traced shapeless (its records hold sizes as symbols): the same
    # program, traced at these inputs' sizes, numbers its records as the model does
    trace = capture(fun, args, kwargs, shapeless=metadata.read(proto).dynamic is not None)
    report = LocalizeReport(records=len(trace.primitives))
    mapping, report.problem = onnx_names(proto, trace)
    if report.problem:
        return report
    specs = {s.name: s for rec in trace.primitives for s in rec.outputs}
    specs.update({o.spec.name: o.spec for o in trace.outputs})
    exposed = [n for n in mapping if specs[n].dtype != mx.complex64]
    onnx_specs = {mapping[n]: specs[n] for n in exposed}
    augmented = _with_outputs(proto, [mapping[n] for n in exposed], onnx_specs)

    call_args, call_kwargs = _random_inputs(args, kwargs, seed, random_inputs)
    if progress is not None:
        progress.update(f"localizing: running onnxruntime with {len(exposed)} exposed values")
    if base_dir is not None and any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer):
        onnx.load_external_data_for_model(augmented, base_dir)
    got = in_mlx_layout(
        proto,
        _run_exposed(
            augmented,
            [mapping[n] for n in exposed],
            _feeds(proto, call_args, call_kwargs),
            graph_optimization_level,
            session_config,
        ),
    )

    reference = interpret.bind_inputs(trace, tuple(call_args), call_kwargs)  # the all-MLX chain
    mixed = dict(reference)  # ONNX values where exposed, else MLX evaluated on them
    unknown: set[str] = set()
    reconstructed: dict[str, str] = {}  # MLX name -> "Prim:index" for values recomputed in MLX
    total = len(trace.primitives)
    for rec in trace.primitives:
        if progress is not None and rec.index % 8 == 0:
            progress.update(f"localizing: record {rec.index + 1}/{total}")
        onnx_values = {
            k: got[mapping[s.name]] for k, s in enumerate(rec.outputs) if s.name in mapping and mapping[s.name] in got
        }
        ref_out = _evaluate(rec, [reference.get(s.name) for s in rec.inputs])
        for spec, value in zip(rec.outputs, ref_out or [None] * len(rec.outputs)):
            if value is not None:
                reference[spec.name] = value
        local_out, reason = _evaluate_on(rec, mixed, unknown)
        if local_out is None:
            report.skipped.append((rec.index, rec.name, reason))
        elif not onnx_values:
            report.unexposed.append((rec.index, rec.name))
        elif rec.name in NOT_JUDGED:
            report.skipped.append((rec.index, rec.name, NOT_JUDGED[rec.name]))
        else:
            report.checked += 1
            check = _divergence(rec, onnx_values, local_out, ref_out, mapping, tolerances, reconstructed)
            if check is not None:
                report.divergent.append(check)
                report.first = report.first or check
            if len(report.divergent) >= limit:
                break
        _carry(rec, onnx_values, local_out, mixed, unknown, reconstructed)
    return report


def _carry(
    rec: Primitive,
    onnx_values: dict,
    local_out: list | None,
    mixed: dict,
    unknown: set[str],
    reconstructed: dict[str, str],
) -> None:
    """What later records read for ``rec``'s outputs: the ONNX value where exposed, else MLX's
    on the ONNX side's inputs (named in ``reconstructed``), else nothing (``unknown``)."""
    for k, spec in enumerate(rec.outputs):
        if k in onnx_values:  # cast back when the float policy carried it in another type
            mixed[spec.name] = dtypes.numpy_to_array(onnx_values[k]).astype(spec.dtype)
        elif local_out is not None:
            mixed[spec.name] = local_out[k]
            reconstructed[spec.name] = f"{rec.name}:{rec.index}"
        else:
            unknown.add(spec.name)


def _feeds(proto: onnx.ModelProto, call_args: tuple, call_kwargs: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The model's graph inputs by name, from the call's arrays (its metadata binds them)."""
    positional = [a for a in call_args if isinstance(a, mx.array)]
    feeds = {}
    for binding in metadata.read(proto).inputs:
        feeds[binding.name] = dtypes.array_to_numpy(binding.pick(positional, call_kwargs))
    return feeds


def _run_exposed(
    augmented: onnx.ModelProto,
    wanted: list[str],
    feeds: dict,
    graph_optimization_level: str,
    session_config: Mapping[str, str] | None,
) -> dict[str, np.ndarray]:
    """onnxruntime's values of ``wanted`` (graph outputs of the augmented model) by name."""
    try:
        session = open_session(augmented.SerializeToString(), graph_optimization_level, config=session_config)
        return dict(zip(wanted, run_session(session, wanted, as_declared_types(session, feeds))))
    except Exception as exc:
        raise VerificationError(
            f"onnxruntime could not run the model with its {len(wanted)} intermediate values exposed: {exc}"
        ) from exc


def _evaluate_on(rec: Primitive, mixed: dict, unknown: set[str]) -> tuple[list | None, str]:
    """MLX's outputs of ``rec`` on the values known so far (the ONNX side's where exposed), or
    None and why not."""
    missing = [s.name for s in rec.inputs if s.name in unknown or s.name not in mixed]
    if missing:
        return None, f"input {missing[0]} has no known value (an upstream record was skipped)"
    if not interpret.can_evaluate(rec.name):
        return None, interpret.SKIPPED.get(rec.name, "the interpreter has no MLX evaluator for it")
    try:
        out = interpret.evaluate(rec, [mixed[s.name] for s in rec.inputs])
        mx.eval(out)
    except Exception as exc:  # a record the interpreter cannot run on these inputs
        return None, f"the interpreter failed: {type(exc).__name__}: {exc}"
    return out, ""


def _divergence(
    rec: Primitive,
    onnx_values: dict,
    local_out: list,
    ref_out: list | None,
    mapping: dict,
    tolerances,
    reconstructed: dict[str, str],
) -> RecordCheck | None:
    """The first output of ``rec`` whose ONNX value differs from MLX on the same inputs, as a
    :class:`RecordCheck` (with the all-MLX chain's comparison beside it), or None."""
    for k, onnx_value in onnx_values.items():
        spec = rec.outputs[k]
        tol = _tolerance(spec.dtype, tolerances)
        have = np.sort(onnx_value, axis=rec.arguments[1]) if rec.name in ORDER_INSENSITIVE else onnx_value
        local = compare(mapping[spec.name], have, _numpy(local_out[k], rec, k), dtypes.name(spec.dtype), tol)
        if local.passed:
            continue
        chained = None
        if ref_out is not None:
            chained = compare(mapping[spec.name], have, _numpy(ref_out[k], rec, k), dtypes.name(spec.dtype), tol)
        return RecordCheck(
            rec.index,
            rec.name,
            records.describe(rec.name, rec.arguments),
            tuple(_spec_text(s) for s in rec.inputs),
            mapping[spec.name],
            local,
            chained,
            tuple(f"{s.name} (from {reconstructed[s.name]})" for s in rec.inputs if s.name in reconstructed),
        )
    return None


def _evaluate(rec: Primitive, inputs: list):
    if any(x is None for x in inputs) or not interpret.can_evaluate(rec.name):
        return None
    try:
        out = interpret.evaluate(rec, inputs)
        mx.eval(out)
        return out
    except Exception:
        return None
