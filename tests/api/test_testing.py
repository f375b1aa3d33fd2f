"""The parity harness in users' own test suites: ``mlx2onnx.testing.assert_exports``, the
pytest plugin's ``mlx2onnx_check`` fixture (run in a test project outside the repository,
by a real pytest subprocess, JUnit XML read back) and ``mlx2onnx check-suite``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import mlx.core as mx
import pytest

import mlx2onnx
from mlx2onnx.testing.check import Check, assert_exports

PROJECT_TESTS = """
import mlx.core as mx
import mlx.nn as nn
from mlx2onnx.testing.check import assert_exports


def scaled_tanh(x):
    return mx.tanh(x) * 3.0


def noisy(x):  # fresh random numbers at every call: no export can be faithful
    return x + mx.random.normal(x.shape)


def test_correct_function_passes():
    assert_exports(scaled_tanh, mx.random.normal((4, 8)))


def test_random_function_fails():
    assert_exports(noisy, mx.random.normal((4, 8)))


def test_fixture_correct(mlx2onnx_check):
    mx.random.seed(0)
    layer = nn.Linear(8, 3)
    mlx2onnx_check(layer, mx.random.normal((2, 8)))


def test_fixture_random(mlx2onnx_check):
    mlx2onnx_check.with_options(localize=False)(noisy, mx.random.normal((4, 8)))
"""


def test_assert_exports_passes_and_fails_with_the_report():
    result = assert_exports(lambda x, *, scale: mx.tanh(x) * scale, mx.random.normal((3, 4)), scale=mx.array(2.0))
    assert result.passed and result.reports["onnxruntime"].passed
    with pytest.raises(AssertionError) as info:
        assert_exports(lambda x: x + mx.random.normal(x.shape), mx.random.normal((3, 4)))
    text = str(info.value)
    assert "does not match MLX in onnxruntime: output_0" in text
    assert "abs" in text and "rel" in text and "atol" in text and "FAIL" in text and "worst at [" in text
    assert "float32" in text and "[3, 4]" in text


def test_check_options_localize_and_refusals():
    def wrong(x):
        return x + mx.random.normal(x.shape)

    result = Check(localize=True).run(wrong, mx.random.normal((3, 4)))
    assert not result.passed and result.located
    result = Check().run(lambda x: mx.linalg.qr(x, stream=mx.cpu)[0], mx.random.normal((3, 3)))
    assert not result.passed and "could not be exported" in result.failure
    with pytest.raises(ValueError, match="runtimes"):
        Check(runtimes=("tensorrt",))
    exporter = mlx2onnx.Exporter(opset=17)
    assert Check(exporter=exporter).assert_exports(lambda x: x * 2.0, mx.ones((2,))).model.opset_import[0].version == 17


@pytest.mark.slow
def test_a_project_outside_the_repository(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_models.py").write_text(textwrap.dedent(PROJECT_TESTS))
    junit = tmp_path / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "test_models.py"],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "2 failed, 2 passed" in out, out
    assert "test_random_function_fails" in out and "test_fixture_random" in out
    assert "does not match MLX in onnxruntime: output_0" in out
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    for name, passed in (("test_fixture_correct", "true"), ("test_fixture_random", "false")):
        props = {p.get("name"): p.get("value") for p in cases[name].iter("property")}
        assert props["mlx2onnx.passed"] == passed
        assert "parity" in props["mlx2onnx.report"] and "output_0" in props["mlx2onnx.report"]
    assert cases["test_random_function_fails"].find("failure") is not None
    assert cases["test_correct_function_passes"].find("failure") is None


SUITE_MODULE = """
import mlx.core as mx


def good():
    return (lambda x: mx.sigmoid(x) * 2.0), (mx.random.normal((3, 5)),)


def noisy():
    return (lambda x: x + mx.random.normal(x.shape)), (mx.random.normal((3, 5)),)


def takes_inputs(x, y):
    return x @ y
"""

SUITE = """
seed = 1

[[targets]]
name = "bundled mlp"
target = "mlp"

[[targets]]
target = "zoo.py:noisy"

