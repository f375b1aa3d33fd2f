"""Optimisation passes: each keeps parity and does what it says."""

from __future__ import annotations

import collections
import math

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mlx.utils import tree_flatten

import mlx2onnx
from mlx2onnx.models import example
from mlx2onnx.translate import kernels
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from tests.support.harness import rand, rng_for, run_onnx, with_edges


def ops(model):
    return collections.Counter(n.op_type for n in model.graph.node)


@pytest.mark.parametrize("opset", sorted({default_opset(), MIN_OPSET}))
@pytest.mark.parametrize("name", ["llama", "encoder", "mlp"])
def test_passes_keep_parity_and_shrink_the_graph(name, opset):
    model, args, kwargs = example(name)
    primitives = len(mlx2onnx.capture(model, args, kwargs).primitives)
    raw = mlx2onnx.Exporter(opset=opset, optimize=False).export(model, *args, **kwargs)
    lean = mlx2onnx.Exporter(opset=opset).export(model, *args, **kwargs)
    onnx.checker.check_model(lean, full_check=True)
    assert len(raw.graph.node) >= 0.9 * primitives  # about one node per primitive before
    assert len(lean.graph.node) < len(raw.graph.node)
    if name != "mlp" and opset >= 23:
        assert len(lean.graph.node) <= primitives / 2, (len(lean.graph.node), primitives)
    for proto in (raw, lean):
        report = mlx2onnx.verify(proto, model, *args, **kwargs)
        assert report.passed and report.outputs[0].max_abs_error < 1e-4, str(report)


def test_redundant_broadcasts_are_dropped():
    rng = rng_for("passes.broadcast")
    bias = rand(rng, (5,))

    def fun(x, y):
        return (x + bias) * y[:, :1]

    x, y = rand(rng, (3, 5)), rand(rng, (3, 5))
    raw = mlx2onnx.Exporter(optimize=False).export(fun, x, y)
    lean = mlx2onnx.export(fun, x, y)
    assert ops(raw)["Expand"] >= 2 and ops(lean)["Expand"] == 0
    assert mlx2onnx.verify(lean, fun, x, y)


def test_broadcasts_of_matmul_batch_dims_are_dropped():
    """Grouped-query attention expands the key/value heads to the query groups; MatMul
    broadcasts batch dims itself, so the Expand goes. An Expand of the matrix dims, or
    one whose batch broadcast the other operand does not reach, stays."""
    rng = rng_for("passes.matmul_broadcast")

    def grouped(q, k):  # q [2, 3, 5, 4] grouped by k's 2 heads
        return q @ mx.broadcast_to(k[:, None], (2, 3, 4, 6))

    def matrix_dims(a, b):  # b's columns are broadcast: not MatMul's own broadcasting
        return a @ mx.broadcast_to(b, (4, 6))

    def wider_batch(a, b):  # the Expand makes the result's batch larger than a's
        return a @ mx.broadcast_to(b, (3, 4, 6))

    cases = [
        (grouped, (rand(rng, (2, 3, 5, 4)), rand(rng, (2, 4, 6))), 0),
        (matrix_dims, (rand(rng, (5, 4)), rand(rng, (4, 1))), 1),
        (wider_batch, (rand(rng, (5, 4)), rand(rng, (1, 4, 6))), 1),
    ]
    for fun, args, expands in cases:
        raw = mlx2onnx.Exporter(optimize=False).export(fun, *args)
        lean = mlx2onnx.export(fun, *args)
        onnx.checker.check_model(lean, full_check=True)
        assert ops(raw)["Expand"] >= 1 and ops(lean)["Expand"] == expands, (fun.__name__, ops(lean))
        assert mlx2onnx.verify(lean, fun, *args), fun.__name__


def test_small_shared_tables_are_folded():
    """RoPE's angle table is read by Cos and Sin: both fold to constants."""
    rng = rng_for("passes.rope_table")
    angles = mx.arange(16, dtype=mx.float32).reshape(4, 4) * 0.1

    def rotate(x):
        return x * mx.cos(angles) + x[..., ::-1] * mx.sin(angles)

    x = rand(rng, (2, 4, 4))
    lean = mlx2onnx.export(rotate, x)
    assert ops(lean)["Cos"] == 0 and ops(lean)["Sin"] == 0, ops(lean)
    assert mlx2onnx.verify(lean, rotate, x)


def test_only_exact_no_ops_are_removed():
    """x * 1, x / 1, x - 0.0 and x + -0.0 are x bit for bit and go; x + 1e-12 is not x
    (onnxscript's no-op rules match constants within a tolerance), nor is x + 0.0 where
    x is -0.0; a module weight of ones stays (its values are the parameter's, not fixed)."""
    rng = rng_for("passes.no_ops")
    x = with_edges(rng, rand(rng, (4, 8)), 0.3)  # -0.0 among the edge values
    x = mx.concatenate([x, mx.full((1, 8), -0.0)])
    kept = {
        "tiny_add": lambda x: x + 1e-12,
        "plus_zero": lambda x: x + 0.0,
        "minus_negative_zero": lambda x: x - (-0.0),
    }
    gone = {
        "times_one": lambda x: mx.abs(x) * 1.0,
        "over_one": lambda x: mx.floor(x) / 1.0,
        "minus_zero": lambda x: mx.negative(x) - 0.0,
        "plus_negative_zero": lambda x: mx.negative(x) + (-0.0),
    }
    for name, fun in {**kept, **gone}.items():
        lean = mlx2onnx.export(fun, x)
        arithmetic = sum(ops(lean)[op] for op in ("Add", "Sub", "Mul", "Div"))
        assert (arithmetic == 0) == (name in gone), (name, ops(lean))
        got, want = run_onnx(lean, x), np.array(fun(x))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))

    layer = nn.LayerNorm(8, eps=1e-12)  # weight of ones, bias of zeros: both stay parameters
    mx.eval(layer.parameters())
    constant_rows = mx.concatenate([mx.ones((2, 8)), x])  # var = 0: 1 / sqrt(0 + 1e-12), not 1 / 0
    lean = mlx2onnx.export(layer, constant_rows)
    assert ops(lean)["LayerNormalization"] == 1 and {"weight", "bias"} <= {i.name for i in lean.graph.initializer}
    np.testing.assert_allclose(run_onnx(lean, constant_rows), np.array(layer(constant_rows)), rtol=1e-5, atol=1e-5)


