"""The parity check cannot be fooled: it fails what does not fit the function, and does
not fail (or crash MLX on) what does. Each case runs through the API and the command
line, with the exit codes asserted."""

from __future__ import annotations

import json
import math
import textwrap

import mlx.core as mx
import mlx.nn as nn
import onnx
import pytest

import mlx2onnx
from mlx2onnx.errors import CheckOptionError, UserFunctionError, VerificationError
from tests.support.commands import inprocess as run

TARGETS = """
import mlx.core as mx
import mlx.nn as nn
import numpy as np


def two(x):
    return mx.tanh(x), x * 2.0


def one(x):
    return mx.tanh(x)


def half(x):
    return mx.tanh(x).astype(mx.float16)


def as_int32(x):
    return (x * 10).astype(mx.int32)


def as_int64(x):
    return (x * 10).astype(mx.int64)


def raises(x):
    raise RuntimeError("the user's own bug")


def build():                      # an unseeded factory: new random weights at every call
    model = nn.Linear(8, 4)
    mx.eval(model.parameters())
    return model, (mx.random.normal((2, 8)),)


def cache_write():
    def write(cache, update, position):
        return mx.slice_update(cache, update, position, axes=(0,))
    return write, (mx.zeros((8, 4)), mx.ones((1, 4)), mx.array([3]))


def embed():
    mx.random.seed(0)
    layer = nn.Embedding(4, 6)
    mx.eval(layer.parameters())
    return layer, (mx.array([[2]]),)


def big_unsigned():
    return (lambda x: x // 3), (mx.array(np.array([2**63 + 5, 2**64 - 1], dtype=np.uint64)),)


def topk():
    return (lambda x: mx.topk(x, 9, axis=-1)), (mx.random.normal((3, 40)),)
"""


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    path = tmp_path_factory.mktemp("check")
    (path / "targets.py").write_text(textwrap.dedent(TARGETS))
    return path


def export_file(fun, args, path, **options):
    mlx2onnx.Exporter(path=str(path), overwrite=True, **options).export(fun, *args)
    return str(path)


def x84():
    return mx.random.normal((8, 4))


# -- what is wrong must fail ----------------------------------------------------------------
@pytest.fixture(autouse=True)
def _targets_on_path(work, monkeypatch):
    monkeypatch.syspath_prepend(str(work))
    import importlib
    import sys

    sys.modules.pop("targets", None)
    importlib.invalidate_caches()
    yield


def test_output_count(work, capsys):
    import targets

    x = x84()
    two_out = export_file(targets.two, (x,), work / "two.onnx")
    one_out = export_file(targets.one, (x,), work / "one.onnx")
    report = mlx2onnx.verify(two_out, targets.one, x)
    assert not report.passed
    assert "the function returns only 1 output" in str(report)
    report = mlx2onnx.verify(one_out, targets.two, x)
    assert not report.passed and "the model has only 1 output" in str(report)
    for model, target in (("two.onnx", "targets:two"), ("one.onnx", "targets:two")):
        rc, out, _ = run(
            "check", model, "targets:one" if model == "two.onnx" else target, "-i", "x=8x4", cwd=work, capsys=capsys
        )
        assert rc == 1, out
        rc, out, _ = run(
            "check",
            model,
            "targets:one" if model == "two.onnx" else target,
            "-i",
            "x=8x4",
            "--json",
            cwd=work,
            capsys=capsys,
        )
        assert rc == 1 and json.loads(out)["passed"] is False


@pytest.mark.parametrize("exported, checked", [("one", "half"), ("as_int32", "as_int64"), ("as_int64", "as_int32")])
def test_output_dtype(work, capsys, exported, checked):
    import targets

    x = x84()
    path = export_file(getattr(targets, exported), (x,), work / f"{exported}.onnx")
    report = mlx2onnx.verify(path, getattr(targets, checked), x)
    assert not report.passed and "dtype" in str(report), str(report)
    rc, out, _ = run("check", path, f"targets:{checked}", "-i", "x=8x4", "--json", cwd=work, capsys=capsys)
    assert rc == 1 and not json.loads(out)["passed"]


