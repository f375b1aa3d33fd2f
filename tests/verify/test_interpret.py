"""The record interpreter reproduces each function's real MLX output, record by record.

Every case traces a small function, evaluates the trace with ``interpret.run`` on fresh
random inputs and compares with calling the function itself (bit-exact unless a case
says otherwise). ``test_every_evaluator_is_exercised`` requires each primitive the
interpreter claims to evaluate to appear in some traced case or hand-built record.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import pytest

from mlx2onnx import capture
from mlx2onnx.capture import records
from mlx2onnx.models import REFERENCE_MODELS
from mlx2onnx.verify import interpret
from tests.support.harness import Arg, record_trace

rng = np.random.default_rng(0)


def randn(*shape, dtype=mx.float32):
    return mx.array(rng.standard_normal(shape).astype(np.float32)).astype(dtype)


def randint(lo, hi, *shape, dtype=mx.int32):
    return mx.array(rng.integers(lo, hi, size=shape)).astype(dtype)


def positive(*shape):
    return mx.array(rng.uniform(0.1, 2.0, size=shape).astype(np.float32))


def unit(*shape):
    return mx.array(rng.uniform(-0.9, 0.9, size=shape).astype(np.float32))


def spd(n):
    a = rng.standard_normal((n, n)).astype(np.float32)
    return mx.array(a @ a.T + n * np.eye(n, dtype=np.float32))


# (id, function, input maker, atol). atol 0 means bit-exact.
CASES = [
    (
        "unary",
        lambda x: [
            mx.abs(x),
            -x,
            mx.sign(x),
            mx.floor(x),
            mx.ceil(x),
            mx.round(x),
            mx.square(x),
            mx.exp(x),
            mx.expm1(x),
            mx.sin(x),
            mx.cos(x),
            mx.tan(x),
            mx.sinh(x),
            mx.cosh(x),
            mx.tanh(x),
            mx.sigmoid(x),
            mx.erf(x),
            mx.arctan(x),
            mx.arcsinh(x),
        ],
        lambda: (randn(3, 4),),
        0,
    ),
    (
        "unary_domain",
        lambda p, u: [
            mx.sqrt(p),
            mx.rsqrt(p),
            mx.log(p),
            mx.log2(p),
            mx.log10(p),
            mx.log1p(p),
            mx.arcsin(u),
            mx.arccos(u),
            mx.arctanh(u),
            mx.erfinv(u),
            mx.arccosh(p + 1),
        ],
        lambda: (positive(3, 4), unit(3, 4)),
        0,
    ),
    (
        "binary",
        lambda a, b: [
            a + b,
            a - b,
            a * b,
            a / b,
            mx.maximum(a, b),
            mx.minimum(a, b),
            mx.power(mx.abs(a), b),
            mx.arctan2(a, b),
            mx.logaddexp(a, b),
            mx.remainder(a, b),
            a // b,
            a == b,
            a != b,
            a < b,
            a <= b,
            a > b,
            a >= b,
            mx.where(a > b, a, b),
            mx.array_equal(a, a, equal_nan=True),
        ],
        lambda: (randn(3, 4), randn(4)),
        0,
    ),
    (
        "int_ops",
        lambda a, b: [
            a // b,
            a % b,
            *mx.divmod(a, b),
            a & b,
            a | b,
            a ^ b,
            a << 2,
            a >> 1,
            mx.logical_and(a > 0, b > 2),
            mx.logical_or(a > 0, b > 2),
            ~(a > 0),
            a.astype(mx.float16),
        ],
        lambda: (randint(-20, 20, 3, 4), randint(1, 5, 3, 4)),
        0,
    ),
    ("view", lambda x: [x.view(mx.int32), x.view(mx.uint8)], lambda: (randn(3, 4),), 0),
    (
        "reduce",
        lambda x: [
            x.sum(1),
            x.prod(0),
            x.max(1),
            x.min(),
            x.mean(0),
            (x > 0).all(1),
            (x > 0).any(0),
            mx.argmax(x, 1),
            mx.argmin(x, 0),
            mx.logsumexp(x, -1),
            mx.softmax(x, -1),
            mx.softmax(x.astype(mx.float16), -1, precise=True),
            mx.var(x, 1),
        ],
        lambda: (randn(3, 5),),
        0,
    ),
    (
        "scan",
        lambda x: [
            mx.cumsum(x, 1),
            mx.cumprod(x, 0, reverse=True),
            mx.cummax(x, 1, inclusive=False),
            mx.cummin(x, 1),
            mx.cumsum(x > 0, 1),
        ],
        lambda: (randn(3, 5),),
        0,
    ),
    (
        "matmul",
        lambda a, b, c: [a @ b, mx.addmm(c, a, b, alpha=0.5, beta=2.0), mx.outer(a[0], b[:, 0])],
        lambda: (randn(3, 4), randn(4, 5), randn(3, 5)),
        0,
    ),
    ("batched_matmul", lambda a, b: a @ b, lambda: (randn(2, 3, 4), randn(4, 5)), 0),
    (
        "shape",
        lambda x: [
            x.reshape(4, 6),
            x.flatten(),
            mx.expand_dims(x, (0, 2)),
            x[None].squeeze(0),
            x.T,
            mx.concatenate([x, x], 1),
            *mx.split(x, [1, 3], axis=2),
            mx.unflatten(x, 2, (2, 2)),
            mx.broadcast_to(x[:, :1], (2, 3, 4)),
            mx.stack([x, x]),
            mx.tile(x, (1, 2, 1)),
            mx.moveaxis(x, 0, 2),
            mx.flatten(x, 1, 2),
        ],
        lambda: (randn(2, 3, 4),),
        0,
    ),
    (
        "creation",
        lambda x: [
            x + mx.arange(4),
            mx.zeros_like(x) + 1,
            mx.full((2, 4), 3.0) * x[:2],
            mx.eye(3) @ x,
            mx.tri(3, 4) * x,
            mx.arange(0.5, 3.0, 0.5) * 2,
            mx.linspace(0, 1, 4) + x,
        ],
        lambda: (randn(3, 4),),
        0,
    ),
    ("pad", lambda x: [mx.pad(x, [(1, 2), (0, 1)]), mx.pad(x, 1, constant_values=-3.0)], lambda: (randn(3, 4),), 0),
    (
        "slice",
        lambda x: [x[1:, ::2], x[::-1], x[:, -3:-1], x[..., 1], x[None, :, 2], mx.diff(x, axis=1)],
        lambda: (randn(3, 5),),
        0,
    ),
    (
        "slice_update",
        lambda x, u: [
            _assign(x, (slice(1, 3), slice(None, None, 2)), u),
            x.at[1:3, ::2].add(u),
            x.at[0:2, 1:3].multiply(u),
            x.at[1:3, 0:2].maximum(u),
            x.at[0:2, 2:4].minimum(u),
        ],
        lambda: (randn(3, 4), randn(2, 2)),
        0,
    ),
    (
        "dynamic_slice",
        lambda x, u, s: [mx.slice(x, s, [0, 1], (2, 2)), mx.slice_update(x, u, s, [0, 1])],
        lambda: (randn(3, 4), randn(2, 2), mx.array([1, 2], dtype=mx.int32)),
        0,
    ),
    (
        "gather",
        lambda x, i, j: [
            x[i],
            mx.take(x, i, axis=1),
            x[i, j],
            x[-1],
            x[:, i],
            mx.take(x.flatten(), j),
            mx.take_along_axis(x[:3], mx.abs(i)[:, None] % 4, axis=1),
        ],
        lambda: (randn(4, 4), randint(-4, 4, 3), randint(0, 4, 3)),
        0,
    ),
    ("embedding", lambda ids: nn.Embedding(10, 4)(ids) if False else _embed(ids), lambda: (randint(0, 10, 2, 3),), 0),
    (
        "scatter",
        lambda x, i, u: [_assign(x, i, u), x.at[i].add(u), x.at[i].maximum(u), x.at[i].multiply(u), x.at[i].minimum(u)],
        lambda: (randn(5, 4), mx.array([0, 3, 1], dtype=mx.int32), randn(3, 4)),
        0,
    ),
    (
        "scatter_axis",
        lambda x, i, u: [mx.put_along_axis(x, i, u, axis=1)],
        lambda: (randn(3, 4), randint(0, 4, 3, 1), randn(3, 1)),
        0,
    ),
    ("masked_scatter", lambda x, m, v: _assign(x, m, v), lambda: (randn(3, 4), randn(3, 4) > 0, randn(12)), 0),
    (
        "sort",
        lambda x: [mx.sort(x, 1), mx.argsort(x, 0), mx.partition(x, 2, 1), mx.argpartition(x, 1, 0), mx.topk(x, 2, 1)],
        lambda: (randn(4, 5),),
        0,
    ),
    (
        "searchsorted",
        lambda s, v: [mx.searchsorted(s, v), mx.searchsorted(s, v, side="right")],
        lambda: (mx.sort(randn(10)), randn(4)),
        0,
    ),
    (
        "conv",
        lambda x, w1, w2, wt: [
            mx.conv1d(x, w1, stride=2, padding=1),
            mx.conv1d(x, w2, dilation=2, groups=2, padding=2),
            mx.conv_transpose1d(x, wt, stride=2, padding=1, output_padding=1),
            mx.conv_general(x, w1, padding=([1], [2]), input_dilation=2, flip=True),
        ],
        lambda: (randn(1, 10, 4), randn(6, 3, 4), randn(6, 3, 2), randn(5, 3, 4)),
        1e-6,
    ),
    (
        "conv2d",
        lambda x, w: mx.conv2d(x, w, stride=(2, 1), padding=1),
        lambda: (randn(1, 6, 6, 3), randn(4, 3, 3, 3)),
        1e-6,
    ),
    ("as_strided", lambda x: nn.MaxPool2d(3, 2, 1)(x), lambda: (randn(1, 6, 6, 2),), 0),
    (
        "fft",
        lambda x: [
            mx.abs(mx.fft.fft(x)),
            mx.real(mx.fft.rfft(x)),
            mx.imag(mx.fft.ifft(x + 0j)),
            mx.fft.irfft(mx.fft.rfft(x), n=5),
            mx.real(mx.conj(mx.fft.fft2(x))),
        ],
        lambda: (randn(3, 5),),
        0,
    ),
    (
        "linalg",
        lambda a: [
            *mx.linalg.qr(a, stream=mx.cpu),
            mx.linalg.inv(a, stream=mx.cpu),
            mx.linalg.cholesky(a, stream=mx.cpu),
            mx.linalg.svd(a, compute_uv=False, stream=mx.cpu),
            mx.linalg.eigvalsh(a, stream=mx.cpu),
            mx.linalg.tri_inv(mx.triu(a), upper=True, stream=mx.cpu),
            mx.abs(mx.linalg.eigvals(a, stream=mx.cpu)),
        ],
        lambda: (spd(4),),
        0,
    ),
    ("quantized", lambda x, w: _quantized(x, w), lambda: (randn(2, 64), randn(32, 64)), 0),
    (
        "gather_mm",
        lambda a, b, i, j: mx.gather_mm(a, b, i, j),
        lambda: (randn(2, 3, 4), randn(5, 4, 6), mx.array([0, 1], dtype=mx.uint32), mx.array([4, 2], dtype=mx.uint32)),
        0,
    ),
    ("hadamard", lambda x: mx.hadamard_transform(x, scale=0.5), lambda: (randn(2, 8),), 0),
    (
        "block_masked_mm",
        lambda a, b, m: mx.block_masked_mm(a, b, 32, m),
        lambda: (randn(64, 64), randn(64, 64), mx.array([[True, False], [False, True]])),
        0,
    ),
    ("depends", lambda a, b: mx.depends([a * 2], [b])[0] + 1, lambda: (randn(3), randn(3)), 0),
    (
        "nn_layers",
        lambda x: [
            nn.LayerNorm(4)(x),
            nn.RMSNorm(4)(x),
            nn.gelu_approx(x),
            nn.silu(x),
            nn.softplus(x),
            nn.RoPE(4)(x[None]),
            nn.log_softmax(x),
        ],
        lambda: (randn(3, 4),),
        0,
    ),
    (
        "attention",
        lambda q, k, v: mx.fast.scaled_dot_product_attention(q, k, v, scale=0.5, mask="causal"),
        lambda: (randn(1, 4, 3, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8)),
        0,
    ),
]


def _assign(x, index, value):
    y = mx.array(x)
    y[index] = value
    return y


_EMBED = nn.Embedding(10, 4)
mx.eval(_EMBED.parameters())


def _embed(ids):
    return _EMBED(ids)


def _quantized(x, w):
    wq, scales, biases = mx.quantize(w, group_size=32, bits=4)
    experts = mx.stack([wq, wq[::-1]]), mx.stack([scales, scales]), mx.stack([biases, biases])
    which = mx.array([1, 0], dtype=mx.uint32)
    return [
        mx.quantized_matmul(x, wq, scales, biases, group_size=32, bits=4),
        mx.dequantize(wq, scales, biases, group_size=32, bits=4),
        mx.gather_qmm(x[:, None], *experts, rhs_indices=which, group_size=32, bits=4),
    ]


def _check_decoding(trace):
    """The argument tables name every position of every real record, no more, no less."""
    for rec in trace.primitives:
        fields = records.FIELDS.get(rec.name)
        assert fields is not None, f"records.FIELDS has no entry for {rec.name}"
        assert len(rec.arguments) <= len(fields), f"{rec.name} {list(rec.arguments)} has more values than {fields}"
        assert not records.missing_fields(rec.name, rec.arguments), f"{rec.name} {list(rec.arguments)}"


def _as_list(result):
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _compare(got, want, atol, label):
    assert len(got) == len(want), label
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (
            f"{label} output {k}: {g.shape}/{g.dtype} vs {w.shape}/{w.dtype}"
        )
        if w.dtype == mx.complex64:
            g, w = mx.concatenate([mx.real(g), mx.imag(g)]), mx.concatenate([mx.real(w), mx.imag(w)])
        a = np.array(g.astype(mx.float32) if w.dtype == mx.bfloat16 else g)
        b = np.array(w.astype(mx.float32) if w.dtype == mx.bfloat16 else w)
        if atol == 0:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), f"{label} output {k} differs"
        else:
            np.testing.assert_allclose(a, b, atol=atol, rtol=atol, err_msg=f"{label} output {k}")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_interpreter_matches_function(case):
    label, fun, make, atol = case
    inputs = make()
    trace = capture(fun, inputs, {})
    _check_decoding(trace)
    got = interpret.run(trace, *inputs)
    want = _as_list(fun(*inputs))
    mx.eval(want)
    _compare(got, want, atol, label)


@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_interpreter_matches_reference_model(name):
    model, args, kwargs = REFERENCE_MODELS[name](seed=3)
    trace = capture(model, args, kwargs)
    _check_decoding(trace)
    want = _as_list(model(*args, **kwargs))
    mx.eval(want)
    _compare(interpret.run(trace, *args, **kwargs), want, 0, name)


def test_interpreter_feeds_keyword_inputs_by_name():
    def fun(x, *, scale, shift):
        return x * scale - shift

    x, scale, shift = randn(3), randn(3), randn(3)
    trace = capture(fun, (x,), {"shift": shift, "scale": scale})
    (got,) = interpret.run(trace, x, shift=shift, scale=scale)
    assert np.array_equal(np.array(got), np.array(x * scale - shift))


def _record(name, arguments, inputs, outputs):
    trace, _ = record_trace(name, arguments, [Arg(f"x{k}", a) for k, a in enumerate(inputs)], outputs)
    return trace.primitives[0]


# Records the CPU never traces (fused mx.fast primitives appear only on a GPU stream,
# NumberOfElements and BroadcastAxes only in shapeless exports): built by hand from
# docs/records.md and checked against the op MLX itself runs.
def _hand_built_records():
    x, w, b = randn(2, 3, 8), randn(8), randn(8)
    cases = [
        (_record("RMSNorm", [1e-5], [x, w], [(x.shape, x.dtype)]), [x, w], mx.fast.rms_norm(x, w, 1e-5)),
        (_record("LayerNorm", [1e-5], [x, w, b], [(x.shape, x.dtype)]), [x, w, b], mx.fast.layer_norm(x, w, b, 1e-5)),
        (
            _record("LayerNorm", [1e-5], [x, mx.array(1.0), mx.array(0.0)], [(x.shape, x.dtype)]),
            [x, mx.array(1.0), mx.array(0.0)],
            mx.fast.layer_norm(x, None, None, 1e-5),
        ),
    ]
    offset = mx.array(2, dtype=mx.int32)
    q = randn(1, 2, 4, 8)
    cases.append(
        (
            _record("RoPE", [8, False, 10000.0, 1.0, True], [q, offset], [(q.shape, q.dtype)]),
            [q, offset],
            mx.fast.rope(q, 8, traditional=False, base=10000.0, scale=1.0, offset=2),
        )
    )
    k, v = randn(1, 2, 6, 8), randn(1, 2, 6, 8)
    cases.append(
        (
            _record("ScaledDotProductAttention", [0.25, True, False, False, False], [q, k, v], [(q.shape, q.dtype)]),
            [q, k, v],
            mx.fast.scaled_dot_product_attention(q, k, v, scale=0.25, mask="causal"),
        )
    )
    y = randn(3, 4)
    cases.append((_record("NumberOfElements", [[1], True, mx.float32], [y], [((), mx.float32)]), [y], mx.array(0.25)))
    a5, b5 = randn(2, 1, 5, 8), randn(1, 3, 8, 6)
    cases.append(
        (
            _record("BroadcastAxes", [[-2, -1]], [a5, b5], [((2, 3, 5, 8), mx.float32)]),
            [a5, b5],
            mx.broadcast_to(a5, (2, 3, 5, 8)),
        )
    )
    for name in ("Copy", "StopGradient"):
        cases.append((_record(name, [], [y], [(y.shape, y.dtype)]), [y], y))
    return cases


def test_fast_primitive_records():
    for rec, inputs, want in _hand_built_records():
        (got,) = interpret.evaluate(rec, inputs)
        _compare([got], [want], 1e-6, rec.name)


def _hand_built_gradient_records():
    """The fused backward norms a GPU records for mx.grad, against mx.vjp computed here."""
    x, w, b, g = randn(2, 3, 8), randn(8), randn(8), randn(2, 3, 8)
    _, rms = mx.vjp(lambda x, w: [mx.fast.rms_norm(x, w, 1e-5)], [x, w], [g])
    _, ln = mx.vjp(lambda x: [mx.fast.layer_norm(x, None, b, 1e-5)], [x], [g])
    one = mx.array(1.0)
    return [
        (_record("RMSNormVJP", [1e-5], [x, w, g], [(x.shape, x.dtype), (w.shape, w.dtype)]), [x, w, g], rms),
        (
            _record("LayerNormVJP", [1e-5], [x, one, b, g], [(x.shape, x.dtype), ((), mx.float32), (b.shape, b.dtype)]),
            [x, one, b, g],
            [ln[0], mx.zeros(()), g.sum(axis=(0, 1))],
        ),
    ]


def test_fused_gradient_records():
    for rec, inputs, want in _hand_built_gradient_records():
        _compare(interpret.evaluate(rec, inputs), want, 1e-5, rec.name)


def test_unknown_records_are_refused_with_a_reason():
    rec = _record("RandomBits", [(2, 2), 4], [mx.array([0, 1], dtype=mx.uint32)], [((2, 2), mx.uint32)])
    with pytest.raises(interpret.CannotEvaluate, match="threefry"):
        interpret.evaluate(rec, [mx.array([0, 1], dtype=mx.uint32)])
    with pytest.raises(interpret.CannotEvaluate, match="no MLX evaluator"):
        interpret.evaluate(_record("Frobnicate", [], [], [((), mx.float32)]), [])


def test_decoding_tables_cover_the_registry_and_the_interpreter():
    from mlx2onnx.capture import records
    from mlx2onnx.translate import registry

    names = (
        set(records.CALLBACK_PRIMITIVES)
        | set(registry.handlers())
        | set(registry.refusals())
        | set(interpret.EVALUATORS)
        | set(interpret.SKIPPED)
    )
    assert not sorted(names - set(records.FIELDS))


def test_every_evaluator_is_exercised():
    """Every evaluator meets a record in the cases above (traced here again, on its own, so
    the check does not depend on which tests ran before it in this process)."""
    traced = {rec.name for rec, _, _ in _hand_built_records() + _hand_built_gradient_records()}
    for _label, fun, make, _atol in CASES:
        traced.update(capture(fun, make(), {}).primitive_counts())
    for name in REFERENCE_MODELS:
        model, args, kwargs = REFERENCE_MODELS[name](seed=3)
        traced.update(capture(model, args, kwargs).primitive_counts())
    untested = sorted(set(interpret.EVALUATORS) - traced)
    assert not untested, f"evaluators without a test case: {untested}"