def test_casts_that_round_twice_are_not_merged():
    """float64 -> float32 -> float16 rounds twice in MLX; one Cast to float16 would round
    once (the * 1 between them keeps MLX from merging the casts itself; the export drops it)."""
    x = mx.array(np.array([1 + 2.0**-11 + 2.0**-40, 3.14159, -2.5e-5]), dtype=mx.float64)

    def twice(x):
        return (x.astype(mx.float32) * 1.0).astype(mx.float16)

    lean = mlx2onnx.export(twice, x)
    assert ops(lean)["Cast"] == 2, ops(lean)
    np.testing.assert_array_equal(run_onnx(lean, x), np.array(twice(x)))


def test_weight_transposes_are_folded_into_named_initializers():
    """A Linear layer (2-D product) becomes Gemm(transB=1) of the weight as MLX holds it:
    no Transpose runs and none is made when writing."""
    layer = nn.Linear(8, 4, bias=False)
    mx.eval(layer.parameters())
    x = rand(rng_for("passes.transpose"), (5, 8))
    lean = mlx2onnx.export(layer, x)
    onnx.checker.check_model(lean, full_check=True)
    assert ops(lean)["Transpose"] == 0 and ops(lean)["Gemm"] == 1, ops(lean)
    (weight,) = [i for i in lean.graph.initializer if i.name == "weight"]
    assert list(weight.dims) == [4, 8]
    assert mlx2onnx.verify(lean, layer, x)


def test_batched_product_with_a_transposed_constant_folds_it():
    """x @ w.T with a 3-D x stays MatMul, of a transposed initializer (no runtime Transpose;
    the transposed copy is made as the weights are written)."""
    rng = rng_for("passes.batched_transpose")
    w = rand(rng, (4, 8))

    def fun(x):
        return x @ w.T

    x = rand(rng, (2, 3, 8))
    lean = mlx2onnx.export(fun, x)
    onnx.checker.check_model(lean, full_check=True)
    assert [n.op_type for n in lean.graph.node] == ["MatMul"]
    assert [list(i.dims) for i in lean.graph.initializer] == [[8, 4]]
    assert mlx2onnx.verify(lean, fun, x)


@pytest.mark.parametrize("bfloat16", ["keep", "float32"])
def test_bfloat16_linear_weights_are_written_untransposed(bfloat16):
    layer = nn.Linear(128, 96)  # above the constant-folding limit: the weight stays bfloat16 when kept
    layer.set_dtype(mx.bfloat16)
    mx.eval(layer.parameters())
    x = rand(rng_for("passes.bf16_gemm"), (3, 128)).astype(mx.bfloat16)
    lean = mlx2onnx.Exporter(bfloat16=bfloat16).export(layer, x)
    onnx.checker.check_model(lean, full_check=True)
    assert ops(lean)["Gemm"] == 1 and ops(lean)["Transpose"] == 0, ops(lean)
    (weight,) = [i for i in lean.graph.initializer if i.name == "weight"]
    assert list(weight.dims) == [96, 128]
    assert mlx2onnx.verify(lean, layer, x)


def test_tied_embeddings_are_not_duplicated():
    model, args, kwargs = example("llama")  # the head reuses embed_tokens.weight
    lean = mlx2onnx.export(model, *args, **kwargs)
    stored = sum(np.prod(i.dims) * 4 for i in lean.graph.initializer if i.data_type == onnx.TensorProto.FLOAT)
    params = sum(v.nbytes for _, v in tree_flatten(model.parameters()))
    assert stored <= params * 1.01


GELUS = {
    "erf": (nn.gelu, {"Gelu": 1, "Greater": 1, "Where": 1}),  # x * (1 + erf) overflows above FLT_MAX / 2
    "erf_halved_first": (lambda x: 0.5 * x * (1 + mx.erf(x * 0.7071067811865476)), {"Gelu": 1}),
    "tanh": (nn.gelu_approx, {"Gelu": 1}),
    "module": (nn.GELU(), {"Gelu": 1, "Greater": 1, "Where": 1}),
}


@pytest.mark.parametrize("name", sorted(GELUS))
def test_gelu_is_fused_exactly(name):
    fun, want = GELUS[name]
    rng = rng_for("passes.gelu", name)
    huge = mx.array([3e38, 1.8e38, 1.7e38, -3e38, -1e30, 1e30], mx.float32)
    x = mx.concatenate([huge, with_edges(rng, rand(rng, (200,), lo=-12, hi=12)).reshape(-1)]).reshape(2, 103)
    lean = mlx2onnx.Exporter(opset=23).export(fun, x)
    onnx.checker.check_model(lean, full_check=True)
    assert dict(ops(lean)) == want, ops(lean)
    got = run_onnx(lean, x)
    np.testing.assert_allclose(got, np.array(fun(x)), rtol=1e-5, atol=1e-6)  # inf, NaN in the same places
    assert mlx2onnx.verify(lean, fun, x)
    assert "Gelu" not in ops(mlx2onnx.Exporter(opset=17).export(fun, x))  # Gelu is opset 20