def test_output_shape(work):
    x = x84()
    path = export_file(lambda a: a.sum(axis=0), (x,), work / "sum0.onnx")
    report = mlx2onnx.verify(path, lambda a: a.sum(axis=0, keepdims=True), x)
    assert not report.passed and "shape" in str(report)


@pytest.mark.parametrize("atol, rtol", [(math.nan, 0.0), (0.0, math.nan), (-1.0, 0.0), (0.0, -1e-3), (math.inf, 0.0)])
def test_tolerances_must_be_finite_and_non_negative(work, capsys, atol, rtol):
    with pytest.raises(CheckOptionError, match="finite"):
        mlx2onnx.Verifier(tolerances={"float32": (atol, rtol)})
    path = export_file(lambda a: a * 2.0, (x84(),), work / "double.onnx")
    flag, value = ("--atol", atol) if not (atol == 0.0) else ("--rtol", rtol)
    rc, _, err = run("check", path, "targets:one", "-i", "x=8x4", flag, value, cwd=work, capsys=capsys)
    assert rc == 2 and "tolerance" in err


def test_in_memory_model_with_external_data_is_refused(work, monkeypatch):
    (work / "sub").mkdir(exist_ok=True)
    x = x84()
    w1, w2 = mx.random.normal((4, 256)), mx.random.normal((4, 256))
    mine, theirs = (lambda a: a @ w1), (lambda a: a @ w2)
    proto = mlx2onnx.Exporter(path=str(work / "sub" / "m.onnx"), external_data=True).export(mine, x)
    monkeypatch.chdir(work)
    # another model's weights file in the current directory, under the same name
    mlx2onnx.Exporter(path=str(work / "m.onnx"), external_data=True).export(theirs, x)
    assert (work / "m.onnx.data").exists() and (work / "sub" / "m.onnx.data").exists()
    with pytest.raises(VerificationError, match="external data"):
        mlx2onnx.verify(proto, theirs, x)
    assert mlx2onnx.verify(str(work / "sub" / "m.onnx"), mine, x)
    assert not mlx2onnx.verify(str(work / "sub" / "m.onnx"), theirs, x)


def test_weights_that_differ_from_the_callable(work, capsys):
    rc, _, err = run("export", "targets:build", "-o", "built.onnx", "--overwrite", "-q", cwd=work, capsys=capsys)
    assert rc == 0, err
    rc, out, err = run("check", "built.onnx", "targets:build", "--localize", cwd=work, capsys=capsys)
    assert rc == 1
    assert "weights differ from the callable's" in out and "weight" in out and "seed" in out
    assert "AddMM" not in out  # the exporter is not blamed
    import targets

    model, (x,) = targets.build()
    path = export_file(model, (x,), work / "lin.onnx")
    assert mlx2onnx.verify(path, model, x)
    other, _ = targets.build()
    report = mlx2onnx.verify(path, other, x)
    assert not report.passed and "weight" in report.problems[0] and "bias" in report.problems[0]


def test_transposed_and_fused_weights_are_not_reported(work):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(16, 16)
            self.b = nn.Linear(16, 16, bias=False)

        def __call__(self, x):
            return self.b(nn.gelu(self.a(x))) @ self.a.weight  # a square weight also read transposed

    mx.random.seed(1)
    block = Block()
    x = mx.random.normal((3, 16))
    path = export_file(block, (x,), work / "block.onnx")
    report = mlx2onnx.verify(path, block, x)
    assert report.passed and not report.problems, str(report)


# -- what is right must pass, and never crash MLX ----------------------------------------------
@pytest.mark.parametrize("target", ["cache_write", "embed", "big_unsigned", "topk"])
def test_integer_inputs_stay_valid(work, capsys, target):
    import targets

    fun, args = getattr(targets, target)()
    path = export_file(fun, args, work / f"{target}.onnx")
    assert mlx2onnx.verify(path, fun, *args)
    rc, out, err = run("check", path, f"targets:{target}", cwd=work, capsys=capsys)
    assert rc == 0, out + err


