"""The Python API: calling conventions, names, options, errors, saving."""

from __future__ import annotations

import os

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest

import mlx2onnx
import mlx2onnx.exporter
from mlx2onnx.io import saving as save_module
from mlx2onnx.translate import registry
from mlx2onnx.translate.opset import MIN_OPSET, default_opset, ir_version_for, target_opset
from tests.support.harness import ort_session, rand, rng_for


def arrays(*shapes, seed="api"):
    rng = rng_for(seed, shapes)
    return [rand(rng, s) for s in shapes]


def session(model):
    return ort_session(model)


def test_keyword_inputs_are_named_by_keyword_and_accepted_in_any_order():
    def fun(x, *, scale, shift):
        return x * scale + shift

    x, scale, shift = arrays((2, 3), (2, 3), (2, 3))
    model = mlx2onnx.export(fun, x, shift=shift, scale=scale)
    assert [i.name for i in model.graph.input] == ["x", "scale", "shift"]  # MLX's order
    want = np.array(fun(x, scale=scale, shift=shift))
    sess = session(model)
    feeds = {"shift": np.array(shift), "x": np.array(x), "scale": np.array(scale)}
    for order in (["shift", "x", "scale"], ["scale", "shift", "x"]):
        got = sess.run(None, {k: feeds[k] for k in order})[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert mlx2onnx.verify(model, fun, x, scale=scale, shift=shift)


def test_positional_inputs_are_named_after_parameters():
    def fun(query, key):
        return query @ key.T

    q, k = arrays((2, 4), (3, 4))
    model = mlx2onnx.export(fun, q, k)
    assert [i.name for i in model.graph.input] == ["query", "key"]
    assert [o.name for o in model.graph.output] == ["output_0"]


def test_var_positional_and_unnamed_inputs_fall_back():
    def fun(*xs):
        return xs[0] + xs[1]

    a, b = arrays((2,), (2,))
    model = mlx2onnx.export(fun, a, b)
    assert [i.name for i in model.graph.input] == ["xs_0", "xs_1"]
    model = mlx2onnx.export(mx.add, a, b)
    assert len({i.name for i in model.graph.input}) == 2


def test_tuple_and_dict_calling_conventions():
    def fun(x, y):
        return x - y

    x, y = arrays((3,), (3,))
    by_tuple = mlx2onnx.export(fun, (x, y))
    by_dict = mlx2onnx.export(fun, {"x": x, "y": y})
    by_both = mlx2onnx.export(fun, (x,), {"y": y})
    assert [i.name for i in by_tuple.graph.input] == ["x", "y"]
    assert [i.name for i in by_dict.graph.input] == ["x", "y"]
    assert [i.name for i in by_both.graph.input] == ["x", "y"]
    assert mlx2onnx.verify(by_both, fun, (x,), {"y": y})


def test_export_options_never_collide_with_function_keywords():
    def fun(x, *, opset, path):  # keyword inputs that share names with options
        return x + opset * path

    x, o, p = arrays((2,), (2,), (2,))
    model = mlx2onnx.Exporter(opset=MIN_OPSET).export(fun, x, opset=o, path=p)
    assert [i.name for i in model.graph.input] == ["x", "opset", "path"]
    assert model.opset_import[0].version == MIN_OPSET
    assert mlx2onnx.verify(model, fun, x, opset=o, path=p)


def test_input_and_output_names_can_be_chosen():
    def fun(a, b):
        return a + b, a * b

    a, b = arrays((2,), (2,))
    model = mlx2onnx.Exporter(input_names={"a": "left"}, output_names=["sum", "product"]).export(fun, a, b)
    assert [i.name for i in model.graph.input] == ["left", "b"]
    assert [o.name for o in model.graph.output] == ["sum", "product"]
    assert mlx2onnx.verify(model, fun, a, b)
    with pytest.raises(mlx2onnx.ExportOptionError, match="2 arrays"):
        mlx2onnx.Exporter(output_names=["only"]).export(fun, a, b)
    with pytest.raises(mlx2onnx.ExportOptionError, match="unknown inputs"):
        mlx2onnx.Exporter(input_names={"c": "x"}).export(fun, a, b)


def test_dict_outputs_are_named_by_key():
    def fun(x):
        return {"logits": x * 2, "probs": mx.softmax(x, axis=-1)}

    (x,) = arrays((2, 5))
    model = mlx2onnx.export(fun, x)
    assert [o.name for o in model.graph.output] == ["logits", "probs"]
    assert mlx2onnx.verify(model, fun, x)


def test_identity_and_repeated_outputs():
    def fun(x):
        y = x + 1
        return x, y, y

    (x,) = arrays((3,))
    model = mlx2onnx.export(fun, x)
    assert len({o.name for o in model.graph.output}) == 3
    assert mlx2onnx.verify(model, fun, x)


def test_python_scalars_are_baked_in_like_mlx_does():
    def fun(x, power, bias=0.5):
        return x**power + bias

    (x,) = arrays((4,))
    model = mlx2onnx.export(fun, x, 2)
    assert [i.name for i in model.graph.input] == ["x"]
    assert mlx2onnx.verify(model, fun, x, 2)
    half = x.astype(mx.float16)
    model16 = mlx2onnx.export(fun, half, 3)  # a weak scalar keeps float16, as in MLX
    assert model16.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_modules_and_bound_methods():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 3)

        def __call__(self, x):
            return self.proj(x)

        def scores(self, x):
            return mx.softmax(self.proj(x), axis=-1)

    net = Net()  # parameters deliberately not evaluated: export must evaluate them
    (x,) = arrays((2, 4))
    for fun in (net, net.scores):
        model = mlx2onnx.export(fun, x)
        names = {i.name for i in model.graph.initializer}
        assert {"proj.weight", "proj.bias"} <= names
        assert mlx2onnx.verify(model, fun, x)


