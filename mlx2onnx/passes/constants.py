"""Constant folding and onnxscript's exact rewrite rules, in a loop to a fixed point.

Only onnxscript's public API is used: :func:`onnxscript.optimizer.fold_constants` and the
rules :mod:`onnxscript.rewriter.rules.common` exports by name. :data:`TRUSTED_RULES` lists
the rules we run, in onnxscript's own order, each audited to give the values MLX
computes; :data:`REPLACED_RULES` are replaced by our exact versions
(:mod:`.exact_rules`); :data:`EXCLUDED_RULES` are left out, each for the reason given.
The onnxscript version is pinned in pyproject.toml and ``tests/passes/test_pass_contracts.py`` shows
that each exclusion still matters.
"""

from __future__ import annotations

import logging

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript import optimizer, rewriter
from onnxscript.rewriter.rules import common as onnxscript_rules

from ..translate.markers import KEEP_PACKED, is_parameter
from ..translate.opset import has
from .exact_rules import exact_rules
from .graph import const_eval, initializer, named_shape, replace_value, slice_bounds


# onnxscript's default rules that rewrite to the same values by construction, in its order
class _MultiOutputNotice(logging.Filter):
    """onnxscript's folder warns on every node with several outputs it leaves unfolded (the
    Split of a threefry draw); leaving them is expected here, not news for the user."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "with multiple outputs" not in str(record.msg)


logging.getLogger(optimizer.constant_folding.__name__).addFilter(_MultiOutputNotice())

TRUSTED_RULES = (
    "two_reshapes_matmul_reshape_rule",
    "one_reshape_matmul_reshape_rule",
    "cast_constant_of_shape_rule",
    "cast_constant_of_shape_without_value_rule",
    "collapse_slice_rule",
    "collapse_slice2_rule",
    "materialize_reshape_shape_rule",
    "min_min_rule",
    "max_max_rule",
    "min_max_rule",
    "max_min_rule",
    "successive_clip_relu_rule",
    "successive_relu_clip_rule",
    "successive_relu_rule",
    "successive_clip_rule",
    "cast_cast_rule",
    "no_op_cast_rule",
    "no_op_expand_rule",
    "flatten_to_reshape_rule",
    "reshape_reshape_rule",
    "no_op_transpose_rule",
    "transpose_transpose_rule",
    "unsqueeze_unsqueeze_rule",
    "squeeze_reshape_1d_rule",
    "no_op_dynamic_scatter_nd_rule",
    "no_op_static_scatter_nd_rule",
    "normalize_pad_format_conv_rule",
    "normalize_pad_format_conv_integer_rule",
    "fuse_pad_into_conv_rule",
    "fuse_pad_into_conv_integer_rule",
    "fuse_batchnorm_into_conv_rule",
    "fuse_batchnorm_into_conv_transpose_rule",
    "fuse_batchnorm_into_gemm_rule",
)

# trusted only in our exact form (.exact_rules says what onnxscript's misses)
REPLACED_RULES = (
    "two_reshapes_matmul_reshape_rule",
    "one_reshape_matmul_reshape_rule",
    "min_max_rule",
    "max_min_rule",
    "cast_cast_rule",
)

EXCLUDED_RULES = {
    "add_0_rule": "matches its constant within a tolerance (x + 1e-12 became x: a LayerNorm with eps 1e-12 "
    "gave NaN for a constant row) and takes x + 0.0 for x (-0.0 + 0.0 is +0.0); "
    "remove_exact_no_ops does the exact part",
    "sub_0_rule": "matches its constant within a tolerance; remove_exact_no_ops does the exact part",
    "mul_by_1_rule": "matches its constant within a tolerance; remove_exact_no_ops does the exact part",
    "div_by_1_rule": "matches its constant within a tolerance; remove_exact_no_ops does the exact part",
    "dropout_zero_rule": "MLX has no Dropout primitive: never matches",
    "dropout_inference_rule": "MLX has no Dropout primitive: never matches",
    "remove_optional_bias_from_conv_rule": "not audited: dropping an all-zero bias turns a +0.0 (-0.0 + 0) "
    "into -0.0 where a convolution sums to -0.0; kept out until shown exact",
    "remove_optional_bias_from_conv_transpose_rule": "as remove_optional_bias_from_conv_rule",
    "remove_optional_bias_from_qlinear_conv_rule": "as remove_optional_bias_from_conv_rule",
    "remove_optional_bias_from_gemm_rule": "as remove_optional_bias_from_conv_rule",
    "slice_split_rule": "scans the whole graph for every Slice (34 of 43 s on a 4900-node model); "
    "split_slice_halves does the same rewrite through each value's uses",
}


def rules() -> list:
    """The rewrite rules the constants loop runs: the trusted ones, ours where replaced."""
    ours = exact_rules()
    return [ours[name] if name in REPLACED_RULES else getattr(onnxscript_rules, name) for name in TRUSTED_RULES]


class _Counting(ir.passes.InPlacePass):
    """An onnx-ir pass around a function that returns how many rewrites it made."""

    def __init__(self, fn, *args):
        super().__init__()
        self.fn, self.args = fn, args

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, bool(self.fn(model, *self.args)))


def _fold(model: ir.Model) -> int:
    result = optimizer.fold_constants(
        model,
        onnx_shape_inference=False,
        should_fold=_should_fold,
        input_size_limit=optimizer.constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        output_size_limit=optimizer.constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
    )
    return int(result.modified)


def fold_and_rewrite(model: ir.Model, opset: int) -> int:
    """Inline functions, then fold constants and apply the rewrite rules, exact no-op
    removal and :func:`split_slice_halves` until nothing changes (at most twice); then lift
    constants to initializers, deduplicate, CSE and fix names. Returns the nodes removed."""
    before = len(model.graph)
    loop = ir.passes.PassManager(
        [
            _Counting(_fold),
            rewriter.RewritePass(rules()),
            _Counting(remove_exact_no_ops),
            _Counting(split_slice_halves),
            common_passes.RemoveUnusedNodesPass(),
            common_passes.RemoveUnusedFunctionsPass(),
            common_passes.RemoveUnusedOpsetsPass(),
        ],
        steps=2,
        early_stop=True,
    )
    ir.passes.Sequential(
        common_passes.InlinePass(),
        loop,
        common_passes.RemoveUnusedNodesPass(),
        common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        common_passes.LiftSubgraphInitializersToMainGraphPass(),
        common_passes.DeduplicateInitializersPass(),
        common_passes.CommonSubexpressionEliminationPass(),
        common_passes.OutputFixPass(),
        common_passes.NameFixPass(),
    )(model)
    register_dangling_constants(model)
    if not has(opset, "axes as input"):
        split_sizes_as_input(model)
    return before - len(model.graph)


_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)


def _identity_operand(node: ir.Node) -> ir.Value | None:
    """x when ``node`` gives x exactly, bit for bit: x * 1, 1 * x, x / 1, x - (+0), x + (-0),
    -0 + x (integers: any zero), with a constant of those values that does not broadcast x."""
    if node.domain != "" or node.op_type not in ("Mul", "Div", "Sub", "Add") or len(node.inputs) != 2:
        return None
    slots = (0, 1) if node.op_type in ("Mul", "Add") else (0,)
    for slot in slots:
        x, c = node.inputs[slot], node.inputs[1 - slot]
        if c is None or is_parameter(c):
            continue
        array = const_eval(c, limit=1 << 16, depth=0)
        shape, out = named_shape(x), named_shape(node.outputs[0])
        if array is None or array.size == 0 or shape is None or shape != out or x.dtype != node.outputs[0].dtype:
            continue
        if node.op_type in ("Mul", "Div"):
            if np.all(array == 1):
                return x
        elif np.all(array == 0) and (x.dtype not in _FLOATS or np.all(np.signbit(array) == (node.op_type == "Add"))):
            return x
    return None


def remove_exact_no_ops(model: ir.Model) -> int:
    """Bypass arithmetic that returns its operand bit for bit (:func:`_identity_operand`),
    where the constant is not a module parameter."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        x = _identity_operand(node)
        out = node.outputs[0] if x is not None else None
        if x is None or (out.is_graph_output() and (x.is_graph_input() or x.is_initializer() or x.is_graph_output())):
            continue  # (a graph output keeps its name: x takes it, unless x has a name of its own to keep)
        replace_value(graph, out, x)
        graph.remove(node, safe=True)
        changed += 1
    return changed


