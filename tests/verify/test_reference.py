"""The check knows the MLX reference's arithmetic (mlx2onnx/verify/reference.py): the
device, MLX's TF32 setting, and the tolerance they imply, decided from data, so every
claim runs on this CPU. A TF32 reference is emulated bit for bit (inputs rounded to 10
bits of mantissa, as CUDA's TF32 tensor cores and M5's neural accelerators read them)."""

from __future__ import annotations

import mlx.core as mx
import numpy as np
import pytest

import mlx2onnx
from mlx2onnx.errors import CheckOptionError
from mlx2onnx.verify import reference


@pytest.mark.parametrize(
    "environ, tf32",
    [
        ({}, True),
        ({"MLX_ENABLE_TF32": "1"}, True),
        ({"MLX_ENABLE_TF32": "0"}, False),
        ({"MLX_ENABLE_TF32": "2"}, True),
        ({"MLX_ENABLE_TF32": " 1x"}, True),
        ({"MLX_ENABLE_TF32": "off"}, False),
        ({"MLX_ENABLE_TF32": ""}, False),
        ({"MLX_ENABLE_TF32": "-0"}, False),
    ],
)
def test_the_setting_reads_as_mlx_reads_it(environ, tf32):
    """MLX reads MLX_ENABLE_TF32 with C's atoi, default 1: "off" and "" are 0."""
    assert reference.decide("Device(gpu, 0)", "cuda", environ).tf32 is tf32
    assert reference.decide("Device(cpu, 0)", "cpu", environ).tf32 is False


@pytest.mark.parametrize(
    "architecture, macos, tf32",
    [
        ("applegpu_g17s", (26, 2), True),
        ("applegpu_g17g", (26, 3), True),
        ("applegpu_g16s", (26, 2), False),
        ("applegpu_g17s", (26, 1), False),
        ("applegpu_g17p", (26, 2), False),
        ("applegpu_g18p", (27, 0), True),
        ("", (26, 2), False),
        ("applegpu_g15d", (15, 4), False),
    ],
)
def test_metal_uses_tf32_only_on_neural_accelerators(architecture, macos, tf32):
    """M5-class GPUs (generation 17, 18 for 'p' parts) on macOS 26.2 or later."""
    decided = reference.decide("Device(gpu, 0)", "metal", {}, architecture, macos)
    assert decided.tf32 is tf32
    assert [a.precision for a in decided.arithmetic()] == (["tf32"] if tf32 else [])
    assert not reference.decide("Device(gpu, 0)", "metal", {"MLX_ENABLE_TF32": "0"}, architecture, macos).tf32


def test_this_machine_is_read_as_it_is():
    here = reference.current()
    assert here.device == str(mx.default_device())
    assert here.backend == "cpu" and not here.tf32  # (this CPU; on a GPU machine scripts/gpu_check.sh runs)


def _tf32(x: mx.array) -> mx.array:
    """float32 rounded to TF32 (10-bit mantissa, nearest even), kept in float32."""
    bits = x.view(mx.uint32)
    bits = (bits + 0xFFF + ((bits >> 13) & 1)) & 0xFFFFE000
    return bits.view(mx.float32)


def _product(x, w):
    return x @ w


def _product_in_tf32(x, w):
    return _tf32(x) @ _tf32(w)


@pytest.fixture
def operands():
    rng = np.random.default_rng(7)
    return (
        mx.array(rng.standard_normal((16, 1024)).astype(np.float32)),
        mx.array(rng.standard_normal((1024, 32)).astype(np.float32)),
    )


def _on(monkeypatch, decided):
    monkeypatch.setattr(reference, "current", lambda environ=None: decided)


def test_a_tf32_reference_passes_at_tf32s_tolerance_and_says_so(monkeypatch, operands):
    model = mlx2onnx.Exporter().export(_product, *operands)
    verifier = mlx2onnx.Verifier(random_inputs=False)
    assert not verifier.verify(model, _product_in_tf32, *operands).passed  # float32's tolerance: rightly not
    _on(monkeypatch, reference.decide("Device(gpu, 0)", "cuda", {}))
    report = verifier.verify(model, _product_in_tf32, *operands)
    assert report.passed, str(report)
    assert "float32(tf32)" in str(report) and "TF32 on CUDA" in str(report)
    assert report.to_dict()["reference"]["tf32"] is True
    assert report.to_dict()["reference"]["setting"] == "MLX_ENABLE_TF32 not set: MLX's default, 1"


def test_tf32_switched_off_is_compared_at_float32(monkeypatch, operands):
    """MLX_ENABLE_TF32=0 on the GPU: full float32, so a TF32 result would be a real error."""
    model = mlx2onnx.Exporter().export(_product, *operands)
    _on(monkeypatch, reference.decide("Device(gpu, 0)", "cuda", {"MLX_ENABLE_TF32": "0"}))
    verifier = mlx2onnx.Verifier(random_inputs=False)
    report = verifier.verify(model, _product_in_tf32, *operands)
    assert not report.passed and "(tf32)" not in str(report)
    assert verifier.verify(model, _product, *operands).passed


def test_a_full_float32_reference_runs_on_the_cpu_stream(monkeypatch, operands):
    model = mlx2onnx.Exporter().export(_product, *operands)
    _on(monkeypatch, reference.decide("Device(gpu, 0)", "cuda", {}))
    verifier = mlx2onnx.Verifier(random_inputs=False, reference="float32")
    report = verifier.verify(model, _product, *operands)
    assert report.passed and "(tf32)" not in str(report)
    assert "full float32 reference asked for: MLX ran on its CPU stream" in str(report)
    assert report.to_dict()["reference"]["device"] == "Device(cpu, 0)"
    assert not verifier.verify(model, _product_in_tf32, *operands).passed  # compared at float32 now


def test_an_unknown_reference_is_refused():
    with pytest.raises(CheckOptionError, match="'device'.*'float32'"):
        mlx2onnx.Verifier(reference="tf32")


def test_the_cli_takes_the_reference(tmp_path, capsys):
    from mlx2onnx.cli.app import main

    assert main(["export", "mlp", "-o", str(tmp_path / "m.onnx"), "--check", "--reference", "float32", "-q"]) == 0
    assert main(["check", str(tmp_path / "m.onnx"), "mlp", "--reference", "float32", "--json"]) == 0
    assert '"backend": "cpu"' in capsys.readouterr().out
