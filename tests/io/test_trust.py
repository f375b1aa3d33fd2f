"""Trust: deterministic files, the same outputs at every onnxruntime optimisation level,
strict ONNX shape inference, no pickle/eval/exec in the package, external data that
stays beside the model."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx import dtypes
from mlx2onnx.io import saving as save_module
from mlx2onnx.models import REFERENCE_MODELS, example
from mlx2onnx.translate.opset import MIN_OPSET, default_opset
from tests.support.harness import make_inputs, rand, rng_for

REPO = Path(__file__).resolve().parents[2]
LEVELS = ("all", "extended", "basic", "disabled")


def sample_cases(every: int = 40):
    from tests.translate.test_parity import CASES

    picked = [c for c in CASES if not c.xfail][::every]
    return [pytest.param(c, id=c.id) for c in picked]


# -- determinism --------------------------------------------------------------------------
DETERMINISM_SCRIPT = textwrap.dedent(
    """
    import sys
    import mlx2onnx
    from mlx2onnx.models import example
    model, args, kwargs = example(sys.argv[1])
    mlx2onnx.Exporter(path=sys.argv[2]).export(model, *args, **kwargs)
    """
)


@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_exporting_twice_gives_identical_bytes(name):
    model, args, kwargs = example(name)
    first = mlx2onnx.export(model, *args, **kwargs).SerializeToString()
    second = mlx2onnx.export(model, *args, **kwargs).SerializeToString()
    assert first == second


@pytest.mark.slow
def test_two_processes_write_identical_files(tmp_path):
    digests = []
    for k in range(2):
        out = tmp_path / f"llama{k}.onnx"
        subprocess.run(
            [sys.executable, "-c", DETERMINISM_SCRIPT, "llama", str(out)],
            check=True,
            cwd=REPO,
            capture_output=True,
            timeout=300,
        )
        digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
    assert digests[0] == digests[1]


# -- onnxruntime optimisation levels -----------------------------------------------------------
@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_models_agree_at_every_optimisation_level(name):
    model, args, kwargs = example(name)
    proto = mlx2onnx.export(model, *args, **kwargs)
    for level in LEVELS:
        report = mlx2onnx.Verifier(seed=3, graph_optimization_level=level).verify(proto, model, *args, **kwargs)
        assert report.passed, f"{name} at level {level}\n{report}"


@pytest.mark.parametrize("case", sample_cases())
def test_cases_agree_at_every_optimisation_level(case):
    dtype = case.dtypes[0]
    args, kwargs = make_inputs(case, dtype)
    proto = mlx2onnx.export(case.fn, *args, **kwargs)
    if case.order_insensitive:
        pytest.skip("compared sorted by the parity test")
    for level in LEVELS:
        verifier = mlx2onnx.Verifier(
            random_inputs=False, tolerances=case.tolerances or None, graph_optimization_level=level
        )
        report = verifier.verify(proto, case.fn, *args, **kwargs)
        assert report.passed, f"{case.id} [{dtypes.name(dtype)}] at level {level}\n{report}"


# -- checker and strict shape inference ----------------------------------------------------------
def strictly_checked(proto: onnx.ModelProto) -> None:
    onnx.checker.check_model(proto, full_check=True)
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)


@pytest.mark.parametrize("opset", sorted({default_opset(), MIN_OPSET}))
@pytest.mark.parametrize("name", sorted(REFERENCE_MODELS))
def test_reference_models_pass_strict_shape_inference(name, opset):
    model, args, kwargs = example(name)
    strictly_checked(mlx2onnx.Exporter(opset=opset).export(model, *args, **kwargs))


@pytest.mark.parametrize("case", sample_cases(every=25))
def test_cases_pass_strict_shape_inference(case):
    args, kwargs = make_inputs(case, case.dtypes[0])
    for opset in case.resolved_opsets():
        strictly_checked(mlx2onnx.Exporter(opset=opset).export(case.fn, *args, **kwargs))


# -- safety ------------------------------------------------------------------------------------
FORBIDDEN = re.compile(r"\bpickle\b|(?<![\w.])eval\s*\(|(?<![\w.])exec\s*\(|\b__import__\s*\(|\bmarshal\b")


def package_sources():
    roots = [REPO / "mlx2onnx", REPO / "op_mappings", REPO / "models"]
    return sorted(p for root in roots if root.exists() for p in root.rglob("*.py"))


def test_no_pickle_eval_or_exec_in_the_package():
    sources = package_sources()
    assert len(sources) > 20
    found = []
    for path in sources:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not found, "\n".join(found)


def test_the_safety_scan_would_catch_them():
    for bad in ("import pickle", "eval(text)", "exec (code)", "x = __import__('os')"):
        assert FORBIDDEN.search(bad), bad
    for fine in ("mx.eval(y)", "model.eval()", "def evaluate(x):", "self.exec_count"):
        assert not FORBIDDEN.search(fine), fine


def test_models_load_without_pickle(tmp_path):
    """Saved models are protobuf plus raw external data: onnx.load reads them back with
    no unpickling (np.load(..., allow_pickle=False) style guarantees are the format's)."""
    x = rand(rng_for("trust"), (2, 3))
    mlx2onnx.Exporter(path=tmp_path / "m.onnx").export(mx.exp, x)
    assert onnx.load(str(tmp_path / "m.onnx")).graph.node
    assert b"pickle" not in (tmp_path / "m.onnx").read_bytes()


# -- external data -----------------------------------------------------------------------------
def test_file_names_onnx_would_read_as_outside_the_folder_are_refused(tmp_path):
    with pytest.raises(mlx2onnx.ExportOptionError, match="starts with '..'"):
        mlx2onnx.Exporter(path=tmp_path / "..onnx").export(mx.exp, rand(rng_for("trust"), (2,)))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("file_name", ["m.onnx", ".hidden.onnx", "a b.onnx", "-x.onnx"])
def test_external_data_stays_beside_the_model(tmp_path, monkeypatch, file_name):
    monkeypatch.setattr(save_module, "EXTERNAL_DATA_THRESHOLD", 1024)
    w = mx.array(np.random.default_rng(2).standard_normal((40, 40)).astype(np.float32))

    def fn(a):
        return a @ w

    x = rand(rng_for("external"), (2, 40))
    sub = tmp_path / "sub"
    sub.mkdir()
    target = sub / ".." / "sub" / file_name  # an indirect path still writes beside the file
    model = mlx2onnx.Exporter(path=target).export(fn, x)
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {file_name + ".data"}
    for location in locations:
        assert "/" not in location and "\\" not in location and location not in ("..", ".")
        assert (sub / location).is_file()
    assert sorted(p.name for p in sub.iterdir()) == sorted([file_name, file_name + ".data"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]
    assert mlx2onnx.verify(sub / file_name, fn, x)
