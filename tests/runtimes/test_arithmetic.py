"""Each runtime at its default settings, as a user runs a file: which arithmetic it chooses
for float32 and 4-bit exports, and what the check says about it.

The check runs a runtime with the options the user gives (none: its defaults) and, where
the runtime then computes with less precision than MLX, names that arithmetic in its
report and compares float outputs at its tolerance. Every claim is held against the
runtime: a report that names no trade must match MLX at float32 tolerance, and one that
names a trade must really differ from MLX beyond float32 tolerance (else the trade is
not there). ``docs/runtimes.md`` shows these numbers (``scripts/generate_docs.py``).
"""

from __future__ import annotations

import mlx.nn as nn
import numpy as np
import pytest

import mlx2onnx
from mlx2onnx.verify import runtimes
from mlx2onnx.verify.compare import DEFAULT_TOLERANCES
from mlx2onnx.verify.runtimes import arithmetic, openvino_cpu
from tests.support import zoo
from tests.support.harness import ort_session

RUNTIMES = ("onnxruntime", "onnxruntime-web", "onnxruntime-node", "openvino", "tract")
FLOAT32 = DEFAULT_TOLERANCES["float32"]
ACCURACY_ZERO = {arithmetic.ORT_ACCURACY_KEY: "0"}


def _llama(bits=None):
    model = zoo.mlx_lm_model("llama")
    if bits:
        nn.quantize(model, group_size=32, bits=bits)
    return model


# name -> (model factory, export options)
MODELS = {
    "mlx-lm llama": (_llama, {}),
    "mlx-lm llama 4-bit": (lambda: _llama(4), {}),
    "mlx-lm llama 4-bit, int8_activations=True": (lambda: _llama(4), {"int8_activations": True}),
    "mlx-lm llama 4-bit, quantized_weights='dequantizelinear'": (
        lambda: _llama(4),
        {"quantized_weights": "dequantizelinear"},
    ),
}
# (model, runtime) pairs the runtime cannot load, with the reason it gives
REFUSED = {("mlx-lm llama 4-bit, quantized_weights='dequantizelinear'", "tract"): "Unknown DatumType Uint4"}
# the settings that give MLX's numbers where a runtime's defaults do not (docs/runtimes.md)
EXACT_SETTINGS = {"onnxruntime": ACCURACY_ZERO, "onnxruntime-node": ACCURACY_ZERO, "openvino": openvino_cpu.EXACT}


def _needs(runtime: str) -> None:
    if not runtimes.available(runtime):
        pytest.skip(f"{runtime} is not installed: {runtimes.install_hint(runtime)}")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder, cache = tmp_path_factory.mktemp("defaults"), {}

    def get(name):
        if name not in cache:
            build, options = MODELS[name]
            model, ids = build(), zoo.lm_tokens((2, 7))
            path = folder / f"{len(cache)}.onnx"
            mlx2onnx.Exporter(path=path, **options).export(model, ids)
            cache[name] = (path, model, ids)
        return cache[name]

    return get


def at_defaults(runtime: str, path, model, ids, **options):
    """The report of the check at the runtime's defaults, and the same comparison held at
    float32 tolerance whatever the arithmetic (what a float32 check would have said)."""
    report = mlx2onnx.Verifier(runtime=runtime, compare_weights=False, **options).verify(path, model, ids)
    strict = {row: FLOAT32 for row in ("float32", "bfloat16", "float16", arithmetic.INT8_ACTIVATIONS)}
    held = mlx2onnx.Verifier(runtime=runtime, compare_weights=False, tolerances=strict, **options).verify(
        path, model, ids
    )
    return report, held


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_check_names_the_arithmetic_a_default_runtime_chooses(exported, name, runtime):
    _needs(runtime)
    path, model, ids = exported(name)
    if (name, runtime) in REFUSED:
        with pytest.raises(mlx2onnx.Mlx2OnnxError, match=REFUSED[(name, runtime)]):
            at_defaults(runtime, path, model, ids)
        return
    report, held = at_defaults(runtime, path, model, ids)
    assert report.runtime_options == {}
    assert held.arithmetic == report.arithmetic
    if not report.arithmetic:  # no trade named: MLX's numbers at float32 tolerance
        assert held.passed, str(held)
    else:  # a trade named: it is there (the numbers are not MLX's at float32 tolerance)
        assert not held.passed, str(held)
        assert any(o.dtype.startswith("float32(") for o in report.outputs), str(report)


@pytest.mark.node
def test_default_4bit_exports_match_mlx_in_default_onnxruntime_sessions(exported):
    """The default 4-bit form carries float32 arithmetic in the file: plain sessions of
    onnxruntime (Python, node, web) give MLX's numbers."""
    path, model, ids = exported("mlx-lm llama 4-bit")
    for runtime in ("onnxruntime", "onnxruntime-node", "onnxruntime-web"):
        if not runtimes.available(runtime):
            continue
        report, _ = at_defaults(runtime, path, model, ids)
        assert report.passed and not report.arithmetic, str(report)
        assert report.outputs[0].max_abs_error < 1e-4