def split_slice_halves(model: ir.Model) -> int:
    """``Slice(x, [0], [n/2], [-1])`` and ``Slice(x, [n/2], [n], [-1])`` (steps 1) of one x (the two
    halves of a rotary embedding) -> ``Split(x, [n/2, n/2], axis=-1)``: what onnxscript's
    SlicesSplit rule rewrites, found through each value's uses instead of a graph scan."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.graph is not graph or node.op_type != "Slice" or node.domain != "":
            continue
        x = node.inputs[0]
        shape = named_shape(x)
        if shape is None or not shape or not isinstance(shape[-1], int) or shape[-1] % 2:
            continue
        n = shape[-1]
        bounds = slice_bounds(node, len(shape))
        if bounds != (0, n // 2):
            continue
        for use in x.uses():
            other = use.node
            if other is node or use.idx != 0 or other.op_type != "Slice" or other.domain != "":
                continue
            if slice_bounds(other, len(shape)) != (n // 2, n):
                continue
            if node.outputs[0].is_graph_output() or other.outputs[0].is_graph_output():
                break
            sizes = initializer(graph, np.array([n // 2, n // 2], np.int64), f"{node.name}_halves")
            split = ir.Node(
                "", "Split", [x, sizes], attributes=[ir.AttrInt64("axis", -1)], num_outputs=2, name=f"{node.name}/split"
            )
            source = x.producer()  # right after x is made: before both Slices, whatever their order
            if source is not None and source.graph is graph:
                graph.insert_after(source, split)
            else:
                graph.insert_before(next(iter(graph)), split)
            for old, new in zip((node.outputs[0], other.outputs[0]), split.outputs):
                new.shape, new.type = old.shape, old.type
                old.replace_all_uses_with(new)
            graph.remove([node, other], safe=True)
            changed += 1
            break
    return changed


def register_dangling_constants(model: ir.Model) -> None:
    """onnxscript's Max/Min -> Clip rule names the bounds after the clipped value; a second
    Clip of the same value leaves its bounds unregistered (the name is taken), and the model
    refers to values nothing defines. Register them under a free name."""
    graph = model.graph
    for node in graph:
        for value in node.inputs:
            if value is None or value.const_value is None or value.producer() is not None:
                continue
            if value.is_graph_input() or value.is_initializer():
                continue
            base = value.name or "constant"
            name, k = base, 0
            while name in graph.initializers:
                k += 1
                name = f"{base}_{k}"
            value.name = name
            graph.register_initializer(value)


def split_sizes_as_input(model: ir.Model) -> None:
    """onnxscript's SlicesSplit rule writes ``Split(num_outputs=2)``, an opset-18 attribute,
    whatever the opset: give such Splits the explicit ``split`` sizes input instead."""
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type != "Split" or "num_outputs" not in node.attributes or len(node.inputs) > 1:
            continue
        shape = named_shape(node.inputs[0])
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        count = node.attributes["num_outputs"].as_int()
        if shape is None:
            continue
        size = shape[axis]
        chunk = -(-size // count)
        sizes = [min(chunk, max(size - chunk * k, 0)) for k in range(count)]
        split = ir.Value(
            name=f"{node.name}_sizes",
            shape=ir.Shape([count]),
            type=ir.TensorType(ir.DataType.INT64),
            const_value=ir.tensor(np.array(sizes, np.int64)),
        )
        node.graph.register_initializer(split)
        node.resize_inputs(2)
        node.replace_input_with(1, split)
        del node.attributes["num_outputs"]


_GROWING = frozenset({"Expand", "Tile", "ConstantOfShape"})
_UNARY_FOLD = frozenset({"Cos", "Sin", "Exp", "Neg", "Reciprocal", "Sqrt", "Cast"})
_SHARED_FOLD_BYTES = 1 << 20


def _should_fold(node: ir.Node) -> bool | None:
    """Do not fold ops that only make a constant bigger: a folded Expand of a weight would
    store the broadcast copy (and lose the parameter's name)."""
    if node.metadata_props.get(KEEP_PACKED):  # quantized weight unpacking (op_mappings/quantized.py)
        return False
    if node.op_type == "DequantizeLinear":  # low-bit blocks the runtime keeps packed (op_mappings/lowbit.py)
        return False
    if node.op_type == "Transpose" and node.inputs[0] is not None and node.inputs[0].is_initializer():
        return False  # a weight: Gemm(transB) or a lazy view under its own name, later
    if node.op_type in _GROWING:
        shape = named_shape(node.outputs[0])
        return shape is not None and int(np.prod(shape, dtype=np.int64)) <= 64
    # folding a shared weight would store it twice; a small table (RoPE's angles, read by
    # Cos and Sin) is worth its copy
    limit = _SHARED_FOLD_BYTES if node.op_type in _UNARY_FOLD else 1024
    for value in node.inputs:
        if value is not None and value.is_initializer() and len(value.uses()) > 1:
            tensor = value.const_value
            if tensor is not None and tensor.nbytes > limit:
                return False
    return None