def test_constants_are_deduplicated_by_content():
    w = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))
    w_copy = mx.array(np.arange(12, dtype=np.float32).reshape(3, 4))

    def fun(x):
        return x @ w.T + x @ w_copy.T

    (x,) = arrays((2, 4))
    model = mlx2onnx.Exporter(optimize=False).export(fun, x)
    big = [i for i in model.graph.initializer if list(i.dims) == [3, 4]]
    assert len(big) == 1
    lean = mlx2onnx.export(fun, x)  # the passes fold the transposes, still sharing one copy
    assert len([i for i in lean.graph.initializer if sorted(i.dims) == [3, 4]]) == 1
    assert mlx2onnx.verify(model, fun, x)


def test_unsupported_primitives_are_reported_at_once_and_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delitem(registry._HANDLERS, "Sin")
    monkeypatch.delitem(registry._HANDLERS, "Cos")

    def fun(x):
        return mx.sin(x) + mx.cos(x) * mx.sin(2 * x)

    (x,) = arrays((3,))
    out = tmp_path / "model.onnx"
    with pytest.raises(mlx2onnx.UnsupportedPrimitiveError) as info:
        mlx2onnx.Exporter(path=out).export(fun, x)
    message = str(info.value)
    assert "Sin (x2)" in message and "Cos (x1)" in message
    assert info.value.missing == {"Sin": 2, "Cos": 1}
    assert list(tmp_path.iterdir()) == []


def test_supported_primitives():
    names = mlx2onnx.supported_primitives()
    assert names == sorted(names)
    assert {"Add", "Matmul", "AddMM", "Reduce", "Softmax", "Gather"} <= set(names)


def test_registry_refuses_duplicates():
    with pytest.raises(registry.DuplicateRegistrationError, match="Add"):
        registry.handles("Add")(lambda ctx, rec: None)


