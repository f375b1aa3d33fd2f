"""Hostile and odd inputs: each gives a clear error (or the right model) and leaves no file.

Complements tests/api/test_api.py (which covers None/str/list/object positional inputs, a
function returning None, existing paths with overwrite=False and a missing directory)."""

from __future__ import annotations

import importlib
import os
import sys

import mlx.core as mx
import numpy as np
import onnx
import pytest

import mlx2onnx
from mlx2onnx.io import saving as save_module
from tests.support.harness import rand, rng_for

capture_module = importlib.import_module("mlx2onnx.capture.tracing")


@pytest.fixture
def x():
    return rand(rng_for("hostile"), (2, 3))


def export_to(tmp_path, fn, *args, **kwargs):
    return mlx2onnx.Exporter(path=tmp_path / "m.onnx").export(fn, *args, **kwargs)


def assert_refused(tmp_path, error, match, fn, *args, **kwargs):
    with pytest.raises(error, match=match):
        export_to(tmp_path, fn, *args, **kwargs)
    assert list(tmp_path.iterdir()) == [], "a failed export left files behind"


# -- inputs -------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [None, "text", b"bytes", object(), 1 + 2j])
def test_non_array_keyword_inputs(tmp_path, x, bad):
    assert_refused(tmp_path, mlx2onnx.CaptureError, "keyword input 'y' is a", lambda a, y=None: a, x, y=bad)


@pytest.mark.parametrize("nested", ["tuple", "dict"])
def test_nested_containers(tmp_path, x, nested):
    inner = (x, (x,)) if nested == "tuple" else {"b": {"c": x}}
    assert_refused(tmp_path, mlx2onnx.CaptureError, "Nested containers are not inputs", lambda a, b: a, x, inner)


def test_keyword_names_must_be_strings(tmp_path, x):
    assert_refused(tmp_path, mlx2onnx.CaptureError, "must be strings, got 1", lambda **k: k["a"], {"a": x, 1: x})


def test_not_a_function(tmp_path, x):
    assert_refused(tmp_path, mlx2onnx.CaptureError, "expected a function", 3, x)


def test_python_scalars_are_constants_not_inputs(tmp_path, x):
    model = export_to(tmp_path, lambda a, s, flag: a * s if flag else a, x, 2.5, True)
    assert [i.name for i in model.graph.input] == ["a"]
    assert mlx2onnx.verify(tmp_path / "m.onnx", lambda a: a * 2.5, x)


def test_no_array_inputs_at_all(tmp_path):
    model = export_to(tmp_path, lambda s: mx.arange(4) * s, 3)
    assert len(model.graph.input) == 0
    assert mlx2onnx.verify(model, lambda: mx.arange(4) * 3)


# -- dtypes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda a: a.astype(mx.complex64), lambda a: mx.fft.fft(a)], ids=["astype", "fft"])
def test_complex_outputs(tmp_path, x, make):
    assert_refused(tmp_path, mlx2onnx.ConversionError, "complex64.*mx.real", make, x)


def test_float64_without_an_onnxruntime_kernel_fails_clearly_at_run_time(tmp_path):
    """float64 Erf is valid ONNX (so the export succeeds), but onnxruntime's CPU provider
    has no kernel for it: the parity check says so, naming the op."""
    with mx.stream(mx.cpu):
        x = mx.array(np.random.default_rng(0).standard_normal((2, 3))).astype(mx.float64)
        model = mlx2onnx.export(mx.erf, x)
        assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
        with pytest.raises(mlx2onnx.VerificationError, match="onnxruntime could not run.*Erf"):
            mlx2onnx.verify(model, mx.erf, x)


# -- outputs --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "fn, match",
    [
        (lambda a: (), "returned nothing"),
        (lambda a: {}, "returned nothing"),
        (lambda a: [], "returned nothing"),
        (lambda a: 1.5, "returned a float"),
        (lambda a: "a", "returned a str"),
        (lambda a: (a, 3), "output '1' is a int, not an array"),
        (lambda a: {"y": a, "n": None}, "output 'n' is a NoneType"),
    ],
    ids=["empty-tuple", "empty-dict", "empty-list", "float", "str", "tuple-with-int", "dict-with-none"],
)
def test_functions_returning_no_arrays(tmp_path, x, fn, match):
    assert_refused(tmp_path, mlx2onnx.CaptureError, match, fn, x)


def test_function_returning_an_input_unchanged(tmp_path, x):
    model = export_to(tmp_path, lambda a, b: (a, b + 1), x, x + 1)
    assert [n.op_type for n in model.graph.node if n.output[0] == "output_0"] == ["Identity"]
    assert mlx2onnx.verify(tmp_path / "m.onnx", lambda a, b: (a, b + 1), x, x + 1)


def test_same_array_returned_twice(tmp_path, x):
    def fn(a):
        y = mx.exp(a)
        return y, y, {"again": y}

    model = export_to(tmp_path, fn, x)
    assert len(model.graph.output) == 3 and len({o.name for o in model.graph.output}) == 3
    assert mlx2onnx.verify(tmp_path / "m.onnx", fn, x)