def test_out_of_range_indices_never_reach_mlx(work):
    table = mx.random.normal((4, 3))

    def lookup(ids):
        return table[ids]

    ids = mx.array([0, 3])
    path = export_file(lookup, (ids,), work / "lookup.onnx")
    bad = mx.array([0, 9])  # the caller's own inputs, out of range
    with pytest.raises(VerificationError, match="MLX was not run"):
        mlx2onnx.Verifier(random_inputs=False).verify(path, lookup, bad)


@pytest.mark.parametrize("n", [9, 17, 40, 100])
def test_topk_and_argpartition_compare_as_sets(work, n):
    x = mx.random.normal((3, n))
    for name, fun in (
        ("topk", lambda a: mx.topk(a, 5, axis=-1)),
        ("argpartition", lambda a: mx.argpartition(a, 4, axis=-1)),
        ("partition0", lambda a: mx.partition(a, 2, axis=0)),
        ("topk_of_sum", lambda a: mx.topk(a, 3).sum(axis=-1)),
    ):
        path = export_file(fun, (x,), work / f"{name}{n}.onnx")
        report = mlx2onnx.verify(path, fun, x)
        assert report.passed, f"{name}: {report}"
    # a real difference in the set still fails
    path = export_file(lambda a: mx.topk(a, 5, axis=-1), (x,), work / f"topk_wrong{n}.onnx")
    assert not mlx2onnx.verify(path, lambda a: -mx.topk(-a, 5, axis=-1), x)


def test_order_free_axis_recorded_only_for_whole_runs():

    x = mx.random.normal((2, 12))
    for fun, axis in (
        (lambda a: mx.topk(a, 4), 1),
        (lambda a: mx.partition(a, 3, axis=1), 1),
        (lambda a: mx.partition(a, 3, axis=1)[:, :3], 1),
        (lambda a: mx.partition(a, 3, axis=1)[:, 1:5], None),
        (lambda a: mx.sort(a, axis=1), None),
    ):
        trace = mlx2onnx.capture(fun, (x,), {})
        assert trace.order_free_axis(trace.outputs[0].spec.name) == axis


def test_the_users_error_and_ours_are_told_apart(work, capsys):
    import targets

    x = x84()
    path = export_file(targets.one, (x,), work / "one_for_raise.onnx")
    with pytest.raises(UserFunctionError, match="the user's own bug"):
        mlx2onnx.verify(path, targets.raises, x)
    rc, _, err = run("check", path, "targets:raises", "-i", "x=8x4", cwd=work, capsys=capsys)
    assert rc == 4 and "the user's own bug" in err
    rc, _, err = run("check", path, "targets:one", "-i", "x=8x4", "--seed", "-1", cwd=work, capsys=capsys)
    assert rc == 2 and "seed" in err
    with pytest.raises(CheckOptionError):
        mlx2onnx.Verifier(seed=-1)


def _with_metadata(src, dst, key, value):
    proto = onnx.load(src)
    for prop in proto.metadata_props:
        if prop.key == key:
            prop.value = value
            break
    else:
        proto.metadata_props.add(key=key, value=value)
    onnx.save(proto, dst)
    return dst