def test_gelu_lookalikes_are_left_alone():
    def wrong_constant(x):
        return x * (1 + mx.erf(x / 2)) / 2

    def not_halved(x):
        return x * (1 + mx.erf(x / math.sqrt(2)))

    def cube_of_another(x, y):
        return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * y**3)))

    rng = rng_for("passes.gelu_lookalikes")
    x, y = rand(rng, (3, 8)), rand(rng, (3, 8))
    for fun, args in ((wrong_constant, (x,)), (not_halved, (x,)), (cube_of_another, (x, y))):
        lean = mlx2onnx.Exporter(opset=23).export(fun, *args)
        assert "Gelu" not in ops(lean), fun.__name__
        assert mlx2onnx.verify(lean, fun, *args), fun.__name__


ATTENTION = {  # name: (q heads, kv heads, q len, k len, mask, fused)
    "plain": (2, 2, 4, 4, None, True),
    "grouped": (4, 2, 3, 5, None, True),
    "causal": (4, 2, 5, 5, "causal", True),
    "causal_shorter_query": (4, 1, 2, 6, "causal", True),
    "bool": (2, 2, 3, 5, "bool", True),
    "grouped_bool": (6, 2, 3, 4, "bool", True),
    "grouped_bool_one_head": (4, 2, 3, 4, "bool_one_head", True),
    "bool_2d": (4, 2, 3, 4, "bool_2d", True),
    "constant_bool": (4, 2, 3, 4, "constant_bool", True),
    "additive": (4, 2, 3, 4, "additive", False),  # an all -inf row: NaN in MLX, zeros in onnxruntime
    "sinks": (4, 2, 3, 4, "sinks", False),
}


def _attention_function(name, rng):
    heads, kv_heads, q_len, k_len, mask, _ = ATTENTION[name]
    q, k = rand(rng, (2, heads, q_len, 8)), rand(rng, (2, kv_heads, k_len, 8))
    v = with_edges(rng, rand(rng, (2, kv_heads, k_len, 6)), 0.05)
    shapes = {
        "bool": (2, heads, q_len, k_len),
        "grouped_bool_one_head": (2, 1, q_len, k_len),
        "bool_2d": (q_len, k_len),
        "constant_bool": (2, heads, q_len, k_len),
    }
    args, extra = [q, k, v], {}
    if mask in shapes:
        keep = rng.random(shapes[mask]) < 0.6
        keep[..., 0, :] = False  # a fully masked row: a uniform softmax in MLX
        if mask == "constant_bool":
            extra["mask"] = mx.array(keep)
        else:
            args.append(mx.array(keep))
    elif mask == "additive":
        args.append(mx.array(np.where(rng.random((q_len, k_len)) < 0.6, 0.0, -np.inf).astype(np.float32)))
    elif mask == "causal":
        extra["mask"] = "causal"
    elif mask == "sinks":
        extra["sinks"] = rand(rng, (heads,))

    def attend(q, k, v, *masks):
        return mx.fast.scaled_dot_product_attention(
            q, k, v, scale=0.3, mask=masks[0] if masks else extra.get("mask"), sinks=extra.get("sinks")
        )

    return attend, args


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention_is_fused_where_onnxruntime_runs_it_exactly(name):
    """MLX's CPU attention fallback becomes Attention (opsets 23-24) for no mask, causal and
    bool masks, grouped-query heads included; additive masks and sinks keep the chain."""
    attend, args = _attention_function(name, rng_for("passes.attention", name))
    for opset in (23, 24, default_opset()):
        # onnxruntime 1.32 runs its own kernel for Attention 23 and 24; a model of opset 25+
        # (Attention 25) would run the op's ONNX function body, a slower graph of small ops
        fused = ATTENTION[name][-1] and kernels.has_kernel("Attention", mx.float32, opset, "T1")
        lean = mlx2onnx.Exporter(opset=opset).export(attend, *args)
        onnx.checker.check_model(lean, full_check=True)
        assert (ops(lean)["Attention"] == 1) == fused, (opset, ops(lean))
        if fused:
            assert ops(lean)["Softmax"] == ops(lean)["MatMul"] == 0, ops(lean)
        np.testing.assert_allclose(run_onnx(lean, *args), np.array(attend(*args)), rtol=1e-5, atol=1e-6)
        assert mlx2onnx.verify(lean, attend, *args)
    assert ops(mlx2onnx.Exporter(opset=17).export(attend, *args))["Attention"] == 0


