"""The pass pipeline's contracts, and the onnxscript rules it leaves out or replaces.

Each rule in ``passes.constants.EXCLUDED_RULES`` / ``REPLACED_RULES`` is left out because it
changes a value MLX computes. The tests here run onnxscript's own rule on a graph where
that happens and show the value changes (so a release of onnxscript that fixes the rule
makes the test fail, and the rule can come back), and run our rules on the same graph to
show the value does not.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnx_ir.passes.common import ShapeInferencePass
from onnxscript import rewriter
from onnxscript.rewriter.rules import common as onnxscript_rules

import mlx2onnx
from mlx2onnx import passes
from mlx2onnx.passes import base, constants
from mlx2onnx.translate.settings import ExportSettings
from tests.support.harness import rand, rng_for


def _model(nodes, inputs, output, initializers=(), opset=21):
    """The graph with an Identity before its output ``y`` (a rule does not replace a graph output)."""
    nodes = [
        helper.make_node(
            n.op_type,
            list(n.input),
            ["y_" if o == "y" else o for o in n.output],
            **{a.name: helper.get_attribute_value(a) for a in n.attribute},
        )
        for n in nodes
    ]
    nodes.append(helper.make_node("Identity", ["y_"], ["y"]))
    graph = helper.make_graph(nodes, "g", inputs, [output], initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _run(proto: onnx.ModelProto, feeds: dict) -> np.ndarray:
    """The value the ONNX spec gives (onnx.reference: onnxruntime casts float64 to float16
    through float32 itself, so it would hide the double rounding)."""
    return np.asarray(ReferenceEvaluator(proto).run(None, feeds)[0])


def _rewritten(proto: onnx.ModelProto, rules) -> onnx.ModelProto:
    model = ir.serde.deserialize_model(proto)
    rewriter.rewrite(model, pattern_rewrite_rules=rules)
    return ir.serde.serialize_model(model)


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _add_tiny():
    x = rand(rng_for("contracts.add0"), (4,)).__array__().astype(np.float32)
    x[0] = 0.0
    proto = _model(
        [helper.make_node("Add", ["x", "c"], ["y"])], [_f32("x", [4])], _f32("y", [4]), [_const("c", np.float32(1e-12))]
    )
    return proto, {"x": x}


def _cast_cast_from_double():
    # 1 + 2^-11 + 2^-40: to float16 directly rounds up, through float32 it ties to even (down)
    x = np.array([1 + 2.0**-11 + 2.0**-40, 0.1, 3.0], np.float64)
    proto = _model(
        [
            helper.make_node("Cast", ["x"], ["m"], to=TensorProto.FLOAT),
            helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT16),
        ],
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
        helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3]),
    )
    return proto, {"x": x}


EXCLUSIONS = {
    "add_0_rule": _add_tiny,
    "cast_cast_rule": _cast_cast_from_double,
}


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("rule", sorted(EXCLUSIONS))
def test_onnxscript_rule_is_still_inexact_and_ours_is_exact(rule):
    proto, feeds = EXCLUSIONS[rule]()
    want = _run(proto, feeds)
    theirs = _rewritten(proto, [getattr(onnxscript_rules, rule)])
    changed = [n.op_type for n in theirs.graph.node] != [n.op_type for n in proto.graph.node]
    wrong = not _same(_run(theirs, feeds), want)
    assert changed and wrong, (
        f"onnxscript's {rule} no longer changes this value: review passes/constants.py (it may come back)"
    )
    ours = _rewritten(proto, constants.rules())
    onnx.checker.check_model(ours, full_check=True)
    assert _same(_run(ours, feeds), want)


def test_reshape_matmul_collapse_is_still_unaligned_in_onnxscript():
    """einsum("bhwc,hkc->bhwk") with b == h, exported without passes: onnxscript's
    collapse pairs the wrong axes, ours leaves the Reshapes where they matter."""
    import mlx.core as mx

    def relative(q, t):
        return mx.einsum("bhwc,hkc->bhwk", q, t)

    rng = rng_for("contracts.einsum")
    q, t = rand(rng, (2, 2, 3, 4)), rand(rng, (2, 5, 4))
    proto = mlx2onnx.Exporter(check=False, optimize=False).export(relative, q, t)
    feeds = {proto.graph.input[0].name: np.asarray(q), proto.graph.input[1].name: np.asarray(t)}
    want = np.asarray(relative(q, t))

    def rewritten(rules):
        model = ir.serde.deserialize_model(proto)
        ShapeInferencePass()(model)
        rewriter.rewrite(model, pattern_rewrite_rules=rules)
        return ir.serde.serialize_model(model)

    theirs = rewritten(
        [onnxscript_rules.two_reshapes_matmul_reshape_rule, onnxscript_rules.one_reshape_matmul_reshape_rule]
    )
    assert "Reshape" not in [n.op_type for n in theirs.graph.node], "onnxscript's collapse no longer fires here"
    assert not np.allclose(_run(theirs, feeds), want, atol=1e-3), "onnxscript's collapse is exact now: review"
    ours = rewritten(constants.rules())
    np.testing.assert_allclose(_run(ours, feeds), want, rtol=1e-5, atol=1e-5)


def test_excluded_rules_are_not_in_the_pipeline():
    used = {id(rule) for rule in constants.rules()}
    for name in [*constants.EXCLUDED_RULES, *constants.REPLACED_RULES]:
        assert id(getattr(onnxscript_rules, name)) not in used, name
    assert not set(constants.EXCLUDED_RULES) & set(constants.TRUSTED_RULES)
    assert len(constants.rules()) == len(constants.TRUSTED_RULES)


def test_every_default_rule_of_onnxscript_is_trusted_or_excluded():
    """A new onnxscript default rule must be audited before it runs (or is listed as excluded)."""
    from onnxscript.rewriter.rules.common import __all__ as public

    rule_names = {n for n in public if n.endswith("_rule")}
    audited = set(constants.TRUSTED_RULES) | set(constants.EXCLUDED_RULES)
    defaults = {n for n in rule_names if _is_default(getattr(onnxscript_rules, n))}
    assert defaults <= audited, sorted(defaults - audited)


def _is_default(rule) -> bool:
    return any(rule is r for r in rewriter._DEFAULT_REWRITE_RULES)  # only read, in a test


def test_pipeline_names_are_unique_and_every_pass_states_its_contract():
    names = [p.name for p in passes.PIPELINE]
    assert len(names) == len(set(names))
    assert all(p.ensures for p in passes.PIPELINE)


def test_requirements_skip_a_pass_and_keep_it_out_of_the_report():
    model = mlx2onnx.Exporter(opset=17, check=False).export(
        lambda x: mlx2onnx_sample(x), rand(rng_for("contracts.low"), (2, 8))
    )
    report = _report(model)
    assert "fuse_rms_norm" not in report and "fuse_attention" not in report and "named_reshape_dims" not in report
    assert "fuse_layer_norm" in report and "cse_and_dce" in report


def mlx2onnx_sample(x):
    import mlx.core as mx

    return mx.fast.layer_norm(x, None, None, 1e-5) * 2


def _report(model: onnx.ModelProto) -> dict:
    import json

    meta = {p.key: p.value for p in model.metadata_props}
    return json.loads(meta["mlx2onnx.passes"])


def test_a_pass_that_renames_an_output_breaks_the_contract():
    def rename(model):
        model.graph.outputs[0].name = "renamed"
        return 1

    proto, _ = _add_tiny()
    model = ir.serde.deserialize_model(proto)
    bad = base.Pass("rename", rename, "nothing")
    with pytest.raises(base.PassContractError, match="rename changed the graph outputs"):
        base.run([bad], model, ExportSettings(opset=21))
