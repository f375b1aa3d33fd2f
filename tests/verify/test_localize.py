"""``mlx2onnx check --localize`` names the primitive whose handler is broken.

A user module deliberately breaks one handler when imported (the CLI imports it before
exporting, so the written model carries the bug); localize must name that primitive's
first record, not the records downstream of it, which see the error too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import mlx.core as mx
import pytest

import mlx2onnx
from mlx2onnx.models import REFERENCE_MODELS
from mlx2onnx.translate import registry
from mlx2onnx.verify import interpret
from mlx2onnx.verify.localize import localize

_SCRIPT = shutil.which("mlx2onnx", path=os.path.dirname(sys.executable))
COMMAND = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "mlx2onnx"]

BREAK = """
import mlx2onnx.translate.registry as registry
from mlx2onnx.models import {model}

_original = registry.lookup("{primitive}")


def broken(ctx, rec):
    (y,) = _original(ctx, rec)
    return [ctx.op.{op}(y, ctx.scalar({value}, rec.outputs[0].dtype))]


registry._HANDLERS["{primitive}"] = broken


def build(seed=0):
    return {model}.example(seed)
"""


def cli(*args, cwd):
    return subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=180)


def first_record(model_name, primitive):
    model, args, kwargs = REFERENCE_MODELS[model_name](seed=0)
    trace = mlx2onnx.capture(model, args, kwargs)
    return next(p.index for p in trace.primitives if p.name == primitive)


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, primitive, op, value",
    [("mlp", "Erf", "Mul", 1.01), ("llama", "Softmax", "Add", 0.01)],
)
def test_localize_names_the_broken_handler(tmp_path, model, primitive, op, value):
    (tmp_path / "broken.py").write_text(
        textwrap.dedent(BREAK.format(model=model, primitive=primitive, op=op, value=value))
    )
    out = cli("export", "broken:build", "-o", "b.onnx", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    index = first_record(model, primitive)
    out = cli("check", "b.onnx", model, "--localize", "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    found = json.loads(out.stdout)["localize"]
    first = found["first_divergent"]
    assert (first["primitive"], first["index"]) == (primitive, index)
    assert first["max_abs_error"] > 1e-3 and not first["passed"]
    # local checks: downstream records see the same wrong values on both sides, so only
    # records of the broken primitive diverge
    assert {d["primitive"] for d in found["divergent"]} == {primitive}
    assert found["checked"] > 0 and found["skipped"] == []
    if model == "mlp":  # the text report, once
        out = cli("check", "b.onnx", "broken:build", "--localize", cwd=tmp_path)
        assert out.returncode == 1
        assert f"first divergent primitive: {primitive} (record {index})" in out.stdout
        assert "inputs:" in out.stdout and "max abs error" in out.stdout


@pytest.fixture()
def mlp():
    model, args, kwargs = REFERENCE_MODELS["mlp"](seed=0)
    return model, args, kwargs


def test_healthy_model_has_no_divergent_record(mlp):
    model, args, kwargs = mlp
    report = localize(mlx2onnx.export(model, *args, **kwargs), model, args, kwargs, seed=1)
    assert report.first is None and report.divergent == [] and report.problem == ""
    # records fused away (the MLP's GELU is one Gelu node) have no ONNX value to compare
    assert report.checked >= 5 and report.checked + len(report.unexposed) == report.records and report.skipped == []
    assert "no single primitive diverges" in str(report)


def test_records_the_interpreter_cannot_evaluate_are_skipped_and_named(mlp, monkeypatch):
    model, args, kwargs = mlp
    original = registry.lookup("Maximum")

    def broken(ctx, rec):
        (y,) = original(ctx, rec)
        return [ctx.op.Add(y, ctx.scalar(0.5, rec.outputs[0].dtype))]

    monkeypatch.setitem(registry._HANDLERS, "Maximum", broken)
    onnx_model = mlx2onnx.export(model, *args, **kwargs)
    report = localize(onnx_model, model, args, kwargs)
    assert (report.first.name, report.first.index) == ("Maximum", first_record("mlp", "Maximum"))
    monkeypatch.delitem(interpret.EVALUATORS, "Maximum")
    report = localize(onnx_model, model, args, kwargs)
    assert report.first is None  # the broken record itself is skipped; downstream uses its ONNX value
    assert [(n, r) for _, n, r in report.skipped] == [("Maximum", "the interpreter has no MLX evaluator for it")]
    assert "skipped Maximum" in str(report)


def test_model_from_another_function_is_reported(mlp):
    model, args, kwargs = mlp
    onnx_model = mlx2onnx.export(model, *args, **kwargs)
    report = localize(onnx_model, lambda x: mx.sin(x)[:, :10], args, {})
    assert report.first is None and "not exported from this function" in report.problem


def pooled_conv():
    """A conv net whose pooled features the layout pass leaves channels-first: the Reduce's
    ONNX value is [N, C, 1, 1] where MLX's is [N, 1, 1, C]."""
    import mlx.nn as nn

    mx.random.seed(3)
    conv, fc = nn.Conv2d(3, 16, 3, padding=1), nn.Linear(16, 10)
    mx.eval(conv.parameters(), fc.parameters())

    def net(x):
        h = nn.relu(conv(x))
        return fc(mx.mean(h, axis=(1, 2), keepdims=True).reshape(x.shape[0], -1))

    return net, (mx.random.normal((2, 8, 8, 3)),)


@pytest.mark.parametrize("dynamic", [None, {"x": {0: "batch"}}], ids=["static", "dynamic batch"])
def test_localize_compares_values_in_mlx_layout_and_on_dynamic_exports(monkeypatch, dynamic):
    """The broken record after a channels-first Reduce is named (the Reduce, compared in
    MLX's layout, passes), and a dynamic export's records are matched by its own trace."""
    from mlx2onnx.translate.markers import layout_perm

    net, args = pooled_conv()
    original = registry.lookup("AddMM")

    def broken(ctx, rec):
        (y,) = original(ctx, rec)
        return [ctx.op.Add(y, ctx.scalar(0.5, rec.outputs[0].dtype))]

    monkeypatch.setitem(registry._HANDLERS, "AddMM", broken)
    onnx_model = mlx2onnx.Exporter(dynamic=dynamic).export(net, *args)
    relaid = [n for n in onnx_model.graph.node if layout_perm(n) is not None]
    reduce_node = next(n for n in onnx_model.graph.node if n.op_type == "ReduceSum")
    assert reduce_node in relaid and reduce_node.output[0].startswith("reduce_")  # the case this test is for
    report = localize(onnx_model, net, args, {})
    trace = mlx2onnx.capture(net, args, {}) if dynamic is None else mlx2onnx.capture(net, args, {}, shapeless=True)
    addmm = next(p.index for p in trace.primitives if p.name == "AddMM")
    assert report.problem == "" and (report.first.name, report.first.index) == ("AddMM", addmm), str(report)
    assert [c.name for c in report.divergent] == ["AddMM"] and report.skipped == []
    assert report.checked >= 2  # the Reduce among them, in MLX's layout