@pytest.mark.slow
@settings(max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.integers(1, 2),
    kv_heads=st.integers(1, 3),
    groups=st.integers(1, 3),
    q_len=st.integers(1, 6),
    k_len=st.integers(1, 6),
    head=st.sampled_from([2, 4, 8]),
    mask=st.sampled_from([None, "causal", "full", "2d", "heads"]),
    rope=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_random_attention_and_rope_chains_agree(batch, kv_heads, groups, q_len, k_len, head, mask, rope, seed):
    """Random shapes, head groupings and masks through the fused ops (opset 24) and the
    chain (the default opset), against MLX."""
    rng = np.random.default_rng(seed)
    heads = kv_heads * groups
    q, k, v = (
        mx.array(rng.normal(size=s).astype(np.float32))
        for s in ((batch, heads, q_len, head), (batch, kv_heads, k_len, head), (batch, kv_heads, k_len, head))
    )
    shapes = {"full": (batch, heads, q_len, k_len), "2d": (q_len, k_len), "heads": (batch, 1, q_len, k_len)}
    args = [q, k, v] + ([mx.array(rng.random(shapes[mask]) < 0.7)] if mask in shapes else [])
    offset = int(rng.integers(0, 9))

    def attend(q, k, v, *masks):
        if rope:
            q = mx.fast.rope(q, head, traditional=False, base=10000.0, scale=1.0, offset=offset + k_len - q_len)
            k = mx.fast.rope(k, head, traditional=False, base=10000.0, scale=1.0, offset=offset)
        chosen = masks[0] if masks else ("causal" if mask == "causal" else None)
        return mx.fast.scaled_dot_product_attention(q, k, v, scale=float(head) ** -0.5, mask=chosen)

    want = np.array(attend(*args))
    for opset in (24, default_opset()):
        lean = mlx2onnx.Exporter(opset=opset).export(attend, *args)
        onnx.checker.check_model(lean, full_check=True)
        if opset == 24:  # a one-position rope at position 0 multiplies by cos 0 = 1: that Mul goes, no rope left
            ropes = rope * sum(
                not (steps == 1 and start == 0) for steps, start in ((q_len, offset + k_len - q_len), (k_len, offset))
            )
            assert ops(lean)["Attention"] == 1 and ops(lean)["RotaryEmbedding"] == ropes, ops(lean)
        np.testing.assert_allclose(run_onnx(lean, *args), want, rtol=1e-4, atol=1e-5)


def test_attention_lookalikes_are_left_alone():
    """Softmax over the wrong axis, and a product with a key that is not transposed."""
    rng = rng_for("passes.attention_lookalikes")
    q, k, v = rand(rng, (1, 2, 4, 4)), rand(rng, (1, 2, 4, 4)), rand(rng, (1, 2, 4, 4))

    def wrong_axis(q, k, v):
        return mx.softmax(q @ k.swapaxes(-1, -2), axis=-2) @ v

    def untransposed(q, k, v):
        return mx.softmax(q @ k, axis=-1) @ v

    for fun in (wrong_axis, untransposed):
        lean = mlx2onnx.Exporter(opset=23).export(fun, q, k, v)
        assert ops(lean)["Attention"] == 0, fun.__name__
        assert mlx2onnx.verify(lean, fun, q, k, v), fun.__name__


ROPES = {  # name: (dims, traditional, offset, fused)
    "full": (8, False, 3, True),
    "partial": (4, False, 0, True),
    "runtime_offset": (8, False, "array", True),
    "batch_offsets": (8, False, "batch", True),
    "freqs": (8, False, "freqs", True),
    "traditional": (8, True, 2, False),  # the interleaved layout is not matched
}


@pytest.mark.parametrize("name", sorted(ROPES))
def test_rotary_embedding_is_fused(name):
    """MLX's CPU rope (half-split pairs) becomes RotaryEmbedding (opset 23): constant
    angle tables, tables computed at run time from an offset input, per-batch offsets."""
    dims, traditional, offset, fused = ROPES[name]
    rng = rng_for("passes.rope", name)
    x = with_edges(rng, rand(rng, (2, 3, 5, 8)), 0.05)
    args = [x]
    if offset in ("array", "batch"):
        args.append(mx.array(rng.integers(0, 50, size=() if offset == "array" else (2,)).astype(np.int32)))
    freqs = mx.array(rng.uniform(1, 100, size=(dims // 2,)).astype(np.float32)) if offset == "freqs" else None

    def rope(x, *offsets):
        start = offsets[0] if offsets else (offset if isinstance(offset, int) else 0)
        base = None if freqs is not None else 10000.0
        return mx.fast.rope(x, dims, traditional=traditional, base=base, scale=1.0, offset=start, freqs=freqs)

    for opset in (23, default_opset()):
        lean = mlx2onnx.Exporter(opset=opset).export(rope, *args)
        onnx.checker.check_model(lean, full_check=True)
        assert (ops(lean)["RotaryEmbedding"] == 1) == fused, ops(lean)
        if fused:  # the rotation's products are gone (a Mul may remain making the angles)
            assert ops(lean)["Sub"] == 0 and ops(lean)["Mul"] <= 1 and ops(lean)["Split"] == 0, ops(lean)
        np.testing.assert_allclose(run_onnx(lean, *args), np.array(rope(*args)), rtol=1e-5, atol=1e-5)
        assert mlx2onnx.verify(lean, rope, *args)
    assert ops(mlx2onnx.Exporter(opset=17).export(rope, *args))["RotaryEmbedding"] == 0


def test_a_rotation_by_one_angle_row_at_every_position_is_fused():
    """Tables of one row broadcast over the positions: read at position 0 throughout."""
    rng = rng_for("passes.rope_one_row")
    x = rand(rng, (2, 3, 5, 8))
    theta = rand(rng, (4,))

    def rotate(x):
        x1, x2 = x[..., :4], x[..., 4:]
        return mx.concatenate(
            [x1 * mx.cos(theta) - x2 * mx.sin(theta), x1 * mx.sin(theta) + x2 * mx.cos(theta)], axis=-1
        )

    lean = mlx2onnx.Exporter(opset=24).export(rotate, x)
    assert ops(lean)["RotaryEmbedding"] == 1, ops(lean)
    np.testing.assert_allclose(run_onnx(lean, x), np.array(rotate(x)), rtol=1e-5, atol=1e-6)


def test_rotation_lookalikes_are_left_alone():
    """A rotation whose two products swap sin and cos, and one whose tables differ per head."""
    rng = rng_for("passes.rope_lookalikes")
    x = rand(rng, (1, 2, 4, 8))
    cos, sin = mx.cos(rand(rng, (4, 4))), mx.sin(rand(rng, (4, 4)))
    per_head = mx.cos(rand(rng, (2, 4, 4)))

    def swapped(x):
        x1, x2 = x[..., :4], x[..., 4:]
        return mx.concatenate([x1 * cos - x2 * sin, x1 * cos + x2 * sin], axis=-1)

    def head_tables(x):
        x1, x2 = x[..., :4], x[..., 4:]
        return mx.concatenate([x1 * per_head - x2 * sin, x1 * sin + x2 * per_head], axis=-1)

    for fun in (swapped, head_tables):
        lean = mlx2onnx.Exporter(opset=23).export(fun, x)
        assert ops(lean)["RotaryEmbedding"] == 0, fun.__name__
        assert mlx2onnx.verify(lean, fun, x), fun.__name__


def test_norms_are_fused_where_the_opset_has_them():
    llama, args, _ = example("llama")
    assert ops(mlx2onnx.Exporter(opset=23).export(llama, *args))["RMSNormalization"] == 5
    assert ops(mlx2onnx.Exporter(opset=22).export(llama, *args))["RMSNormalization"] == 0
    encoder, args, kwargs = example("encoder")
    fused = mlx2onnx.Exporter(opset=MIN_OPSET).export(encoder, *args, **kwargs)
    assert ops(fused)["LayerNormalization"] == 5
    assert mlx2onnx.verify(fused, encoder, *args, **kwargs)


@pytest.mark.parametrize("dims, weight", [(16, True), (16, False)])
def test_rms_norm_fusion_with_and_without_weight(dims, weight):
    rng = rng_for("passes.rms", dims, weight)
    w = rand(rng, (dims,)) if weight else None

    def fun(x):
        return mx.fast.rms_norm(x, w, 1e-5)

    x = rand(rng, (3, dims))
    lean = mlx2onnx.Exporter(opset=23).export(fun, x)
    assert ops(lean)["RMSNormalization"] == 1
    assert mlx2onnx.verify(lean, fun, x)


def test_similar_looking_chains_are_left_alone():
    def almost_rms(x):  # mean over the first axis, not the last: not an RMSNorm
        return x * mx.rsqrt(mx.mean(x * x, axis=0, keepdims=True) + 1e-5)

    x = rand(rng_for("passes.almost"), (4, 6))
    lean = mlx2onnx.Exporter(opset=23).export(almost_rms, x)
    assert ops(lean)["RMSNormalization"] == 0
    assert mlx2onnx.verify(lean, almost_rms, x)


def test_passes_can_be_turned_off():
    model, args, kwargs = example("mlp")
    raw = mlx2onnx.Exporter(optimize=False).export(model, *args, **kwargs)
    assert "mlx2onnx.passes" not in {p.key for p in raw.metadata_props}
    assert ops(raw)["Expand"] > 0


def test_zero_sign_repairs_are_dropped_where_no_consumer_sees_the_sign():
    """A Select's sign-of-zero repair (op_mappings/elementwise.py, select_value) is bypassed
    before a Softmax (an attention mask) and kept before a Divide and at a graph output."""
    rng = rng_for("passes.zero_sign")
    c, x = mx.array(rng.random((3, 5)) < 0.5), rand(rng, (3, 5))

    def masked_softmax(c, x):
        return mx.softmax(mx.where(c, x, -1e9), axis=-1)

    def reciprocal_and_output(c, x):
        y = mx.where(c, x, -x)
        return 1 / y, y

    lean = mlx2onnx.export(masked_softmax, c, x)
    assert ops(lean)["Where"] == 1 and ops(lean)["Mul"] == 0, ops(lean)
    assert mlx2onnx.verify(lean, masked_softmax, c, x)
    kept = mlx2onnx.export(reciprocal_and_output, c, x)
    repairs = [n for n in kept.graph.node if any(p.key == "mlx2onnx.zero_sign_repair" for p in n.metadata_props)]
    assert len(repairs) == 1 and ops(kept)["Where"] >= 3, ops(kept)
    assert mlx2onnx.verify(kept, reciprocal_and_output, c, x)


# -- conv nets: NCHW inside, pools fused, BatchNorm folded ----------------------------------
from tests.translate.test_convnets import ConvBNReLU, TinyMobileNet, TinyResNet, randomise  # noqa: E402


def _export_checked(fn, *args, opset=None):
    proto = mlx2onnx.Exporter(opset=opset).export(fn, *args)
    onnx.checker.check_model(proto, full_check=True)
    report = mlx2onnx.Verifier(random_inputs=False).verify(proto, fn, *args)
    assert report.passed, str(report)
    return proto


@pytest.mark.parametrize("opset", sorted({default_opset(), MIN_OPSET}))
def test_conv_net_keeps_nchw_inside(opset):
    """Stem conv + BN + relu, a -inf padded max pool, residual blocks, global mean: one
    Transpose at the input is all that is left of the 2 per convolution."""
    model = randomise(TinyResNet(), 10)
    x = mx.random.normal((2, 16, 16, 3), key=mx.random.key(11))
    raw = mlx2onnx.Exporter(opset=opset, optimize=False).export(model, x)
    lean = _export_checked(model, x, opset=opset)
    convs = ops(raw)["Conv"]
    assert ops(raw)["Transpose"] >= 2 * convs
    assert ops(lean)["Transpose"] == 1, ops(lean)
    assert ops(lean)["Conv"] == convs and ops(lean)["MaxPool"] == 2, ops(lean)  # the pool and its NaN mask
    assert ops(lean)["Sub"] == ops(lean)["Gather"] == ops(lean)["Pad"] == ops(lean)["Max"] == 0, ops(lean)
    assert ops(lean)["Mul"] <= 1  # the mean's 1/N; BatchNorm's scales are in the Conv weights
    assert mlx2onnx.verify(lean, model, x)  # fresh random inputs as well


def test_mobilenet_keeps_nchw_inside():
    model = randomise(TinyMobileNet(), 12)
    x = mx.random.normal((1, 16, 16, 3), key=mx.random.key(13))
    lean = _export_checked(model, x)
    assert ops(lean)["Transpose"] == 1, ops(lean)
    assert mlx2onnx.verify(lean, model, x)


def test_relu_is_one_relu_only_where_no_negative_zero_reaches_it():
    """MLX's relu(-0.0) is +0.0, onnxruntime's Relu(-0.0) -0.0: a relu after a bias add
    (never -0.0) is one Relu, a relu of an input keeps the handler's tie-breaking Where;
    both give MLX's signed zeros."""
    x = mx.array([[-0.0, 0.0, -1.5, 2.0, float("nan")]])
    bias = mx.array([0.5, -0.25, 0.0, 1.0, 2.0])
    after_bias = _export_checked(lambda v: 1 / nn.relu(v + bias), x)
    assert ops(after_bias)["Relu"] == 1 and ops(after_bias)["Where"] == 0, ops(after_bias)
    raw = _export_checked(lambda v: 1 / nn.relu(v), x)
    assert ops(raw)["Relu"] == 0 and ops(raw)["Where"] == 1 and ops(raw)["Max"] == 1, ops(raw)
    negative_zero_bias = _export_checked(lambda v: 1 / nn.relu(v + mx.array(-0.0)), x)
    assert ops(negative_zero_bias)["Relu"] == 0, ops(negative_zero_bias)


def test_batchnorm_and_relu_fold_into_the_conv():
    block = randomise(ConvBNReLU(3, 5), 14)
    x = mx.random.normal((2, 6, 6, 3), key=mx.random.key(15))
    lean = _export_checked(block, x)
    assert [n.op_type for n in lean.graph.node] == ["Transpose", "Conv", "Relu", "Transpose"]


POOLS = [
    ("max2d_padded", nn.MaxPool2d(3, stride=2, padding=1), (2, 9, 8, 3), "MaxPool"),
    ("max2d_blocks", nn.MaxPool2d(2), (1, 8, 6, 4), "MaxPool"),
    ("max1d", nn.MaxPool1d(3, stride=2), (2, 11, 3), "MaxPool"),
    ("max1d_blocks", nn.MaxPool1d(2), (2, 10, 3), "MaxPool"),  # one spatial axis: no Transpose
    ("avg1d_blocks", nn.AvgPool1d(3), (1, 12, 2), "AveragePool"),
    ("avg2d_padded", nn.AvgPool2d(3, stride=1, padding=1), (1, 6, 7, 2), "AveragePool"),
    ("avg2d_blocks", nn.AvgPool2d(2), (2, 6, 4, 3), "AveragePool"),
    ("avg3d", nn.AvgPool3d(2, stride=1), (1, 3, 4, 4, 2), "AveragePool"),
]


@pytest.mark.parametrize("name, pool, shape, op_type", POOLS, ids=[p[0] for p in POOLS])
def test_pools_are_fused_exactly(name, pool, shape, op_type):
    """NaN, +-inf and -0.0 planted: MLX's max propagates NaN, and so does the export."""
    rng = rng_for("passes.pool", name)
    x = with_edges(rng, rand(rng, shape))
    lean = _export_checked(pool, x)
    assert ops(lean)[op_type] >= 1 and ops(lean)["Gather"] == 0, ops(lean)
    assert ops(lean)["ReduceMax"] == ops(lean)["ReduceSum"] == 0, ops(lean)
    assert mlx2onnx.verify(lean, pool, x)


def test_lookalike_pools_are_left_alone():
    """A max pool over zero padding is not MaxPool (whose padding never wins)."""
    pool = nn.MaxPool2d(3, stride=2)

    def zero_padded(x):
        return pool(mx.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)]))

    x = rand(rng_for("passes.zero_pool"), (1, 7, 7, 2)) - 3.0  # mostly negative: the zeros matter
    lean = _export_checked(zero_padded, x)
    assert ops(lean)["MaxPool"] == 0
    assert mlx2onnx.verify(lean, zero_padded, x)


def test_transposes_that_cannot_cancel_stay():
    """A conv output concatenated with the NHWC input keeps its Transpose (and parity)."""
    conv = randomise(nn.Conv2d(3, 4, 3, padding=1), 16)

    def fun(x):
        return mx.concatenate([nn.relu(conv(x)) * 2.0, x], axis=-1)

    x = mx.random.normal((1, 5, 5, 3), key=mx.random.key(17))
    lean = _export_checked(fun, x)
    assert ops(lean)["Transpose"] == 2, ops(lean)


def test_two_halves_of_the_last_axis_become_one_split():
    """x[..., :n/2] and x[..., n/2:] (rotary embeddings): one Split, found through the
    uses of x (onnxscript's own rule scans the graph for every Slice: quadratic)."""
    rng = rng_for("passes.halves")
    x = rand(rng, (2, 3, 8))

    def rotate_half(x):
        return mx.concatenate([-x[..., 4:], x[..., :4]], axis=-1) * 2.0

    for opset in sorted({default_opset(), MIN_OPSET}):
        lean = mlx2onnx.Exporter(opset=opset).export(rotate_half, x)
        onnx.checker.check_model(lean, full_check=True)
        assert ops(lean)["Split"] == 1 and ops(lean)["Slice"] == 0, ops(lean)
        assert mlx2onnx.verify(lean, rotate_half, x)


class _SiLUNet(nn.Module):
    """Conv -> SiLU -> squeeze-excite -> Conv: x * sigmoid(x) (with MLX's -88 cut-off) is a
    diamond, x used by the Sigmoid, the comparison and the product."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.se = nn.Conv2d(6, 6, 1)
        self.conv2 = nn.Conv2d(6, 4, 3, padding=1)

    def __call__(self, x):
        h = nn.silu(self.conv1(x))
        h = h * mx.sigmoid(self.se(mx.mean(h, axis=(1, 2), keepdims=True)))
        return self.conv2(h)


def test_transposes_sink_through_diamonds():
    model = randomise(_SiLUNet(), 18)
    x = mx.random.normal((2, 8, 8, 3), key=mx.random.key(19))
    raw = mlx2onnx.Exporter(optimize=False).export(model, x)
    lean = _export_checked(model, x)
    assert ops(raw)["Transpose"] >= 6
    assert ops(lean)["Transpose"] == 2, ops(lean)  # at the input and the output
    assert mlx2onnx.verify(lean, model, x)


class _SqueezeExcite(nn.Module):
    """Conv -> squeeze-excite -> Conv, the spatial mean taken as mlx-image's
    ``AdaptiveAvgPool2d(1)`` takes it: reshaped to (B, 1, H, 1, W, C), then averaged over
    axes 2 and 4; then fc1, ReLU, fc2, sigmoid and the product with the features. fc1 and
    fc2 are 1x1 convolutions (as in mlx-image) or Linear layers."""

    def __init__(self, fc, c=6):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        if fc == "conv":
            self.fc1, self.fc2 = nn.Conv2d(c, 3, 1), nn.Conv2d(3, c, 1)
        else:
            self.fc1, self.fc2 = nn.Linear(c, 3), nn.Linear(3, c)
        self.conv2 = nn.Conv2d(c, 4, 3, padding=1)

    def __call__(self, x):
        h = nn.relu(self.conv1(x))
        b, height, width, c = h.shape
        pooled = mx.mean(h.reshape(b, 1, height, 1, width, c), axis=(2, 4))
        h = h * mx.sigmoid(self.fc2(nn.relu(self.fc1(pooled))))
        return self.conv2(h)


@pytest.mark.parametrize("fc", ["conv", "linear"])
@pytest.mark.parametrize("batch", [1, 2])
def test_transposes_sink_through_squeeze_excite_reshapes(batch, fc):
    """The Transpose before the (B, 1, H, 1, W, C) Reshape moves past it (as one to
    (B, C, 1, H, 1, W)), past the mean, and cancels with the one before fc1."""
    model = randomise(_SqueezeExcite(fc), 20)
    x = mx.random.normal((batch, 8, 6, 3), key=mx.random.key(21))
    raw = mlx2onnx.Exporter(optimize=False).export(model, x)
    lean = _export_checked(model, x)
    assert ops(raw)["Transpose"] >= 4 and ops(raw)["Reshape"] >= 1
    assert ops(lean)["Transpose"] == 2, ops(lean)  # at the input and the output
    assert mlx2onnx.verify(lean, model, x)


def test_transposes_sink_through_a_mean_read_back():
    """h * mean(h, axis=(1, 2), keepdims=True) between two convs: the mean (N, 1, 1, C),
    not yet moved when the product is, is re-laid out by a Reshape to (N, C, 1, 1), which
    goes once the mean has moved too: no Transpose inside, no Reshape left."""
    conv1, conv2 = randomise(nn.Conv2d(3, 4, 3, padding=1), 27), randomise(nn.Conv2d(4, 2, 3, padding=1), 28)

    def fun(x):
        h = conv1(x)
        return conv2(h * mx.mean(h, axis=(1, 2), keepdims=True))

    x = mx.random.normal((2, 5, 5, 3), key=mx.random.key(29))
    lean = _export_checked(fun, x)
    assert ops(lean)["Transpose"] == 2 and ops(lean)["Reshape"] == 0, ops(lean)
    assert mlx2onnx.verify(lean, fun, x)


def test_reshapes_interleaving_channels_with_space_keep_their_transpose():
    """(B, H, W, C) -> (B, H, 2W, C/2) mixes channels into the width: no channels-first
    Reshape does that, so the Transpose stays before it (and parity holds)."""
    conv1, conv2 = randomise(nn.Conv2d(3, 6, 3, padding=1), 22), randomise(nn.Conv2d(3, 4, 3, padding=1), 23)

    def fun(x):
        h = nn.relu(conv1(x))
        b, height, width, c = h.shape
        return conv2(h.reshape(b, height, 2 * width, c // 2))

    x = mx.random.normal((2, 5, 4, 3), key=mx.random.key(24))
    lean = _export_checked(fun, x)
    reshape = next(n for n in lean.graph.node if n.op_type == "Reshape")
    before = {o: n.op_type for n in lean.graph.node for o in n.output}
    assert before[reshape.input[0]] == "Transpose", [n.op_type for n in lean.graph.node]
    assert ops(lean)["Transpose"] == 4, ops(lean)
    assert mlx2onnx.verify(lean, fun, x)


def test_products_with_a_row_and_channel_input_keep_their_transpose():
    """conv(x) * y with y of shape (1, H, 1, C), a graph input: as (1, C, H, 1) it would
    need a real Transpose (H and C swap), not a Reshape, so the product stays NHWC."""
    conv1, conv2 = randomise(nn.Conv2d(3, 4, 3, padding=1), 30), randomise(nn.Conv2d(4, 2, 3, padding=1), 31)

    def fun(x, y):
        return conv2(conv1(x) * y)

    x = mx.random.normal((2, 5, 5, 3), key=mx.random.key(32))
    y = mx.random.normal((1, 5, 1, 4), key=mx.random.key(33))
    lean = _export_checked(fun, x, y)
    assert ops(lean)["Transpose"] == 4 and ops(lean)["Reshape"] == 0, ops(lean)
    assert mlx2onnx.verify(lean, fun, x, y)


def test_reshapes_moved_before_a_transpose_are_exact():
    """Every Reshape of transpose(x, perm) the pass would move (random shapes with size-1
    axes, splits, merges, inserted and dropped size-1 axes) equals the moved form on x."""
    from mlx2onnx.passes.permutes import reshape_before

    rng = rng_for("passes.reshape_before")
    moved = 0
    for _ in range(500):
        x = rng.standard_normal(tuple(int(d) for d in rng.choice([1, 1, 2, 3, 4, 6], rng.integers(1, 5))))
        perm = [int(p) for p in rng.permutation(x.ndim)]
        y = np.transpose(x, perm)
        dims = list(y.shape)
        for step in rng.integers(0, 4, rng.integers(0, 4)):
            if step == 0:
                dims.insert(int(rng.integers(0, len(dims) + 1)), 1)
            elif step == 1 and len(dims) > 1:
                i = int(rng.integers(0, len(dims) - 1))
                dims[i : i + 2] = [dims[i] * dims[i + 1]]
            elif step == 2 and dims and (factors := [f for f in range(2, dims[-1]) if dims[-1] % f == 0]):
                dims[-1:] = [factors[0], dims[-1] // factors[0]]
            elif step == 3 and 1 in dims:
                dims.remove(1)
        found = reshape_before(y.shape, tuple(dims), perm)
        if found is not None:
            shape, after = found
            np.testing.assert_array_equal(np.transpose(x.reshape(shape), after), y.reshape(dims))
            moved += 1
    assert moved > 300  # most random reshapes keep their groups in order
    assert reshape_before((2, 4, 4, 6), (2, 4, 8, 3), [0, 2, 3, 1]) is None  # width and channels mixed
    assert reshape_before((2, 4, 4, 6), (2, 96), [0, 2, 3, 1]) is None  # NHWC flattening


def test_a_transpose_read_by_two_ops_is_not_doubled():
    """A conv output read by two elementwise ops, each a graph output: moving the
    Transpose past both would leave two, so it stays (one at the input, one here)."""
    conv = randomise(nn.Conv2d(3, 4, 3, padding=1), 25)

    def fun(x):
        h = conv(x)
        return h * 2.0, h + 1.0

    x = mx.random.normal((2, 5, 5, 3), key=mx.random.key(26))
    raw = mlx2onnx.Exporter(optimize=False).export(fun, x)
    lean = _export_checked(fun, x)
    assert ops(lean)["Transpose"] == 2 <= ops(raw)["Transpose"], ops(lean)
    assert mlx2onnx.verify(lean, fun, x)


def test_a_transpose_read_by_two_reshaped_outputs_stays_for_them():
    """A conv output read by the next conv and by two Reshapes the Transpose could move
    through (a 2x2 mean pool, a max over H*W), each to a graph output: the pair around the
    convs cancels and one Transpose stays for both Reshapes (not one after each)."""
    conv1, conv2 = randomise(nn.Conv2d(3, 4, 3, padding=1), 34), randomise(nn.Conv2d(4, 2, 1), 35)

    def fun(x):
        h = conv1(x)
        b, height, width, c = h.shape
        pooled = mx.mean(h.reshape(b, 2, height // 2, 2, width // 2, c), axis=(2, 4))
        return conv2(h), pooled, h.reshape(b, height * width, c).max(axis=1)

    x = mx.random.normal((2, 4, 4, 3), key=mx.random.key(36))
    lean = _export_checked(fun, x)
    assert ops(lean)["Transpose"] == 3, ops(lean)
    assert mlx2onnx.verify(lean, fun, x)


def test_reshape_matmul_reshape_with_misaligned_batch_axes():
    """onnxscript's Reshape-MatMul-Reshape collapse is guarded: applied to a Linear over
    flattened rows (the llama keeps its node count), refused where the batch axes would be
    paired differently (einsum "bhwc,hkc->bhwk" with b == h, SAM's relative positions)."""
    r_q, rel = mx.random.normal((3, 3, 4, 8)), mx.random.normal((3, 5, 8))

    def fun(a, b):
        return mx.einsum("bhwc,hkc->bhwk", a, b)

    proto = mlx2onnx.export(fun, r_q, rel)
    assert mlx2onnx.verify(proto, fun, r_q, rel)
    x, w = mx.random.normal((2, 5, 16)), mx.random.normal((16, 8))

    def rows(a, b):
        return (a.reshape(-1, 16) @ b).reshape(2, 5, 8)

    lean = mlx2onnx.export(rows, x, w)
    assert [n.op_type for n in lean.graph.node] == ["MatMul"]
    assert mlx2onnx.verify(lean, rows, x, w)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 8])
