"""The fused ``mx.fast`` primitives, fed to the translator as the records a GPU emits.

This CPU never records RMSNorm, LayerNorm, RoPE or ScaledDotProductAttention (here the
``mx.fast`` ops decompose before export), so each test builds the one-primitive
:class:`~mlx2onnx.capture.Trace` that Metal/CUDA would report (layouts from
``mlx/fast.cpp``), translates it, runs ``onnx.checker`` (full check) and onnxruntime,
and compares with the ``mx.fast`` op computed here on the same random inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import mlx.core as mx
import numpy as np
import pytest

import mlx2onnx
from mlx2onnx import dtypes
from mlx2onnx.translate import kernels
from mlx2onnx.verify.compare import DEFAULT_TOLERANCES, compare
from tests.support.harness import Arg, export_and_run, randn, record_trace, rng_for, with_edges

OPSETS = (28, 23, 17)


# -- building and running one record ----------------------------------------------------
def check_record(
    name,
    arguments,
    inputs,
    expected: Sequence[mx.array],
    setting,
    output_dtypes: Sequence[mx.Dtype] | None = None,
    tolerances: dict | None = None,
) -> set[str]:
    """Export the record, run it, compare every output with ``expected``; the ONNX op types."""
    mx.eval(list(expected))
    out_dtypes = output_dtypes or [e.dtype for e in expected]
    trace, feeds = record_trace(name, arguments, inputs, [(tuple(e.shape), d) for e, d in zip(expected, out_dtypes)])
    exporter = setting.exporter()
    proto, got = export_and_run(trace, feeds, exporter)
    carrier = exporter.float_policy()
    table = dict(DEFAULT_TOLERANCES, **(tolerances or {}))
    for k, (g, e) in enumerate(zip(got, expected)):
        dname = dtypes.name(e.dtype)
        report = compare(f"output_{k}", np.asarray(g), dtypes.array_to_numpy(e), dname, table[dname])
        assert report.passed, f"{name} {list(arguments)} [{setting}]\n{report.line()}"
        assert g.dtype == dtypes.to_numpy(carrier.get(e.dtype, e.dtype)), (g.dtype, e.dtype)
    return {n.op_type for n in proto.graph.node}


@dataclass(frozen=True)
class Setting:
    """One export setting: the MLX dtype of the record, the opset and the bfloat16 policy."""

    dtype: mx.Dtype
    opset: int
    bfloat16: str = "auto"  # "auto" carries bfloat16 as float32 here; "keep" keeps it

    def exporter(self) -> mlx2onnx.Exporter:
        return mlx2onnx.Exporter(opset=self.opset, bfloat16=self.bfloat16)

    def kept_bfloat16(self) -> bool:
        return self.dtype == mx.bfloat16 and mx.bfloat16 not in self.exporter().float_policy()

    def __str__(self) -> str:
        policy = "" if self.dtype != mx.bfloat16 else f", bfloat16={self.bfloat16}"
        return f"{dtypes.name(self.dtype)}, opset {self.opset}{policy}"


SETTINGS = [
    pytest.param(Setting(d, o, p), id=f"{dtypes.name(d)}{'-keep' if p == 'keep' else ''}-op{o}")
    for o in OPSETS
    for d, p in [(mx.float32, "auto"), (mx.float16, "auto"), (mx.bfloat16, "auto"), (mx.bfloat16, "keep")]
]


# -- RMSNorm / LayerNorm ------------------------------------------------------------------
NORM_SHAPE = (2, 3, 16)


def norm_input(rng, dtype):
    x = np.asarray(randn(rng, NORM_SHAPE, mx.float32, 2.0))
    x = x + rng.uniform(-1, 1, size=NORM_SHAPE[:-1] + (1,)).astype(np.float32)
    x[0, 1] = 0.0  # a zero row: the result is 0 * rsqrt(eps)
    return mx.array(x).astype(dtype)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("weight", [True, False], ids=["weight", "no_weight"])
def test_rms_norm(weight, setting: Setting):
    dtype = setting.dtype
    rng = rng_for("rms_norm", weight, dtypes.name(dtype))
    x = norm_input(rng, dtype)
    w = randn(rng, NORM_SHAPE[-1:], dtype) if weight else None
    eps = 1e-5
    expected = mx.fast.rms_norm(x, w, eps)
    passed_w = w if weight else mx.array(1, dtype=dtype)
    ops = check_record("RMSNorm", [eps], [Arg("x", x), Arg("w", passed_w, constant=True)], [expected], setting)
    fused = setting.opset >= 23 and not setting.kept_bfloat16()  # onnxruntime has no bfloat16 RMSNormalization
    assert ("RMSNormalization" in ops) == fused, ops


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("affine", ["weight_bias", "weight", "none"])
def test_layer_norm(affine, setting: Setting):
    dtype = setting.dtype
    rng = rng_for("layer_norm", affine, dtypes.name(dtype))
    x = norm_input(rng, dtype)
    w = randn(rng, NORM_SHAPE[-1:], dtype) if affine != "none" else None
    b = randn(rng, NORM_SHAPE[-1:], dtype) if affine == "weight_bias" else None
    eps = 1e-4
    expected = mx.fast.layer_norm(x, w, b, eps)
    passed_w = w if w is not None else mx.array(1, dtype=dtype)
    passed_b = b if b is not None else mx.array(0, dtype=dtype)
    inputs = [Arg("x", x), Arg("w", passed_w, constant=True), Arg("b", passed_b, constant=True)]
    ops = check_record("LayerNorm", [eps], inputs, [expected], setting)
    assert "LayerNormalization" in ops, ops


def test_layer_norm_weight_as_graph_input():
    """Weights need not be constants (a function taking them as arguments)."""
    rng = rng_for("layer_norm_inputs")
    x, w, b = norm_input(rng, mx.float32), randn(rng, (16,)), randn(rng, (16,))
    check_record(
        "LayerNorm",
        [1e-5],
        [Arg("x", x), Arg("w", w), Arg("b", b)],
        [mx.fast.layer_norm(x, w, b, 1e-5)],
        Setting(mx.float32, 17),
    )


# -- RoPE ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class RopeCase:
    id: str
    shape: tuple[int, ...] = (2, 3, 5, 8)
    dims: int = 8
    traditional: bool = False
    base: float = 10000.0
    scale: float = 1.0
    offset: int | tuple[int, ...] = 3  # a tuple is a per-batch [B] offset
    offset_is_input: bool = False
    offset_dtype: type = np.int32  # MLX casts other widths to int32; uint32 stays
    freqs: bool = False
    forward: bool = True


ROPE_CASES = [
    RopeCase("full"),
    RopeCase("traditional", traditional=True),
    RopeCase("partial", dims=4),
    RopeCase("partial_traditional", dims=4, traditional=True, offset=0),
    RopeCase("batch_offset", offset=(0, 7), offset_is_input=True),
    RopeCase("offset_input", offset=11, offset_is_input=True, traditional=True),
    RopeCase("offset_uint32", offset=(6, 1), offset_is_input=True, offset_dtype=np.uint32),
    RopeCase("freqs", freqs=True, dims=6),
    RopeCase("freqs_traditional_batch", freqs=True, traditional=True, offset=(2, 5), offset_is_input=True),
    RopeCase("scale_base", scale=0.25, base=500.0),
    RopeCase("backward", forward=False, dims=6, offset=(1, 4)),
    RopeCase("backward_traditional_freqs", forward=False, traditional=True, freqs=True),
    RopeCase("rank3", shape=(2, 5, 8), offset=(3, 9)),
    RopeCase("rank5", shape=(1, 2, 2, 4, 8), dims=4),
]


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("case", ROPE_CASES, ids=[c.id for c in ROPE_CASES])
def test_rope(case: RopeCase, setting: Setting):
    dtype = setting.dtype
    rng = rng_for("rope", case.id, dtypes.name(dtype))
    x = randn(rng, case.shape, dtype)
    offset = mx.array(np.asarray(case.offset, dtype=case.offset_dtype))
    freqs = mx.array(rng.uniform(1.0, 50.0, size=case.dims // 2).astype(np.float32)) if case.freqs else None
    base = None if case.freqs else case.base
    inputs = [Arg("x", x), Arg("offset", offset, constant=not case.offset_is_input)]
    if freqs is not None:
        inputs.append(Arg("freqs", freqs, constant=True))

    def rope(a):
        return mx.fast.rope(
            a, case.dims, traditional=case.traditional, base=base, scale=case.scale, offset=offset, freqs=freqs
        )

    if case.forward:
        expected = rope(x)
    else:  # the VJP of the rotation is the inverse rotation MLX records with forward=False
        expected = mx.vjp(rope, [mx.zeros_like(x)], [x])[1][0]
    arguments = [case.dims, case.traditional, 1.0 if case.freqs else case.base, case.scale, case.forward]
    ops = check_record("RoPE", arguments, inputs, [expected], setting)
    assert ("RotaryEmbedding" in ops) == (setting.opset >= 23), ops


# -- ScaledDotProductAttention ------------------------------------------------------------
@dataclass(frozen=True)
class SdpaCase:
    id: str
    batch: int = 2
    q_heads: int = 2
    kv_heads: int = 2
    q_len: int = 4
    k_len: int = 4
    head_dim: int = 8
    v_dim: int | None = None
    scale: float | None = None  # None: 1/sqrt(head_dim)
    mask: str | None = None  # "causal", "bool", "additive", "additive_inf"
    mask_shape: str = "full"  # "full" [B, Hq, Lq, Lk] as MLX records it, or "2d" [Lq, Lk]
    sinks: bool = False
    logsumexp: bool = False

    def fused(self, opset: int) -> bool:  # where onnxruntime's own kernel runs Attention (23, 24 here)
        return (
            kernels.has_kernel("Attention", mx.float32, opset, "T1")
            and not self.sinks
            and not self.logsumexp
            and self.mask in (None, "causal", "bool")
            and not (self.mask == "causal" and self.q_len > self.k_len)
        )


SDPA_CASES = [
    SdpaCase("plain"),
    SdpaCase("scale", scale=0.7, q_len=3, k_len=6),
    SdpaCase("value_dim", v_dim=4, q_len=1, k_len=5),
    SdpaCase("causal_square", mask="causal"),
    SdpaCase("causal_shorter_query", mask="causal", q_len=2, k_len=6),
    SdpaCase("causal_longer_query", mask="causal", q_len=5, k_len=3),
    SdpaCase("bool_mask", mask="bool", q_len=3, k_len=5),
    SdpaCase("additive_mask", mask="additive", q_len=3, k_len=5),
    SdpaCase("additive_inf_mask", mask="additive_inf", q_len=3, k_len=5),
    SdpaCase("gqa", q_heads=4, kv_heads=2),
    SdpaCase("gqa_causal", q_heads=4, kv_heads=1, mask="causal", q_len=3, k_len=5),
    SdpaCase("gqa_bool_mask", q_heads=6, kv_heads=2, mask="bool", q_len=2, k_len=4),
    SdpaCase("gqa_additive_2d_mask", q_heads=4, kv_heads=2, mask="additive", mask_shape="2d", q_len=3, k_len=4),
    SdpaCase("bool_2d_mask", mask="bool", mask_shape="2d", q_len=3, k_len=4),
    SdpaCase("sinks", sinks=True),
    SdpaCase("sinks_gqa_bool_mask", q_heads=4, kv_heads=2, sinks=True, mask="bool", q_len=3, k_len=5),
    SdpaCase("logsumexp", logsumexp=True, mask="causal", q_len=3, k_len=5),
    SdpaCase("logsumexp_gqa_sinks_mask", logsumexp=True, q_heads=4, kv_heads=2, sinks=True, mask="additive"),
    # a fully masked row's logsumexp is the record dtype's finfo.min + log(k_len), also when carried as float32
    SdpaCase("logsumexp_fully_masked_bool", logsumexp=True, mask="bool", q_len=3, k_len=5),
]


def make_mask(rng, case: SdpaCase, dtype):
    shape = (
        (case.batch, case.q_heads, case.q_len, case.k_len) if case.mask_shape == "full" else (case.q_len, case.k_len)
    )
    if case.mask == "bool":
        keep = rng.random(shape) < 0.6
        keep[..., 0, :] = False  # a fully masked query row: MLX gives it a uniform softmax
        return mx.array(keep)
    if case.mask == "additive":
        return mx.array(rng.normal(0, 2, size=shape).astype(np.float32)).astype(dtype)
    if case.mask == "additive_inf":  # CUDA turns bool masks into 0 / -inf additive ones
        bias = np.where(rng.random(shape) < 0.6, 0.0, -np.inf).astype(np.float32)
        bias[..., 1, :] = -np.inf  # a fully masked row: NaN in MLX
        bias[..., 2, :] = 0.0
        return mx.array(bias).astype(dtype)
    return None


def sdpa_record_io(q, k, v, scale, mask, sinks, causal, logsumexp, dtype):
    """(expected outputs, record inputs, output dtypes) of a ScaledDotProductAttention
    record, the reference computed with mx.fast here."""
    expected = [
        mx.fast.scaled_dot_product_attention(q, k, v, scale=scale, mask="causal" if causal else mask, sinks=sinks)
    ]
    inputs = [Arg("q", q), Arg("k", k), Arg("v", v)]
    if mask is not None:
        inputs.append(Arg("mask", mask))
    if sinks is not None:
        inputs.append(Arg("sinks", sinks, constant=True))
    out_dtypes = [dtype]
    if logsumexp:
        expected.append(reference_logsumexp(q, k, scale, mask, sinks, causal))
        out_dtypes.append(mx.float32)
    return expected, inputs, out_dtypes


def reference_logsumexp(q, k, scale, mask, sinks, causal):
    """The natural-log logsumexp of each score row, in float32, from q and k."""
    repeats = q.shape[1] // k.shape[1]
    q32, k32 = q.astype(mx.float32), mx.repeat(k.astype(mx.float32), repeats, axis=1)
    scores = scale * (q32 @ mx.swapaxes(k32, -1, -2))
    if causal:
        q_len, k_len = q.shape[2], k.shape[2]
        keep = mx.arange(k_len - q_len, k_len)[:, None] >= mx.arange(k_len)[None]
        scores = mx.where(keep, scores, mx.finfo(q.dtype).min)
    elif mask is not None:
        scores = (
            mx.where(mask, scores, mx.finfo(q.dtype).min)
            if mask.dtype == mx.bool_
            else scores + mask.astype(mx.float32)
        )
    if sinks is not None:
        column = mx.broadcast_to(sinks.astype(mx.float32)[None, :, None, None], scores.shape[:-1] + (1,))
        scores = mx.concatenate([column, scores], axis=-1)
    return mx.logsumexp(scores, axis=-1, keepdims=True)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("case", SDPA_CASES, ids=[c.id for c in SDPA_CASES])
def test_scaled_dot_product_attention(case: SdpaCase, setting: Setting):
    dtype = setting.dtype
    rng = rng_for("sdpa", case.id, dtypes.name(dtype))
    v_dim = case.v_dim or case.head_dim
    q = randn(rng, (case.batch, case.q_heads, case.q_len, case.head_dim), dtype)
    k = randn(rng, (case.batch, case.kv_heads, case.k_len, case.head_dim), dtype)
    v = randn(rng, (case.batch, case.kv_heads, case.k_len, v_dim), dtype)
    scale = case.scale if case.scale is not None else 1.0 / np.sqrt(case.head_dim)
    scale = float(np.float32(scale))  # the record holds the float32 state, widened
    mask = make_mask(rng, case, dtype)
    sinks = randn(rng, (case.q_heads,), dtype, 1.5) if case.sinks else None
    causal = case.mask == "causal"
    expected, inputs, out_dtypes = sdpa_record_io(q, k, v, scale, mask, sinks, causal, case.logsumexp, dtype)
    arguments = [scale, causal, case.sinks, case.logsumexp, False]
    tolerances = {"float32": (2e-4, 2e-4)} if case.logsumexp else None
    ops = check_record("ScaledDotProductAttention", arguments, inputs, expected, setting, out_dtypes, tolerances)
    assert ("Attention" in ops) == case.fused(setting.opset), ops


def test_sdpa_refuses_causal_with_array_mask():
    rng = rng_for("sdpa_refuse")
    q, k, v = (randn(rng, (1, 2, 3, 8)) for _ in range(3))
    mask = mx.array(rng.random((1, 2, 3, 3)) < 0.5)
    trace, _ = record_trace(
        "ScaledDotProductAttention",
        [0.35, True, False, False, False],
        [Arg("q", q), Arg("k", k), Arg("v", v), Arg("mask", mask)],
        [((1, 2, 3, 8), mx.float32)],
    )
    with pytest.raises(mlx2onnx.Mlx2OnnxError, match="do_causal"):
        mlx2onnx.Exporter(opset=23).trace_to_ir(trace)


# -- edge values ----------------------------------------------------------------------------
EDGE_SETTINGS = [p for p in SETTINGS if p.values[0].bfloat16 == "keep" or p.values[0].dtype != mx.bfloat16]


@pytest.mark.parametrize("setting", EDGE_SETTINGS)
def test_edge_values(setting: Setting):
    """NaN, +-inf, -0.0, tiny and huge values planted into the data of every primitive
    (attention on its fused and its decomposed paths)."""
    dtype = setting.dtype
    rng = rng_for("edges", str(setting))
    x = with_edges(rng, randn(rng, NORM_SHAPE, dtype), 0.1)
    w, b = randn(rng, (16,), dtype), randn(rng, (16,), dtype)
    check_record("RMSNorm", [1e-5], [Arg("x", x), Arg("w", w, True)], [mx.fast.rms_norm(x, w, 1e-5)], setting)
    check_record(
        "LayerNorm",
        [1e-5],
        [Arg("x", x), Arg("w", w, True), Arg("b", b, True)],
        [mx.fast.layer_norm(x, w, b, 1e-5)],
        setting,
    )
    xr = with_edges(rng, randn(rng, (2, 2, 4, 8), dtype), 0.1)
    offset = mx.array([5, 3000], dtype=mx.int32)  # large positions too
    check_record(
        "RoPE",
        [8, False, 10000.0, 1.0, True],
        [Arg("x", xr), Arg("offset", offset)],
        [mx.fast.rope(xr, 8, traditional=False, base=10000.0, scale=1.0, offset=offset)],
        setting,
    )
    q = with_edges(rng, randn(rng, (1, 2, 3, 8), dtype), 0.05)
    k, v = randn(rng, (1, 2, 4, 8), dtype), with_edges(rng, randn(rng, (1, 2, 4, 8), dtype), 0.05)
    # (a masked +inf score is the one corner where the fused Attention differs, see below)
    variants = [(False, None), (True, randn(rng, (2,), dtype))] + ([(True, None)] if setting.opset < 23 else [])
    for causal, sinks in variants:
        inputs = [Arg("q", q), Arg("k", k), Arg("v", v)] + ([Arg("sinks", sinks, True)] if sinks is not None else [])
        expected = mx.fast.scaled_dot_product_attention(
            q, k, v, scale=0.35, mask="causal" if causal else None, sinks=sinks
        )
        check_record(
            "ScaledDotProductAttention", [0.35, causal, sinks is not None, False, False], inputs, [expected], setting
        )


INF_MASKED_REASON = (
    "onnxruntime's Attention applies masks as an additive bias, so a masked key whose score is +inf "
    "(an infinite query or key) still takes part; MLX replaces masked scores by finfo.min"
)


@pytest.mark.parametrize(
    "opset",
    [
        pytest.param(o, marks=pytest.mark.xfail(strict=True, reason=INF_MASKED_REASON))
        if kernels.has_kernel("Attention", mx.float32, o, "T1")
        else o
        for o in (28, 24, 23, 17)
    ],
)
@pytest.mark.parametrize("mask", ["bool", "causal", "causal_square"])
def test_sdpa_masked_infinite_scores(mask, opset):
    """Query 0 is all -inf: against an all-negative key it scores +inf, against the others
    -inf. Where that +inf key is masked, MLX's fallback ignores it (query 0 then gets the
    uniform softmax of its finfo.min scores); the fused Attention does not (documented)."""
    rng = rng_for("sdpa_inf_masked", mask)
    q_len, k_len = (3, 3) if mask == "causal_square" else (2, 3)
    q = np.asarray(randn(rng, (1, 1, q_len, 4)))
    q[0, 0, 0] = -np.inf
    k = np.abs(np.asarray(randn(rng, (1, 1, k_len, 4)))) + 0.1
    k[0, 0, -1] *= -1  # the last key scores +inf for query 0; query 0 never sees it causally
    q, k, v = mx.array(q), mx.array(k), randn(rng, (1, 1, k_len, 4))
    inputs = [Arg("q", q), Arg("k", k), Arg("v", v)]
    if mask == "bool":
        array = mx.array(np.array([[[[True, True, False], [True, False, True]]]]))
        inputs.append(Arg("mask", array))
    else:
        array = "causal"
    expected = mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask=array)
    arguments = [0.5, mask != "bool", False, False, False]
    check_record("ScaledDotProductAttention", arguments, inputs, [expected], Setting(mx.float32, opset))