[[targets]]
name = "matmul"
target = "zoo.py:takes_inputs"
inputs = ["x=4x8:float32", "y=8x3:float32"]
dynamic = ["x:0=rows"]
sizes = ["rows=1,6"]
atol = 1e-5
"""


@pytest.mark.slow
def test_check_suite_reports_every_target(tmp_path):
    (tmp_path / "zoo.py").write_text(textwrap.dedent(SUITE_MODULE))
    (tmp_path / "suite.toml").write_text(textwrap.dedent(SUITE))
    out = tmp_path / "reports"
    proc = subprocess.run(
        [sys.executable, "-m", "mlx2onnx", "check-suite", "suite.toml", "-o", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[1/3] bundled mlp [onnxruntime] PASS" in proc.stdout
    assert "[2/3] zoo.py:noisy [onnxruntime] FAIL" in proc.stdout
    assert "2 passed, 1 failed" in proc.stdout
    data = json.loads((out / "report.json").read_text())
    assert data["summary"]["failing"] == ["zoo.py:noisy [onnxruntime]"]
    failed = next(r for r in data["results"] if not r["passed"])
    assert "output_0" in failed["reason"] and failed["report"]["outputs"][0]["passed"] is False
    matmul = next(r for r in data["results"] if r["name"] == "matmul")
    assert [o["at"] for o in matmul["report"]["outputs"]] == ["rows=1", "rows=6"]
    assert matmul["report"]["outputs"][0]["atol"] == 1e-5
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    failures = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failures == ["zoo.py:noisy"]
    page = (out / "report.html").read_text()
    assert page.count('<tr class="fail">') == 1 and page.count('<tr class="pass">') == 2
    assert "zoo.py:noisy" in page and "data:image/png;base64," in page


@pytest.mark.parametrize(
    "text, wanted",
    [
        ("[[targets]]\nname = 'x'\n", "no 'target' key"),
        ("[[targets]]\ntarget = 'mlp'\ncolour = 'red'\n", "unknown key 'colour'"),
        ("[[targets]]\ntarget = 'mlp'\natol = -1.0\n", "tolerance"),
        ("[[targets]]\ntarget = 'mlp'\ninputs = ['x=²']\n", "--input"),
        ("[[targets]]\ntarget = 'mlp'\nruntimes = ['tract2']\n", "not available"),
        ("targets = 3\n", "no [[targets]]"),
        ("[[targets]\n", "not valid TOML"),
        ("[[targets]]\ntarget = 'mlp'\n[[targets]]\ntarget = 'mlp'\n", "used twice"),
    ],
)
def test_check_suite_refuses_a_bad_suite_file_before_running(tmp_path, text, wanted, capsys):
    from mlx2onnx.cli import app as cli

    (tmp_path / "bad.toml").write_text(text)
    rc = cli.main(["check-suite", str(tmp_path / "bad.toml"), "-o", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert rc == 2 and wanted in err, err
    assert not (tmp_path / "reports").exists()


def write_model_folder(folder, seed=0):
    """A tiny mlx-lm llama folder (config.json, model.safetensors), random weights."""
    from mlx.utils import tree_flatten
    from mlx_lm.models import llama

    config = dict(
        model_type="llama",
        hidden_size=32,
        num_hidden_layers=1,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=97,
        rms_norm_eps=1e-5,
    )
    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(config))
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    return folder


@pytest.mark.slow
def test_model_folders_as_targets(tmp_path, capsys):
    pytest.importorskip("mlx_lm")
    from mlx2onnx.cli import app as cli

    folder = write_model_folder(tmp_path / "tiny-llama")
    rc = cli.main(["export", str(folder), "-o", str(tmp_path / "m.onnx"), "--check", "-q"])
    out = capsys.readouterr()
    assert rc == 0 and "parity PASSED" in out.out, out.out + out.err
    (tmp_path / "suite.toml").write_text(
        '[[targets]]\ntarget = "tiny-llama"\n'
        '[[targets]]\nname = "longer"\ntarget = "tiny-llama"\ninputs = ["inputs=2x5:int32:0..97"]\n'
    )
    rc = cli.main(["check-suite", str(tmp_path / "suite.toml"), "-o", str(tmp_path / "reports")])
    assert rc == 0, capsys.readouterr().out
    rc = cli.main(["check-suite", str(tmp_path / "suite.toml"), "-o", str(tmp_path / "reports"), "-q"])
    assert rc == 0, capsys.readouterr().out  # an earlier run's reports are replaced
    (tmp_path / "reports" / "mine.txt").write_text("the user's")
    rc = cli.main(["check-suite", str(tmp_path / "suite.toml"), "-o", str(tmp_path / "reports"), "-q"])
    assert rc == 2 and "(mine.txt)" in capsys.readouterr().err  # refused before anything runs
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == [
        ".mlx2onnx.json",
        "junit.xml",
        "mine.txt",
        "report.html",
        "report.json",
    ]
    (tmp_path / "empty").mkdir()
    rc = cli.main(["export", str(tmp_path / "empty"), "-o", str(tmp_path / "e.onnx")])
    assert rc == 2 and "no config.json" in capsys.readouterr().err and not (tmp_path / "e.onnx").exists()