def test_numpy_conversion_inside_the_function_names_the_line(tmp_path, x):
    assert_refused(
        tmp_path, mlx2onnx.CaptureError, "evaluates an array while the function is traced", lambda a: np.array(a), x
    )


# -- functions MLX refuses to export ---------------------------------------------------------
def test_lazily_loaded_weights(tmp_path, x):
    weights = tmp_path / "w.safetensors"
    mx.save_safetensors(str(weights), {"w": mx.ones((3,))})
    lazy = mx.load(str(weights))["w"]
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(mlx2onnx.CaptureError, match=r"primitive Load: .*mx.eval them first.*MLX said"):
        mlx2onnx.Exporter(path=out / "m.onnx").export(lambda a: a + lazy, x)
    assert list(out.iterdir()) == []
    mx.eval(lazy)  # the advice works
    assert mlx2onnx.verify(mlx2onnx.export(lambda a: a + lazy, x), lambda a: a + lazy, x)


def test_checkpointed_function(tmp_path, x):
    assert_refused(
        tmp_path,
        mlx2onnx.CaptureError,
        "CustomTransforms: mx.custom_function / mx.checkpoint",
        lambda a: mx.checkpoint(lambda t: t * 2)(a),
        x,
    )


def test_compiled_helper_on_constants_is_inlined(tmp_path, x):
    """MLX refuses Compiled nodes; mlx2onnx turns compilation off while tracing, so a
    compiled helper applied to a constant exports (and the explanation exists for the
    case where it cannot be turned off)."""
    helper = mx.compile(lambda t: t * 2 + 1)
    w = mx.ones((3,))
    fn = lambda a: a + helper(w)  # noqa: E731
    export_to(tmp_path, fn, x)
    assert mlx2onnx.verify(tmp_path / "m.onnx", fn, x)
    text = capture_module._explain_mlx_error(
        RuntimeError("[export_function] Unable to get state for primitive Compiled")
    )
    assert "mx.compile" in text and "MLX said" in text


def test_unknown_mlx_refusal_is_explained():
    text = capture_module._explain_mlx_error(RuntimeError("[export_function] Unable to get state for primitive Foo"))
    assert "MLX cannot export primitive Foo" in text and "rewrite that part" in text


# -- output paths ----------------------------------------------------------------------------
def test_output_path_is_a_directory(tmp_path, x):
    (tmp_path / "d.onnx").mkdir()
    with pytest.raises(mlx2onnx.ExportOptionError, match="is a directory"):
        mlx2onnx.Exporter(path=tmp_path / "d.onnx").export(mx.abs, x)
    assert [p.name for p in tmp_path.iterdir()] == ["d.onnx"] and not any((tmp_path / "d.onnx").iterdir())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")
def test_unwritable_directory_even_for_root(x):
    """os.access() says every directory is writable for root; the check tries it."""
    with pytest.raises(mlx2onnx.ExportOptionError, match="'/proc' is not writable"):
        mlx2onnx.Exporter(path="/proc/m.onnx").export(mx.abs, x)
    assert not os.path.exists("/proc/m.onnx")


def test_unwritable_directory(tmp_path, x, monkeypatch):
    monkeypatch.setattr(save_module.os, "access", lambda path, mode: False)
    with pytest.raises(mlx2onnx.ExportOptionError, match="is not writable"):
        mlx2onnx.Exporter(path=tmp_path / "m.onnx").export(mx.abs, x)
    assert list(tmp_path.iterdir()) == []


def test_existing_path_is_kept_on_a_failed_export(tmp_path, x):
    out = tmp_path / "m.onnx"
    mlx2onnx.Exporter(path=out).export(mx.abs, x)
    previous = out.read_bytes()
    with pytest.raises(mlx2onnx.CaptureError):
        mlx2onnx.Exporter(path=out, overwrite=True).export(lambda a: None, x)
    assert out.read_bytes() == previous
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]


# -- models over 2 GB -------------------------------------------------------------------------
def big_model_fn():
    w = mx.array(np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32))
    return lambda a: a @ w


def test_over_two_gigabytes_failed_save_leaves_nothing(tmp_path, monkeypatch):
    """With the limit lowered to 1 KB, a model "over 2 GB" goes to external data; if the
    save fails half-way neither the model nor the data file is left behind."""
    monkeypatch.setattr(save_module, "EXTERNAL_DATA_THRESHOLD", 1024)
    fn = big_model_fn()

    def broken(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(save_module.onnx.checker, "check_model", broken)
    with pytest.raises(OSError, match="simulated"):
        mlx2onnx.Exporter(path=tmp_path / "big.onnx").export(fn, rand(rng_for("big"), (2, 64)))
    assert list(tmp_path.iterdir()) == []


def test_over_two_gigabytes_goes_to_external_data_beside_the_model(tmp_path, monkeypatch):
    monkeypatch.setattr(save_module, "EXTERNAL_DATA_THRESHOLD", 1024)
    fn = big_model_fn()
    x = rand(rng_for("big"), (2, 64))
    model = mlx2onnx.Exporter(path=tmp_path / "big.onnx").export(fn, x)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    locations = {e.value for t in model.graph.initializer for e in t.external_data if e.key == "location"}
    assert locations == {"big.onnx.data"}
    assert mlx2onnx.verify(tmp_path / "big.onnx", fn, x)