@pytest.mark.parametrize("runtime", ["onnxruntime", "onnxruntime-node"])
def test_int8_activations_are_named_and_checked_at_their_tolerance(exported, runtime):
    _needs(runtime)
    path, model, ids = exported("mlx-lm llama 4-bit, int8_activations=True")
    report, held = at_defaults(runtime, path, model, ids)
    assert [a.split(" (")[0] for a in report.arithmetic] == ["int8 activations in 4-bit products"], str(report)
    assert "MatMulNBits node(s) carry accuracy_level 4" in report.arithmetic[0]
    assert report.outputs[0].dtype == "float32(int8-activations)"
    assert report.passed and not held.passed, str(held)


@pytest.mark.parametrize("runtime", ["onnxruntime", "onnxruntime-node"])
def test_standard_4bit_blocks_follow_the_sessions_accuracy_level(exported, runtime):
    """DequantizeLinear + MatMul: a default session fuses it with int8 activations (named,
    and really off MLX); the deployment's setting, given to the check, makes it exact."""
    _needs(runtime)
    path, model, ids = exported("mlx-lm llama 4-bit, quantized_weights='dequantizelinear'")
    report, held = at_defaults(runtime, path, model, ids)
    assert "fused into MatMulNBits at the session's default" in report.arithmetic[0], str(report)
    assert not held.passed
    exact, _ = at_defaults(runtime, path, model, ids, runtime_options=ACCURACY_ZERO)
    assert exact.passed and not exact.arithmetic and exact.runtime_options == ACCURACY_ZERO, str(exact)
    basic = mlx2onnx.Verifier(runtime=runtime, graph_optimization_level="basic", compare_weights=False)
    report = basic.verify(path, model, ids)  # no fusion below the extended level
    assert report.passed and not report.arithmetic, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_openvino_defaults_are_reported_and_its_exact_settings_match(exported, name):
    _needs("openvino")
    import openvino as ov

    path, model, ids = exported(name)
    report, _ = at_defaults("openvino", path, model, ids)
    compiled = ov.Core().compile_model(str(path), "CPU")
    precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
    assert any("inference precision" in a for a in report.arithmetic) == (precision != "f32"), str(report)
    if "4-bit" in name:
        assert any("DYNAMIC_QUANTIZATION_GROUP_SIZE=32" in a for a in report.arithmetic), str(report)
    exact, _ = at_defaults("openvino", path, model, ids, runtime_options=openvino_cpu.EXACT)
    assert exact.passed and not exact.arithmetic, str(exact)
    assert "INFERENCE_PRECISION_HINT=f32" in str(exact)


def test_runtime_options_are_validated():
    from mlx2onnx.errors import CheckOptionError

    with pytest.raises(CheckOptionError, match="tract takes no options"):
        mlx2onnx.Verifier(runtime="tract", runtime_options={"x": "1"})
    with pytest.raises(CheckOptionError, match="runtime_options="):
        mlx2onnx.Verifier(runtime_options={"x": None})


def test_the_report_lists_the_options_and_the_arithmetic(exported):
    path, model, ids = exported("mlx-lm llama 4-bit, int8_activations=True")
    report = mlx2onnx.Verifier(compare_weights=False).verify(path, model, ids)
    text = str(report)
    assert "onnxruntime options: none: its defaults" in text
    assert "onnxruntime computes with int8 activations in 4-bit products" in text
    data = report.to_dict()
    assert data["runtime_options"] == {} and data["arithmetic"] == list(report.arithmetic)


def test_static_prediction_of_fusion_matches_onnxruntimes_optimized_graph(exported, tmp_path):
    """The rule the check uses for DequantizeLinear + MatMul (fused at extended and all,
    at the session's accuracy level) is what onnxruntime writes in its optimized graph."""
    import onnx
    import onnxruntime as ort

    path, _, _ = exported("mlx-lm llama 4-bit, quantized_weights='dequantizelinear'")
    pairs = arithmetic.blocked_dequantize_matmuls(onnx.load(str(path), load_external_data=False))
    assert pairs > 0
    for level, enum in (
        ("basic", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
        ("extended", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED),
    ):
        options = ort.SessionOptions()
        options.graph_optimization_level = enum
        options.optimized_model_filepath = str(tmp_path / f"{level}.onnx")
        ort_session(str(path), options)
        optimized = onnx.load(str(tmp_path / f"{level}.onnx"))
        levels = arithmetic.matmul_nbits_levels(optimized)
        predicted = arithmetic.onnxruntime(onnx.load(str(path)), {}, level)
        assert (levels == [4] * pairs) == bool(predicted), (level, levels)
        assert np.all(np.array(levels, int) == 4) or not levels