def test_fields_of_gathered_packed_rows_are_cut_from_their_bytes(bits):
    """A quantized embedding's rows: MLX's CPU dequantization cuts each code out of its
    uint32 word with a shift pair; the portable export reads the codes from the bytes, so
    no uint32 at or above 2^31 is formed (OpenVINO misreads those), and still matches MLX."""
    import json

    from mlx2onnx.verify.runtimes import registry

    rng = rng_for(f"fields-{bits}")
    table = nn.QuantizedEmbedding.from_embedding(nn.Embedding(64, 128), group_size=32, bits=bits)
    table.weight = mx.array(rng.integers(0, 2**32, table.weight.shape, dtype=np.uint32))  # every bit pattern
    table.scales = mx.ones_like(table.scales)  # the outputs are the codes themselves: compared exactly
    table.biases = mx.zeros_like(table.biases)
    ids = mx.array(rng.integers(0, 64, (3, 5)).astype(np.int32))
    model = mlx2onnx.export(table, ids)
    onnx.checker.check_model(model, full_check=True)
    rewrites = json.loads(next(p.value for p in model.metadata_props if p.key == "mlx2onnx.passes"))
    assert rewrites["fields_from_bytes"] > 0
    fresh = mx.array(rng.integers(0, 64, (3, 5)).astype(np.int32))
    for runtime in ("onnxruntime", "openvino"):
        runner = registry.open_runtime(runtime, model.SerializeToString())
        for tokens in (ids, fresh):
            got = runner.run({model.graph.input[0].name: np.array(tokens)}, [model.graph.output[0].name])[0]
            np.testing.assert_array_equal(got, np.array(table(tokens)), err_msg=runtime)