def test_hostile_metadata(work, capsys):
    x = mx.random.normal((2, 5))
    path = str(work / "dyn.onnx")
    mlx2onnx.Exporter(path=path, dynamic={"a": {0: "batch"}}).export(lambda a: mx.tanh(a) * 2.0, x)
    meta = json.loads(next(p.value for p in onnx.load(path).metadata_props if p.key == "mlx2onnx.dynamic"))
    cases = {
        "huge": {**meta, "symbols": {"batch": 10**13}},
        "step0": {**meta, "multiple_of": {"batch": 0}},
        "range": {**meta, "range": {"batch": ["a", 3]}},
    }
    for label, value in cases.items():
        bad = _with_metadata(path, str(work / f"dyn_{label}.onnx"), "mlx2onnx.dynamic", json.dumps(value))
        with pytest.raises(VerificationError, match="malformed"):
            mlx2onnx.verify(bad, lambda a: mx.tanh(a) * 2.0, x)
        rc, _, err = run("check", bad, "targets:one", "-i", "x=2x5", cwd=work, capsys=capsys)
        assert rc in (1, 3) and "internal error" not in err, err
    bad = _with_metadata(path, str(work / "dyn_json.onnx"), "mlx2onnx.dynamic", "{not json")
    with pytest.raises(VerificationError, match="not valid JSON"):
        mlx2onnx.verify(bad, lambda a: mx.tanh(a) * 2.0, x)
    rc, _, err = run("check", bad, "targets:one", "-i", "x=2x5", cwd=work, capsys=capsys)
    assert rc in (1, 3) and "internal error" not in err and "JSON" in err
    io = json.loads(next(p.value for p in onnx.load(path).metadata_props if p.key == "mlx2onnx.io"))
    io["inputs"][0]["position"] = 7
    bad = _with_metadata(path, str(work / "io_bad.onnx"), "mlx2onnx.io", json.dumps(io))
    with pytest.raises(VerificationError, match="malformed"):
        mlx2onnx.verify(bad, lambda a: mx.tanh(a) * 2.0, x)


def test_verify_of_a_directory_or_missing_file(work):
    with pytest.raises(VerificationError, match="directory"):
        mlx2onnx.verify(str(work), lambda a: a, x84())
    with pytest.raises(VerificationError, match="no such model file"):
        mlx2onnx.verify(str(work / "nope.onnx"), lambda a: a, x84())


@pytest.mark.parametrize(
    "spec",
    [
        "x=²",
        "x=4:int32:0.5..0.7",
        "x=4:float32:-1e999..0",
        "x=4:int64:0..1e30",
        "x=100000x100000x100000",
        "x=4:uint8:0..300",
        "x=4:float16:0..1e30",
    ],
)
def test_bad_input_specs_are_usage_errors(work, capsys, spec):
    rc, _, err = run("export", "targets:one", "-i", spec, "-o", "never.onnx", cwd=work, capsys=capsys)
    assert rc == 2 and "internal error" not in err and "--input" in err, err
    assert not (work / "never.onnx").exists()


# -- capture and saving corners ------------------------------------------------------------
def test_export_leaves_compilation_as_the_user_had_it():
    from mlx2onnx.capture.tracing import compile_enabled

    assert compile_enabled()
    mx.disable_compile()
    try:
        mlx2onnx.export(lambda a: a * 2.0, x84())
        assert not compile_enabled()
    finally:
        mx.enable_compile()
    mlx2onnx.export(lambda a: a * 2.0, x84())
    assert compile_enabled()


def test_evaluating_while_traced_names_the_users_line():
    def router(x):
        if x.sum().item() > 0:  # the offending line
            return x * 2.0
        return x

    with pytest.raises(mlx2onnx.CaptureError, match=r"test_parity_check.py:\d+ \(if x.sum\(\).item\(\) > 0.*mx.where"):
        mlx2onnx.export(router, x84())


def test_contiguous_is_the_identity_for_export():
    def fun(a):
        return mx.contiguous(mx.transpose(a)) * 2.0

    x, original = x84(), mx.contiguous
    proto = mlx2onnx.export(fun, x)
    assert mlx2onnx.verify(proto, fun, x)
    assert mx.contiguous is original  # restored after the trace


def test_overwrite_false_keeps_an_existing_weights_file(work):
    path = work / "keep.onnx"
    (work / "keep.onnx.data").write_bytes(b"someone else's weights")
    with pytest.raises(mlx2onnx.ExportOptionError, match="keep.onnx.data.*already exists"):
        mlx2onnx.Exporter(path=str(path), overwrite=False).export(lambda a: a * 2.0, x84())
    assert not path.exists() and (work / "keep.onnx.data").read_bytes() == b"someone else's weights"
