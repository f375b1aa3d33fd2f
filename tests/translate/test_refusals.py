"""Refused primitives and complex graph boundaries fail loudly, before anything is written."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

import mlx2onnx
from mlx2onnx.errors import ConversionError, UnsupportedPrimitiveError
from mlx2onnx.translate import registry


def _matrix(n=3, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    return mx.array(a @ a.T + n * np.eye(n, dtype=np.float32))


REFUSED = [
    ("Inverse", lambda a: mx.linalg.inv(a, stream=mx.cpu) + 1),
    ("Cholesky", lambda a: mx.linalg.cholesky(a, stream=mx.cpu) * 2),
    ("QRF", lambda a: mx.linalg.qr(a, stream=mx.cpu)[1]),
    ("SVD", lambda a: mx.linalg.svd(a, compute_uv=False, stream=mx.cpu)),
    ("Eigh", lambda a: mx.linalg.eigvalsh(a, stream=mx.cpu)),
]


@pytest.mark.parametrize("name, fn", REFUSED, ids=[n for n, _ in REFUSED])
def test_refused_primitive_names_itself_and_writes_nothing(tmp_path, name, fn):
    path = tmp_path / "refused.onnx"
    with pytest.raises(UnsupportedPrimitiveError) as info:
        mlx2onnx.Exporter(path=path).export(fn, _matrix())
    message = str(info.value)
    assert name in info.value.refused
    assert registry.refusal(name).reason in message and registry.refusal(name).advice in message
    assert f"{name} (x" in message
    assert not path.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "fn, what",
    [
        (lambda x: mx.fft.rfft(x), "graph output"),
        (lambda x: mx.fft.fft(x), "graph output"),
    ],
)
def test_complex_graph_outputs_are_refused(tmp_path, fn, what):
    path = tmp_path / "complex.onnx"
    x = mx.array(np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(ConversionError, match=f"{what} .* is complex64"):
        mlx2onnx.Exporter(path=path).export(fn, x)
    assert not path.exists() and list(tmp_path.iterdir()) == []


def test_complex_graph_inputs_are_refused(tmp_path):
    path = tmp_path / "complex.onnx"
    z = mx.array(np.array([1 + 2j, 3 - 1j], dtype=np.complex64))
    with pytest.raises(ConversionError, match="graph input .* is complex64"):
        mlx2onnx.Exporter(path=path).export(lambda z: mx.abs(z), z)
    assert not path.exists()


def test_complex_value_in_an_unsupported_primitive_is_refused():
    x = mx.array(np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32))
    with pytest.raises(ConversionError, match="complex64 values are not supported"):
        mlx2onnx.export(lambda x: mx.real(mx.exp(mx.fft.fft(x))), x)


def test_random_bits_of_other_widths_are_refused():
    from tests.support.harness import Arg, record_trace

    trace, _ = record_trace("RandomBits", [(5,), 1], [Arg("key", mx.random.key(3))], [((5,), mx.uint8)], device="cpu")
    with pytest.raises(ConversionError, match="width=1"):
        mlx2onnx.Exporter().trace_to_ir(trace)


def test_output_whose_producer_mlx_dropped_is_refused_clearly(tmp_path):
    """Found by the fuzzer: ``abs(x) * 2, stop_gradient(abs(x))``: MLX's trace simplification
    merges the two abs and drops the StopGradient, and the second output is left with no
    producer (MLX's own export_function to a file fails too). The error says so and how
    to avoid it, instead of a translator-internal one; computing abs once exports."""
    from mlx2onnx.errors import CaptureError

    x = mx.array(np.array([[1.0, -2.0, 3.0]], np.float32))
    path = tmp_path / "orphan.onnx"
    with pytest.raises(CaptureError, match=r"output 1 has no producer .* Compute the expression once"):
        mlx2onnx.Exporter(path=path).export(lambda a: (mx.abs(a) * 2, mx.stop_gradient(mx.abs(a))), x)
    assert not path.exists()

    def once(a):
        y = mx.abs(a)
        return y * 2, mx.stop_gradient(y)

    model = mlx2onnx.Exporter().export(once, x)
    assert mlx2onnx.Verifier().verify(model, once, x).passed
