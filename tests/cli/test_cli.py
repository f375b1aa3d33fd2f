"""The ``mlx2onnx`` console script, run as a subprocess on the reference models and on
user modules written into a temporary directory, including every failure path.

Subprocesses cost about a second each (MLX and onnx start-up), so every scenario runs
through the real script once; variations of a path already exercised call
``mlx2onnx.cli.main`` in-process, which is the same code behind the script.
"""

from __future__ import annotations

import json
import shutil
import textwrap

import onnx
import pytest

import mlx2onnx
import mlx2onnx.translate.registry
from mlx2onnx.cli import app as cli_module
from tests.support.commands import cli, inprocess

USER_MODULE = """
import mlx.core as mx
import mlx.nn as nn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 3)

    def __call__(self, x, *, scale):
        return mx.tanh(self.proj(x)) * scale


def make(seed=0):
    mx.random.seed(seed)
    model = Tiny()
    mx.eval(model.parameters())
    return model


def pair():
    return (lambda a, b: mx.softmax(a @ b, axis=-1)), (mx.ones((2, 3)), mx.ones((3, 4)))


def gelu(x):
    return x * (1 + mx.erf(x / 2**0.5)) / 2


def other(x):
    return mx.sin(x)


def qr(seed=0):
    return (lambda a: mx.linalg.qr(a, stream=mx.cpu)[0]), (mx.eye(3),)


def broken(x):
    return helper(x)


def loop_over_half_the_rows(x):
    for _ in range(x.shape[0] // 2):  # the trace unrolls a loop that is no step per row
        x = x * 2 + 1
    return x


def helper(x):
    raise RuntimeError("user bug in helper")
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli")
    (path / "usermod.py").write_text(textwrap.dedent(USER_MODULE))
    return path


@pytest.mark.slow
def test_version_and_help(workdir):
    out = cli("--version", cwd=workdir, check_rc=0)
    assert out.stdout.strip() == f"mlx2onnx {mlx2onnx.__version__}"
    parser = cli_module.build_parser()
    actions = {a.dest: a for a in parser._subparsers._group_actions}  # noqa: SLF001
    commands = actions["command"].choices
    assert set(commands) == {"export", "check", "inspect", "primitives", "check-suite"}
    text = commands["export"].format_help()
    for piece in ("--opset", "--input", "--check", "--overwrite", "exit codes", "parity mismatch", "MODULE:CALLABLE"):
        assert piece in text
    assert "--localize" in commands["check"].format_help() and "--records" in commands["inspect"].format_help()


@pytest.mark.slow
def test_export_and_check_reference_models(workdir):
    for name in ("mlp", "llama", "mlx2onnx.models.encoder:example"):
        short = name.rsplit(".", 1)[-1].split(":")[0]
        out = cli("export", name, "-o", f"{short}.onnx", "--check", cwd=workdir, check_rc=0)
        assert "parity PASSED" in out.stdout and f"wrote {short}.onnx" in out.stdout
        assert out.stderr == ""  # no progress display when stderr is not a terminal
        onnx.checker.check_model(str(workdir / f"{short}.onnx"), full_check=True)
    out = cli("check", "encoder.onnx", "encoder", "--json", "--seed", "5", cwd=workdir, check_rc=0)
    report = json.loads(out.stdout)
    assert (
        report["passed"] and report["seed"] == 5 and [o["name"] for o in report["outputs"]] == ["output_0", "output_1"]
    )
    assert report["onnxruntime_version"] and "cpu" in report["device"].lower()
    assert all(o["max_abs_error"] <= o["atol"] + 1 for o in report["outputs"])


@pytest.mark.slow
def test_export_options(workdir):
    cli(
        "export",
        "usermod:make",
        "-o",
        "tiny.onnx",
        "--opset",
        "17",
        "-i",
        "x=2x8:float32",
        "-i",
        "scale=2x3:float32",
        "--input-names",
        "x=features",
        "--output-names",
        "y",
        cwd=workdir,
        check_rc=0,
    )
    model = onnx.load(str(workdir / "tiny.onnx"))
    assert [i.name for i in model.graph.input] == ["features", "scale"]
    assert [o.name for o in model.graph.output] == ["y"]
    assert {o.domain: o.version for o in model.opset_import}[""] == 17
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 8]
    out = cli("check", "tiny.onnx", "usermod:make", "-i", "x=2x8", "-i", "scale=2x3", cwd=workdir, check_rc=0)
    assert "PASS" in out.stdout
    # the file exists: refuse without --overwrite
    out = cli("export", "usermod:make", "-o", "tiny.onnx", "-i", "x=2x8", "-i", "scale=2x3", cwd=workdir, check_rc=2)
    assert "already exists" in out.stderr and "--overwrite" in out.stderr


@pytest.mark.slow
def test_user_file_path_and_function_itself(workdir):
    sub = workdir / "pkg"
    sub.mkdir()
    shutil.copy(workdir / "usermod.py", sub / "models_file.py")
    cli("export", "pkg/models_file.py:pair", "-o", "pair.onnx", "--check", cwd=workdir, check_rc=0)
    out = cli("export", "usermod:gelu", "-o", "gelu.onnx", "-i", "4x5:float16", "--check", cwd=workdir, check_rc=0)
    assert "float16" in out.stdout and "PASS" in out.stdout


@pytest.mark.slow
def test_inspect(workdir):
    out = cli("inspect", "mlp", "--records", cwd=workdir, check_rc=0)
    assert "AddMM" in out.stdout and "constants: 10" in out.stdout and "every primitive has a handler" in out.stdout
    assert "Transpose perm=[1, 0]" in out.stdout and "AddMM alpha=1 beta=1" in out.stdout
    out = cli("inspect", "llama", "--records", "--json", cwd=workdir, check_rc=0)
    data = json.loads(out.stdout)
    assert data["no_handler"] == [] and data["constants"]["count"] > 0 and data["constants"]["bytes"] > 0
    reduce = next(r for r in data["records"] if r["name"] == "Reduce")
    assert reduce["arguments"] == {"type": "Sum", "axes": "[2]"}
    assert sum(p["count"] for p in data["primitives"].values()) == len(data["records"])


@pytest.mark.slow
def test_unsupported_primitive(workdir, capsys):
    out = cli("export", "usermod:qr", "-o", "qr.onnx", cwd=workdir, check_rc=3)
    assert "QRF" in out.stderr and "Nothing was written" in out.stderr and not (workdir / "qr.onnx").exists()
    rc, stdout, _ = inprocess("inspect", "usermod:qr", cwd=workdir, capsys=capsys)
    assert rc == 3 and "refused: QRF (x1)" in stdout


def test_inspect_names_primitives_without_a_handler(workdir, capsys, monkeypatch):
    monkeypatch.delitem(mlx2onnx.translate.registry._HANDLERS, "Sin")
    rc, stdout, _ = inprocess("inspect", "usermod:other", "-i", "x=3", cwd=workdir, capsys=capsys)
    assert rc == 3 and "no handler: Sin (x1)" in stdout
    rc, _, err = inprocess("export", "usermod:other", "-i", "x=3", "-o", "sin.onnx", cwd=workdir, capsys=capsys)
    assert rc == 3 and "no ONNX handler" in err and "Sin (x1)" in err and not (workdir / "sin.onnx").exists()


@pytest.mark.slow
def test_usage_errors(workdir, capsys):
    out = cli("export", "usermod:nope", "-o", "x.onnx", cwd=workdir, check_rc=2)
    assert "no attribute 'nope'" in out.stderr and "make" in out.stderr  # lists what exists
    out = cli("export", "no_such_module:make", "-o", "x.onnx", cwd=workdir, check_rc=2)
    assert "no module named 'no_such_module'" in out.stderr
    out = cli("export", "usermod:gelu", "-o", "x.onnx", "-i", "x=4xA:float32", cwd=workdir, check_rc=2)
    assert "shape" in out.stderr and "4x32" in out.stderr
    for args, message in [
        (("-i", "x=4x5:float33"), "unknown dtype"),
        (("-i", "x=4x5:int32:9..1"), "range"),
        (("-i", "y=4x5"), "no parameter 'y'"),
        ((), "--input"),
        (("--opset", "9", "-i", "x=3"), "opset=9"),
    ]:
        rc, _, err = inprocess("export", "usermod:gelu", "-o", "x.onnx", *args, cwd=workdir, capsys=capsys)
        assert rc == 2 and message in err, (args, err)
    rc, _, err = inprocess("export", "nothing_here", "-o", "x.onnx", cwd=workdir, capsys=capsys)
    assert rc == 2 and "reference model" in err
    rc, _, _ = inprocess("export", "mlp", cwd=workdir, capsys=capsys)  # argparse: -o is required
    assert rc == 2
    assert not (workdir / "x.onnx").exists()


@pytest.mark.slow
def test_user_code_error_shows_the_users_traceback(workdir, capsys):
    out = cli("export", "usermod:broken", "-o", "x.onnx", "-i", "x=3", cwd=workdir, check_rc=4)
    assert "RuntimeError: user bug in helper" in out.stderr
    assert "usermod.py" in out.stderr and "in helper" in out.stderr and "in broken" in out.stderr
    assert "mlx2onnx/capture/" not in out.stderr and "mlx2onnx/cli/" not in out.stderr
    (workdir / "badimport.py").write_text("import mlx.core as mx\nvalue = 1 / 0\n")
    rc, _, err = inprocess("inspect", "badimport.py:value", cwd=workdir, capsys=capsys)
    assert rc == 4 and "ZeroDivisionError" in err and 'badimport.py", line 2' in err


@pytest.mark.slow
def test_mismatching_models(workdir, capsys):
    if not (workdir / "mlp.onnx").exists():
        cli("export", "mlp", "-o", "mlp.onnx", cwd=workdir, check_rc=0)
    out = cli("check", "mlp.onnx", "encoder", cwd=workdir, check_rc=1)
    assert "does not match" in out.stderr
    cli("export", "usermod:gelu", "-o", "gelu32.onnx", "-i", "x=3x4", cwd=workdir, check_rc=0)
    out = cli("check", "gelu32.onnx", "usermod:other", "-i", "x=3x4", cwd=workdir, check_rc=1)
    assert "parity FAILED" in out.stdout and "FAIL" in out.stdout and "--localize" in out.stdout
    rc, _, err = inprocess("check", "missing.onnx", "mlp", cwd=workdir, capsys=capsys)
    assert rc == 2 and "no such model file" in err
    rc, stdout, _ = inprocess(
        "check", "gelu32.onnx", "usermod:gelu", "-i", "x=3x5", "--json", cwd=workdir, capsys=capsys
    )
    assert rc == 1 and "float32[3, 4]" in json.loads(stdout)["problem"]


@pytest.mark.slow
def test_primitives_table(workdir, capsys):
    out = cli("primitives", "--json", cwd=workdir, check_rc=0)
    rows = json.loads(out.stdout)
    handled = {r["primitive"] for r in rows if r["status"].startswith("handled")}
    assert handled == set(mlx2onnx.supported_primitives())
    assert {r["primitive"] for r in rows if r["status"] == "refused"} == set(mlx2onnx.translate.registry.refusals())
    assert all(r["note"] for r in rows if r["status"] != "missing")
    rc, stdout, _ = inprocess("primitives", "--status", "refused", cwd=workdir, capsys=capsys)
    assert rc == 0 and all(name in stdout for name in mlx2onnx.translate.registry.refusals())
    assert "Add " not in stdout


def test_input_specs_and_record_decoding():
    from mlx2onnx.capture import records
    from mlx2onnx.errors import UsageError
    from mlx2onnx.specs import parse_input_spec

    spec = parse_input_spec("ids=2,8:int32:0..128")
    assert (spec.name, spec.shape, str(spec.dtype), spec.low, spec.high) == ("ids", (2, 8), "mlx.core.int32", 0, 128)
    assert parse_input_spec("()").shape == () and parse_input_spec("[3x4]:bf16").shape == (3, 4)
    for bad in ("x=", "x=4x-1", "1x=2", "x=3:float32:1"):
        with pytest.raises(UsageError):
            parse_input_spec(bad)
    assert records.describe("Reduce", [2, [1]]) == "type=Sum axes=[1]"
    assert records.describe("Scatter", [4, [0]]) == "reduce=None axes=[0]"
    assert records.describe("BitwiseBinary", [4]) == "op=RightShift"
    assert records.describe("Log", [0]) == "base=two"
    assert records.describe("Convolution", [[2], [1], [1], [1], [1], 1, False]) == (
        "kernel_strides=[2] padding_lo=[1] padding_hi=[1] kernel_dilation=[1] input_dilation=[1] groups=1 flip=False"
    )
    assert records.describe("Frobnicate", [7]) == "arg0=7"
    assert records.decode("Reduce", [2, [1]]).type == records.ReduceType.Sum == 2
    assert records.missing_fields("FFT", [[1], False, False]) == []
    assert records.missing_fields("Reduce", [2]) == ["axes"]


@pytest.mark.slow
def test_dynamic_dimensions(workdir, capsys):
    out = cli(
        "export",
        "llama",
        "-o",
        "dyn.onnx",
        "--dynamic",
        "input_ids:0=batch,1=seq",
        "--check",
        "--sizes",
        "batch=1,3",
        "--sizes",
        "seq=1,9",
        cwd=workdir,
        check_rc=0,
    )
    assert "input  input_ids: int32[batch, seq]" in out.stdout and "parity PASSED" in out.stdout
    for at in ("[batch=1 seq=1]", "[batch=3 seq=9]"):
        assert at in out.stdout
    out = cli("check", "dyn.onnx", "llama", "--sizes", "seq=4,70", "--json", cwd=workdir, check_rc=0)
    report = json.loads(out.stdout)
    assert report["passed"] and [o["at"] for o in report["outputs"]] == ["batch=2 seq=4", "batch=2 seq=70"]
    # the model's dynamic symbols, and only those, can be given sizes
    rc, out, err = inprocess("check", "dyn.onnx", "llama", "--sizes", "rows=3", cwd=workdir, capsys=capsys)
    assert rc == 2 and "'rows'" in err and "batch" in err
    out = cli(
        "export",
        "encoder",
        "-o",
        "enc.onnx",
        "--dynamic",
        "input_ids:0=batch,1=seq:..512",
        "--dynamic",
        "attention_mask:0=batch,1=seq:..512",
        "--check",
        cwd=workdir,
        check_rc=0,
    )
    assert "input  input_ids: int32[batch, seq]" in out.stdout and "parity PASSED" in out.stdout
    proto = onnx.load(str(workdir / "enc.onnx"))
    meta = json.loads({p.key: p.value for p in proto.metadata_props}["mlx2onnx.dynamic"])
    assert meta["range"]["seq"] == [1, 512]
    for spec, message in [
        ("input_ids:0=batch,1=se-q", "not AXIS=SYMBOL"),
        ("ids:0=batch", "input 'ids'"),
        ("input_ids:1=seq:4..", "not AXIS=SYMBOL[%N][:MIN..MAX]"),
        ("input_ids:1=seq:0..8", "min=0): a positive integer"),
        ("input_ids:5=batch", "axis 5"),
        ("input_ids", "not NAME:AXIS=SYMBOL"),
    ]:
        rc, _, err = inprocess("export", "llama", "-o", "bad.onnx", "--dynamic", spec, cwd=workdir, capsys=capsys)
        assert rc == 2 and message in err, (spec, err)
    out = cli(
        "export",
        "usermod:loop_over_half_the_rows",
        "-i",
        "x=3x4",
        "-o",
        "bad.onnx",
        "--dynamic",
        "x:0=rows",
        cwd=workdir,
        check_rc=3,
    )
    assert "dimension 0 ('rows') of input 'x' cannot be dynamic" in out.stderr
    assert not (workdir / "bad.onnx").exists()