def test_default_opset_is_recorded():
    (x,) = arrays((2,))
    model = mlx2onnx.export(mx.abs, x)
    assert model.opset_import[0].version == target_opset("portable") == min(24, default_opset())
    assert model.ir_version == ir_version_for(model.opset_import[0].version) <= 13  # onnxruntime-web's newest
    native = mlx2onnx.Exporter(target="onnxruntime").export(mx.abs, x)
    assert native.opset_import[0].version == default_opset()
    with pytest.raises(mlx2onnx.ExportOptionError, match="target='browser'"):
        mlx2onnx.Exporter(target="browser").export(mx.abs, x)
    with pytest.raises(mlx2onnx.ExportOptionError, match="opset=12"):
        mlx2onnx.Exporter(opset=12).export(mx.abs, x)


def test_save_is_atomic(tmp_path, monkeypatch):
    (x,) = arrays((2,))
    out = tmp_path / "m.onnx"

    def broken_check(*args, **kwargs):
        raise RuntimeError("disk full (simulated)")

    monkeypatch.setattr(save_module.onnx.checker, "check_model", broken_check)
    with pytest.raises(RuntimeError, match="simulated"):
        mlx2onnx.Exporter(path=out).export(mx.abs, x)
    assert list(tmp_path.iterdir()) == []


def test_existing_file_is_kept_unless_overwrite(tmp_path):
    """The API refuses an existing file by default, as the command line does; overwrite=True
    replaces only a model mlx2onnx wrote."""
    (x,) = arrays((2,))
    out = tmp_path / "m.onnx"
    out.write_bytes(b"keep me")
    with pytest.raises(mlx2onnx.ExportOptionError, match="already exists"):
        mlx2onnx.Exporter(path=out).export(mx.abs, x)
    with pytest.raises(
        mlx2onnx.ExportOptionError, match="not an ONNX model; --overwrite replaces only a model mlx2onnx"
    ):
        mlx2onnx.Exporter(path=out, overwrite=True).export(mx.abs, x)
    assert out.read_bytes() == b"keep me"
    foreign = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []), producer_name="pytorch")
    onnx.save(foreign, str(out))
    kept = out.read_bytes()
    with pytest.raises(mlx2onnx.ExportOptionError, match="written by 'pytorch'"):
        mlx2onnx.Exporter(path=out, overwrite=True).export(mx.abs, x)
    assert out.read_bytes() == kept
    out.unlink()
    mlx2onnx.Exporter(path=out).export(mx.abs, x)
    first = out.read_bytes()
    mlx2onnx.Exporter(path=out, overwrite=True).export(mx.negative, x)
    assert out.read_bytes() != first and onnx.load(str(out)).graph.node[0].op_type == "Neg"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_bad_output_paths_fail_before_tracing(tmp_path):
    (x,) = arrays((2,))
    with pytest.raises(mlx2onnx.ExportOptionError, match="does not exist"):
        mlx2onnx.Exporter(path=tmp_path / "missing" / "m.onnx").export(mx.abs, x)
    with pytest.raises(mlx2onnx.ExportOptionError, match=".onnx"):
        mlx2onnx.Exporter(path=tmp_path / "m.txt").export(mx.abs, x)


def test_external_data_above_the_protobuf_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(save_module, "EXTERNAL_DATA_THRESHOLD", 1024)
    monkeypatch.setattr(mlx2onnx.exporter, "needs_external_data", save_module.needs_external_data)
    w = mx.array(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))

    def fun(x):
        return x @ w

    (x,) = arrays((2, 64))
    out = tmp_path / "big.onnx"
    mlx2onnx.Exporter(path=out).export(fun, x)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.onnx", "big.onnx.data"]
    assert os.path.getsize(out) < 64 * 64 * 4
    assert mlx2onnx.verify(out, fun, x)


def test_user_errors_propagate_unchanged():
    def fun(x):
        raise KeyError("from the user's code")

    (x,) = arrays((2,))
    with pytest.raises(KeyError, match="user's code"):
        mlx2onnx.export(fun, x)


