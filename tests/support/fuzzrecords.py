"""Random records of the primitives MLX on this CPU never emits, for the differential fuzzer.

The fused ``mx.fast`` primitives (RMSNorm, LayerNorm, RoPE, ScaledDotProductAttention) are
only recorded on a GPU stream, and MLX's simplify pass drops Copy and StopGradient before
the callback sees them (``docs/records.md``). So, as in
``tests/capture/test_fast_records.py``, ``generate(seed)`` builds the one-primitive trace a GPU
would report (random shapes, dtypes, eps, rotary dims, scales, masks, sinks), and
``check(record)`` translates it at the record's opset, runs ``onnx.checker`` (full) and
onnxruntime, and compares with the ``mx.fast`` op computed here on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mlx.core as mx
import numpy as np

from mlx2onnx import dtypes
from tests.support.fuzzgen import Outcome
from tests.support.harness import ort_session

KINDS = ("RMSNorm", "LayerNorm", "RoPE", "ScaledDotProductAttention", "Copy", "StopGradient")
FLOATS = (mx.float32, mx.float16, mx.bfloat16)


@dataclass
class Record:
    """One primitive record: its name, arguments, inputs (``Arg``s) and expected outputs."""

    seed: int
    name: str
    arguments: list
    inputs: list
    expected: list
    output_dtypes: list
    opset: int
    bfloat16: str = "auto"
    tolerances: dict = field(default_factory=dict)

    def describe(self) -> str:
        ins = ", ".join(
            f"{a.label}{list(a.array.shape)}:{dtypes.name(a.array.dtype)}{' const' if a.constant else ''}"
            for a in self.inputs
        )
        return f"{self.name} arguments={self.arguments!r} inputs=[{ins}] opset={self.opset} bfloat16={self.bfloat16}"


def _randn(rng, shape, dtype, scale=1.0, edges=False):
    x = rng.standard_normal(shape).astype(np.float32) * scale
    if edges and x.size:
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-30, 3e4], np.float32)
        x = np.where(rng.random(shape) < 0.1, specials[rng.integers(0, len(specials), size=shape)], x)
    return mx.array(x).astype(dtype)


def generate(seed: int) -> Record:
    """A random record, fully determined by ``seed``."""
    from mlx2onnx.translate.opset import default_opset
    from tests.support.harness import Arg

    rng = np.random.default_rng(seed)
    kind = KINDS[int(rng.integers(len(KINDS)))]
    dtype = FLOATS[int(rng.integers(3))]
    opset = int(rng.choice([17, 23, default_opset()]))
    bf16 = "keep" if dtype == mx.bfloat16 and rng.random() < 0.3 else "auto"
    edges = bool(rng.random() < 0.2)

    def rec(name, arguments, inputs, expected, out_dtypes=None, tolerances=None):
        mx.eval(expected)
        return Record(
            seed,
            name,
            list(arguments),
            inputs,
            expected,
            out_dtypes or [e.dtype for e in expected],
            opset,
            bf16,
            tolerances or {},
        )

    if kind in ("Copy", "StopGradient"):
        dt = [mx.float32, mx.float16, mx.bfloat16, mx.int32, mx.uint8, mx.bool_][int(rng.integers(6))]
        shape = tuple(int(d) for d in rng.integers(0, 4, size=int(rng.integers(0, 4))))
        x = (
            mx.array(rng.integers(-50, 50, size=shape)).astype(dt)
            if dt not in FLOATS
            else _randn(rng, shape, dt, 3, edges)
        )
        return rec(kind, [], [Arg("x", x)], [x])
    if kind in ("RMSNorm", "LayerNorm"):
        shape = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(0, 3)))) + (int(rng.integers(1, 33)),)
        x = _randn(rng, shape, dtype, float(rng.choice([0.1, 1.0, 10.0])), edges)
        x = x + mx.array(rng.uniform(-2, 2, size=shape[:-1] + (1,)).astype(np.float32)).astype(
            dtype
        )  # an offset per row
        eps = float(np.float32(rng.choice([1e-6, 1e-5, 1e-3, 0.1])))
        weight_const = bool(rng.random() < 0.7)
        w = _randn(rng, shape[-1:], dtype) if rng.random() < 0.7 else None
        b = _randn(rng, shape[-1:], dtype) if kind == "LayerNorm" and rng.random() < 0.6 else None
        inputs = [Arg("x", x), Arg("w", w if w is not None else mx.array(1, dtype=dtype), weight_const or w is None)]
        if kind == "RMSNorm":
            return rec(kind, [eps], inputs, [mx.fast.rms_norm(x, w, eps)])
        inputs.append(Arg("b", b if b is not None else mx.array(0, dtype=dtype), weight_const or b is None))
        return rec(kind, [eps], inputs, [mx.fast.layer_norm(x, w, b, eps)])
    if kind == "RoPE":
        return _rope(rng, dtype, edges, rec, Arg)
    return _attention(rng, dtype, rec, Arg)


def _rope(rng, dtype, edges, rec, Arg):
    head = int(rng.choice([2, 4, 6, 8, 16]))
    lead = tuple(int(d) for d in rng.integers(1, 4, size=int(rng.integers(1, 4))))  # [B, (H,) L] before the head
    shape = lead + (int(rng.integers(1, 6)), head)
    dims = int(rng.choice(range(2, head + 1, 2)))
    traditional = bool(rng.random() < 0.5)
    scale = float(rng.choice([1.0, 0.5, 0.25, 2.0]))
    base = float(rng.choice([10000.0, 500.0, 1e6]))
    x = _randn(rng, shape, dtype, 1.0, edges)
    per_batch = bool(rng.random() < 0.4)
    offset_values = rng.integers(0, 50, size=(shape[0],) if per_batch else ()).astype(np.int32)
    offset = mx.array(offset_values)
    freqs = mx.array(rng.uniform(1.0, 50.0, size=dims // 2).astype(np.float32)) if rng.random() < 0.25 else None
    forward = bool(rng.random() < 0.8)
    inputs = [Arg("x", x), Arg("offset", offset, constant=bool(rng.random() < 0.5))]
    if freqs is not None:
        inputs.append(Arg("freqs", freqs, constant=True))

    def rope(a):
        return mx.fast.rope(
            a,
            dims,
            traditional=traditional,
            base=None if freqs is not None else base,
            scale=scale,
            offset=offset,
            freqs=freqs,
        )

    expected = rope(x) if forward else mx.vjp(rope, [mx.zeros_like(x)], [x])[1][0]
    arguments = [dims, traditional, 1.0 if freqs is not None else base, scale, forward]
    return rec("RoPE", arguments, inputs, [expected])


def _attention(rng, dtype, rec, Arg):
    from tests.capture.test_fast_records import sdpa_record_io

    batch, kv_heads = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    q_heads = kv_heads * int(rng.integers(1, 4))
    q_len, k_len = int(rng.integers(1, 6)), int(rng.integers(1, 7))
    head_dim = int(rng.choice([1, 4, 8, 16]))
    v_dim = head_dim if rng.random() < 0.7 else int(rng.choice([2, 4, 8]))
    scale = float(np.float32(rng.choice([head_dim**-0.5, 1.0, 0.2, 1.7])))
    mask_kind = [None, "causal", "bool", "additive"][int(rng.integers(4))]
    q = _randn(rng, (batch, q_heads, q_len, head_dim), dtype)
    k = _randn(rng, (batch, kv_heads, k_len, head_dim), dtype)
    v = _randn(rng, (batch, kv_heads, k_len, v_dim), dtype)
    mask = None
    mshape = (batch, q_heads, q_len, k_len) if rng.random() < 0.6 else (q_len, k_len)
    if mask_kind == "bool":
        mask = mx.array(rng.random(mshape) < 0.6)
    elif mask_kind == "additive":
        mask = mx.array(rng.normal(0, 2, size=mshape).astype(np.float32)).astype(dtype)
    sinks = _randn(rng, (q_heads,), dtype, 1.5) if rng.random() < 0.25 else None
    logsumexp = bool(rng.random() < 0.2)
    causal = mask_kind == "causal"
    expected, inputs, out_dtypes = sdpa_record_io(q, k, v, scale, mask, sinks, causal, logsumexp, dtype)
    return rec(
        "ScaledDotProductAttention",
        [scale, causal, sinks is not None, logsumexp, False],
        inputs,
        expected,
        out_dtypes,
        {"float32": (2e-4, 2e-4)} if logsumexp else None,
    )


def check(record: Record) -> Outcome:
    """Translate ``record``, run it in onnxruntime and compare with the expected outputs."""
    import onnx
    import onnx_ir as ir

    import mlx2onnx
    from mlx2onnx import dtypes
    from mlx2onnx.verify.compare import DEFAULT_TOLERANCES, EXACT, compare
    from mlx2onnx.verify.session import as_declared_types, run_session
    from tests.support.harness import record_trace

    prims = frozenset([record.name])
    trace, feeds = record_trace(
        record.name,
        record.arguments,
        record.inputs,
        [(tuple(e.shape), d) for e, d in zip(record.expected, record.output_dtypes)],
    )
    exporter = mlx2onnx.Exporter(opset=record.opset, bfloat16=record.bfloat16)
    try:
        proto = ir.serde.serialize_model(exporter.trace_to_ir(trace))
        onnx.checker.check_model(proto, full_check=True)
    except mlx2onnx.ConversionError as exc:
        return Outcome(record.seed, record.opset, "skip", f"refused: {exc}", prims)
    except Exception as exc:  # noqa: BLE001 - every other failure is a finding
        return Outcome(record.seed, record.opset, "export-error", f"{type(exc).__name__}: {exc}", prims)
    try:
        session = ort_session(proto)
        got = run_session(session, [o.name for o in session.get_outputs()], as_declared_types(session, feeds))
    except Exception as exc:  # noqa: BLE001
        return Outcome(record.seed, record.opset, "mismatch", f"onnxruntime: {type(exc).__name__}: {exc}", prims)
    table = dict(DEFAULT_TOLERANCES, **record.tolerances)
    lines = []
    for k, (g, e) in enumerate(zip(got, record.expected)):
        name = dtypes.name(e.dtype)
        report = compare(f"output_{k}", np.asarray(g), dtypes.array_to_numpy(e), name, table.get(name, EXACT))
        if not report.passed:
            lines.append(report.line())
    if lines:
        return Outcome(record.seed, record.opset, "mismatch", "\n".join(lines), prims)
    return Outcome(record.seed, record.opset, "pass", "", prims)
