"""scripts/gpu_check.sh and its model driver, as far as this CPU machine can run them.

The GPU run itself needs an NVIDIA GPU with mlx[cuda13] (docs/gpu.md); here the script
must say that no GPU is there and exit 0, and the driver that exports and checks the zoo
models runs on the CPU stream the same way it runs on the GPU stream.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess

import mlx.core as mx
import pytest

from scripts import gpu_models

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

has_gpu = shutil.which("nvidia-smi") is not None or (platform.system() == "Darwin" and platform.machine() == "arm64")


@pytest.mark.skipif(has_gpu, reason="this machine has a GPU: the script would run the whole GPU check")
def test_the_script_says_there_is_no_gpu(tmp_path):
    run = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "gpu_check.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "no GPU here" in run.stdout
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["gpu"] is None and "did not run" in summary["reason"]
    assert not (tmp_path / "venv").exists()  # nothing installed


def test_the_driver_exports_and_checks_models_on_a_stream(tmp_path):
    out = tmp_path / "models.json"
    assert (
        gpu_models.main(["--device", "cpu", "--only", "llama (bundled)", "--only", "llama 4-bit", "--out", str(out)])
        == 0
    )
    summary = json.loads(out.read_text())
    assert summary["tally"] == {"pass": 2, "fail": 0, "error": 0}
    assert summary["device"]["default_device"] == "Device(cpu, 0)"
    by_name = {e["model"]: e for e in summary["models"]}
    assert by_name["mlx-lm llama 4-bit"]["fused_records"]["QuantizedMatmul"] > 0
    report = by_name["llama (bundled)"]["report"]
    assert report["passed"] and report["reference"]["device"] == "Device(cpu, 0)" and not report["reference"]["tf32"]


def test_the_driver_records_a_crash_and_goes_on(tmp_path, monkeypatch):
    from tests.support import zoo

    def broken():
        raise RuntimeError("no such model")

    monkeypatch.setitem(zoo.MATRIX, "broken model", broken)
    out = tmp_path / "models.json"
    assert gpu_models.main(["--device", "cpu", "--only", "broken", "--only", "mlp (bundled)", "--out", str(out)]) == 1
    summary = json.loads(out.read_text())
    assert summary["tally"] == {"pass": 1, "fail": 0, "error": 1}
    assert "RuntimeError: no such model" in {e["model"]: e for e in summary["models"]}["broken model"]["error"]


@pytest.mark.skipif(mx.is_available(mx.gpu), reason="MLX has a GPU here")
def test_the_driver_refuses_a_gpu_run_without_a_gpu(tmp_path, capsys):
    assert gpu_models.main(["--device", "gpu", "--out", str(tmp_path / "m.json")]) == 2
    assert "no GPU" in capsys.readouterr().out