@pytest.mark.parametrize("bad", [None, "text", [1, [2]], object()])
def test_non_array_inputs_are_refused_clearly(bad):
    with pytest.raises(mlx2onnx.CaptureError, match="positional input 1"):
        mlx2onnx.export(lambda x, y: x, mx.ones(2), bad)


def test_function_returning_nothing_is_refused():
    with pytest.raises(mlx2onnx.CaptureError, match="returned nothing"):
        mlx2onnx.export(lambda x: None, mx.ones(2))


def test_verify_reports_device_and_errors():
    (x,) = arrays((3, 3))
    model = mlx2onnx.export(mx.exp, x)
    report = mlx2onnx.verify(model, mx.exp, x)
    assert report.passed and report.device == str(mx.default_device())
    assert report.outputs[0].max_abs_error < 1e-5
    wrong = mlx2onnx.verify(model, mx.sin, x)  # a mismatching function must fail
    assert not wrong.passed and wrong.outputs[0].mismatches > 0
    assert "FAIL" in str(wrong)


@pytest.mark.parametrize("storage", ["packed", "bytes", "dequantize", "dequantizelinear"])
def test_quantized_weight_storage_option(storage):
    """Each storage matches MLX in a default onnxruntime session, but the standard 4-bit
    blocks, which a default session fuses and computes with int8 activations: the check
    says so, and they match when the deployment turns that off."""
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32))
    mx.eval(model.parameters())
    nn.quantize(model, group_size=64, bits=4)
    (x,) = arrays((3, 64))
    proto = mlx2onnx.Exporter(quantized_weights=storage).export(model, x)
    op_types = {n.op_type for n in proto.graph.node}
    assert ("MatMulNBits" in op_types) == (storage == "packed")  # 4-bit blocks, float32 in the file
    assert ("DequantizeLinear" in op_types) == (storage == "dequantizelinear")  # standard 4-bit blocks
    assert ("Mod" in op_types) == (storage == "bytes")  # the codes are cut from the packed bytes
    report = mlx2onnx.verify(proto, model, x)
    if storage == "dequantizelinear":
        assert report.arithmetic and "int8 activations" in report.arithmetic[0], str(report)
        exact = mlx2onnx.Verifier(runtime_options={"session.qdq_matmulnbits_accuracy_level": "0"})
        report = exact.verify(proto, model, x)
    assert report.passed and not report.arithmetic, str(report)


def test_int8_activations_apply_to_the_packed_blocks_only():
    with pytest.raises(mlx2onnx.ExportOptionError, match="int8_activations=True applies to the 4-bit blocks"):
        mlx2onnx.Exporter(quantized_weights="bytes", int8_activations=True).export(mx.abs, mx.ones(2))


def test_unknown_quantized_weight_storage_is_refused():
    with pytest.raises(mlx2onnx.ExportOptionError, match="quantized_weights='int3'"):
        mlx2onnx.Exporter(quantized_weights="int3").export(mx.abs, mx.ones(2))


def test_verify_names_the_input_the_call_does_not_give():
    """The model's inputs are bound to the call's arrays by the export's metadata (one
    typed reader, io.metadata.input_bindings); an input the call lacks is named."""
    import mlx.core as mx
    import pytest

    import mlx2onnx
    from mlx2onnx.errors import VerificationError

    def masked(x, *, mask):
        return x * mask

    x = mx.random.normal((3, 4))
    model = mlx2onnx.export(masked, x, mask=mx.ones((3, 4)))
    with pytest.raises(VerificationError, match="keyword 'mask', which the call does not have"):
        mlx2onnx.verify(model, lambda x: x, x)
    with pytest.raises(VerificationError, match="positional array 0, but the call has 0 positional array"):
        mlx2onnx.verify(model, lambda *, mask: mask, mask=mx.ones((3, 4)))
