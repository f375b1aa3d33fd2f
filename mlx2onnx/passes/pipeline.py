"""Optimisation passes on the exported onnx-ir model. Each keeps parity (tested).

- :func:`drop_redundant_broadcasts`: MLX inserts an explicit ``Broadcast`` before every
  elementwise op; ONNX broadcasts by itself, so an ``Expand`` whose consumers broadcast
  to the same shape anyway is dropped.
- :func:`gemm_with_transposed_weights`: ``MatMul(A, Transpose(W))`` of a 2-D A becomes
  ``Gemm(A, W, transB=1)``: the weight is written as MLX holds it, without a transposed copy.
- :func:`fold_weight_transposes`: ``Transpose`` of an initializer used nowhere else (a
  Linear weight) becomes a transposed initializer, of any size, without copying until
  the model is written.
- onnxscript's optimizer: constant folding of small subgraphs (Arange, masks, RoPE
  tables), dead code and identity elimination.
- fusions: the decomposed RMSNorm/LayerNorm chains MLX traces on the CPU become
  ``RMSNormalization`` (opset 23) / ``LayerNormalization`` (opset 17).
- :func:`drop_unseen_zero_sign_repairs`: the repair that keeps a selected -0.0 negative
  after a ``Where`` is bypassed where no consumer can see the sign of a zero (Softmax of
  an attention mask, comparisons).
- :func:`mlx2onnx.pooling.fuse_pooling`: MLX's pooling decomposition (Pad + AsStrided or
  Reshape/Transpose windows + max/mean) becomes MaxPool / AveragePool, where exactly so
  (at dynamic image sizes too: :mod:`mlx2onnx.symsizes` proves the windows for every size).
- :mod:`mlx2onnx.layout`: the NHWC<->NCHW Transposes around every Conv and pool are sunk
  until they cancel (NCHW inside a conv net), per-channel Add/Sub/Mul/Div constants
  (inference BatchNorm) are folded into the Conv before them, ``Max(x, 0)`` is ``Relu``.
- onnx-ir's common-subexpression elimination and unused-node removal.
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Iterable

import numpy as np
import onnx_ir as ir

from .graph import const_eval, initializer, int_attr, producer, remove_dead, replace_value, slice_bounds
from ..translate.markers import KEEP_PACKED, ZERO_SIGN_REPAIR

BROADCASTING = frozenset(
    "Add Sub Mul Div Pow Max Min Mod Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Where "
    "BitwiseAnd BitwiseOr BitwiseXor BitShift PRelu Sum Mean".split()
)


def _shape(value: ir.Value | None) -> tuple[int | str, ...] | None:
    """Static dims as ints, named dynamic ones as their dim_param; None if any is unknown."""
    if value is None or value.shape is None:
        return None
    dims = [d if isinstance(d, int) else d.value for d in value.shape]
    if not all(isinstance(d, (int, str)) for d in dims):
        return None
    return tuple(dims)


def _broadcast(shapes: Iterable[tuple[int | str, ...] | None]) -> tuple[int | str, ...] | None:
    """The broadcast of shapes whose named dims are equal exactly when their names are
    (an unnamed or mismatched pair gives None)."""
    shapes = list(shapes)
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for axis in range(rank):
        dims = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def drop_redundant_broadcasts(model: ir.Model) -> int:
    """Bypass ``Expand`` nodes whose every consumer broadcasts to the same result anyway."""
    graph = model.graph
    outputs = set(id(v) for v in graph.outputs)
    changed = 0
    for node in list(graph):
        if node.op_type != "Expand" or node.domain != "":
            continue
        source, out = node.inputs[0], node.outputs[0]
        if id(out) in outputs or _shape(source) is None:
            continue
        for use in list(out.uses()):
            consumer, slot = use.node, use.idx
            if consumer.domain != "":
                continue
            if consumer.op_type == "Gemm" and slot == 2:  # C broadcasts to (M, N)
                if _broadcast([_shape(source), _shape(out)]) == _shape(out):
                    consumer.replace_input_with(slot, source)
                    changed += 1
                continue
            if consumer.op_type == "MatMul":  # batch dims broadcast, matrix dims do not
                if _matmul_batch_broadcasts(consumer, slot, _shape(source)):
                    consumer.replace_input_with(slot, source)
                    changed += 1
                continue
            if consumer.op_type not in BROADCASTING:
                continue
            shapes = [_shape(v) for v in consumer.inputs]
            if any(s is None for s in shapes):
                continue
            before = _broadcast(shapes)
            shapes[slot] = _shape(source)
            after = _broadcast(shapes)
            if before is not None and before == after:
                consumer.replace_input_with(slot, source)
                changed += 1
        if not out.uses():
            graph.remove(node, safe=True)
    return changed


def _matmul_batch_broadcasts(node: ir.Node, slot: int, source: tuple[int | str, ...]) -> bool:
    """True when MatMul gives the same result with ``source`` in place of its (expanded)
    input ``slot``: both operands are matrices or stacks of them (rank-1 operands are
    promoted, not broadcast), the expansion left the matrix dims alone, and the batch
    dims broadcast to the same result."""
    shapes = [_shape(v) for v in node.inputs]
    if any(s is None or len(s) < 2 for s in shapes) or len(source) < 2:
        return False
    expanded, other = shapes[slot], shapes[1 - slot]
    if source[-2:] != expanded[-2:]:
        return False
    before = _broadcast([expanded[:-2], other[:-2]])
    return before is not None and before == _broadcast([source[:-2], other[:-2]])


def _matrix_rank(value: ir.Value | None) -> int | None:
    """The rank of ``value``: its shape's, or a Reshape's constant target's (through Casts)."""
    while value is not None:
        if value.shape is not None:
            return len(value.shape)
        node = value.producer()
        if node is None or node.domain != "":
            return None
        if node.op_type == "Reshape" and node.inputs[1] is not None and node.inputs[1].const_value is not None:
            return int(node.inputs[1].const_value.numpy().size)
        if node.op_type != "Cast":
            return None
        value = node.inputs[0]
    return None


def _transposed_weight(value: ir.Value | None) -> tuple[ir.Value, int | None] | None:
    """(W, cast-to dtype or None) when ``value`` is Transpose(W) or Cast(Transpose(W)) of a
    2-D initializer W."""
    cast_to = None
    node = value.producer() if value is not None else None
    if node is not None and node.op_type == "Cast" and node.domain == "":
        cast_to = node.attributes["to"].as_int()
        value = node.inputs[0]
        node = value.producer()
    if node is None or node.op_type != "Transpose" or node.domain != "":
        return None
    weight = node.inputs[0]
    if weight is None or not weight.is_initializer() or weight.shape is None or len(weight.shape) != 2:
        return None
    perm = node.attributes.get("perm")
    if perm is not None and list(perm.as_ints()) != [1, 0]:
        return None
    return weight, cast_to


def gemm_with_transposed_weights(model: ir.Model) -> int:
    """``MatMul(A, Transpose(W))`` of a 2-D A and a 2-D initializer W (a Linear layer, the
    Transpose possibly followed by a Cast) -> ``Gemm(A, W, transB=1)``; a ``Gemm`` with such
    a B flips its ``transB``. The weight is stored as MLX holds it, [out, in]: nothing is
    transposed when the model is written (that copy took 4 of the 11 s the bfloat16 1B
    llama spent writing), and a weight shared with an embedding is stored once."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.domain != "" or node.op_type not in ("MatMul", "Gemm") or len(node.inputs) < 2:
            continue
        found = _transposed_weight(node.inputs[1])
        if found is None:
            continue
        weight, cast_to = found
        work = ir.DataType(cast_to) if cast_to is not None else weight.dtype
        if work not in (ir.DataType.FLOAT, ir.DataType.DOUBLE):
            continue
        if node.op_type == "MatMul" and _matrix_rank(node.inputs[0]) != 2:
            continue
        old_b = node.inputs[1]
        b = weight
        if cast_to is not None:
            cast = ir.Node("", "Cast", [weight], attributes=[ir.AttrInt64("to", cast_to)], name=f"{node.name}/cast_b")
            graph.insert_before(node, cast)
            b = cast.outputs[0]
            b.type = ir.TensorType(work)
            b.shape = weight.shape
        if node.op_type == "MatMul":
            gemm = ir.Node("", "Gemm", [node.inputs[0], b], attributes=[ir.AttrInt64("transB", 1)],
                           name=f"{node.name}/gemm")
            graph.insert_before(node, gemm)
            out, new = node.outputs[0], gemm.outputs[0]
            new.shape, new.type = out.shape, out.type
            replace_value(graph, out, new)
            graph.remove(node, safe=True)
        else:
            flipped = 1 - (node.attributes["transB"].as_int() if "transB" in node.attributes else 0)
            node.attributes["transB"] = ir.AttrInt64("transB", flipped)
            node.replace_input_with(1, b)
        _remove_unused_chain(graph, old_b)
        changed += 1
    return changed


def _remove_unused_chain(graph: ir.Graph, value: ir.Value) -> None:
    while value is not None and not value.uses() and not value.is_graph_output():
        node = value.producer()
        if node is None:
            return
        source = node.inputs[0]
        graph.remove(node, safe=True)
        value = source


def fold_weight_transposes(model: ir.Model) -> int:
    """Replace ``Transpose(initializer)`` by a transposed initializer when the original
    has no other use (the data is transposed lazily, at write time)."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.op_type != "Transpose" or node.domain != "":
            continue
        weight = node.inputs[0]
        if weight is None or weight.const_value is None or not weight.is_initializer():
            continue
        if len(weight.uses()) != 1 or weight.is_graph_input() or weight.is_graph_output():
            continue
        if node.outputs[0].is_graph_output():  # a transposed constant returned as is: keep its name
            continue
        perm = node.attributes.get("perm")
        array = weight.const_value.numpy()
        axes = list(perm.as_ints()) if perm is not None else list(reversed(range(array.ndim)))
        transposed = np.transpose(array, axes)
        out = node.outputs[0]
        folded = ir.Value(
            name=weight.name,
            shape=ir.Shape(transposed.shape),
            type=weight.type,
            const_value=ir.Tensor(transposed, name=weight.name),
        )
        graph.initializers.pop(weight.name)
        graph.register_initializer(folded)
        out.replace_all_uses_with(folded)
        graph.remove(node, safe=True)
        changed += 1
    return changed


Pass = Callable[[ir.Model], int]

# ops whose result is the same for -0.0 and +0.0 in any input
SIGN_BLIND = frozenset("Softmax LogSoftmax Exp Cos Cosh Abs Sigmoid Equal Less Greater LessOrEqual "
                       "GreaterOrEqual IsNaN IsInf".split())
_FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


def drop_unseen_zero_sign_repairs(model: ir.Model) -> int:
    """Bypass the sign-of-zero repair after a Where (``select_value`` in
    op_mappings/elementwise.py) where every consumer ignores the sign of a zero (Softmax,
    Exp, comparisons, casts to integers, ...): attention masks need no repair. The repair
    is kept for graph outputs."""
    graph = model.graph
    outputs = set(id(v) for v in graph.outputs)
    changed = 0
    for node in list(graph):
        if not node.metadata_props.get(ZERO_SIGN_REPAIR) or node.op_type != "Mul":
            continue
        # Where (dtype) -> [Cast (compute dtype) -> ] Mul [ -> Cast (dtype)]
        repaired, unrepaired = node.outputs[0], node.inputs[0]
        uses = list(repaired.uses())
        if len(uses) == 1 and uses[0].node.op_type == "Cast":
            source = unrepaired.producer()
            if source is None or source.op_type != "Cast":
                continue
            repaired, unrepaired = uses[0].node.outputs[0], source.inputs[0]
        source = unrepaired.producer()
        if source is None or source.op_type != "Where" or id(repaired) in outputs or not repaired.uses():
            continue
        if all(_sign_blind(use.node) for use in repaired.uses()):
            for use in list(repaired.uses()):
                use.node.replace_input_with(use.idx, unrepaired)
            remove_dead(graph, [repaired.producer()])  # the repair's nodes read the Where's inputs
            changed += 1
    return changed


def _sign_blind(node: ir.Node) -> bool:
    if node.domain != "":
        return False
    if node.op_type == "Cast":
        return ir.DataType(node.attributes["to"].as_int()) not in _FLOAT_TYPES
    return node.op_type in SIGN_BLIND


def optimize(model: ir.Model, settings, parameters: frozenset[int] = frozenset()) -> dict[str, int]:
    """Run every pass in order; returns the number of rewrites each made. ``parameters``
    are the ids of the initializers that hold module parameters: their values are not
    assumed (a weight of ones is not dropped from a Mul)."""
    from onnx_ir.passes import common as common_passes

    from . import attention, fusions, layout, pooling, rotary

    opset = settings.opset
    report: dict[str, int] = {}
    declared = [(v.shape, v.type) for v in model.graph.outputs]
    report["drop_redundant_broadcasts"] = drop_redundant_broadcasts(model)
    report["fold_static_shape_reads"] = fold_static_shape_reads(model)
    before = len(model.graph)
    _onnxscript_optimize(model, parameters)  # first: its Reshape-MatMul-Reshape collapse sees MatMuls
    _register_dangling_constants(model)
    if opset < 18:
        _split_sizes_for_opset17(model)
    report["onnxscript_optimizer"] = before - len(model.graph)
    report["gemm_with_transposed_weights"] = gemm_with_transposed_weights(model)
    report["fold_weight_transposes"] = fold_weight_transposes(model)
    if _has_dynamic_inputs(model):
        report["named_reshape_dims"] = keep_named_reshape_dims(model)
    report["drop_redundant_broadcasts_2"] = drop_redundant_broadcasts(model)
    report.update(fusions.fuse_all(model, opset))
    report["drop_unseen_zero_sign_repairs"] = drop_unseen_zero_sign_repairs(model)
    report["fuse_attention"] = attention.fuse_attention(model, opset)  # its Where's sign repair is gone now
    report["fuse_rotary_embedding"] = rotary.fuse_rotary_embedding(model, opset)
    report["fuse_pooling"] = pooling.fuse_pooling(model, settings.plan)
    report["sink_transposes"] = layout.sink_transposes(model)
    report["fold_conv_affine"] = layout.fold_conv_affine(model)
    report["max_zero_to_relu"] = layout.max_zero_to_relu(model)
    before = len(model.graph)
    common_passes.DeduplicateInitializersPass(size_limit=1 << 16)(model)  # constants folded alike
    common_passes.CommonSubexpressionEliminationPass()(model)
    common_passes.RemoveUnusedNodesPass()(model)
    report["cse_and_dce"] = before - len(model.graph)
    for value, (shape, type_) in zip(model.graph.outputs, declared):
        # CSE may make a graph output a handler-internal value, which has no shape yet
        value.shape = value.shape if value.shape is not None else shape
        value.type = value.type if value.type is not None else type_
    return report


def _has_dynamic_inputs(model: ir.Model) -> bool:
    return any(v.shape is not None and not all(isinstance(d, int) for d in v.shape) for v in model.graph.inputs)


def keep_named_reshape_dims(model: ir.Model) -> int:
    """Turn a Reshape target's -1 back into 0 (copy) where it copies a dynamic dim of the
    input at the same axis: the optimizer writes -1 for both, and ONNX shape inference can
    name a copied dim but not an inferred one."""
    from onnx_ir.passes.common import ShapeInferencePass

    ShapeInferencePass(strict_mode=False)(model)  # internal values get (symbolic) shapes
    changed = 0
    targets: dict[tuple, ir.Value] = {}  # one initializer per rewritten target
    for node in model.graph:
        if node.op_type != "Reshape" or node.domain != "" or len(node.inputs) < 2:
            continue
        target = node.inputs[1]
        source = _shape(node.inputs[0])
        if target is None or target.const_value is None or source is None:
            continue
        dims = target.const_value.numpy().tolist()
        if dims.count(-1) != 1 or 0 in dims:
            continue
        axis = dims.index(-1)
        if axis >= len(source) or not isinstance(source[axis], str):
            continue  # -1 = size / rest = that dim exactly when the other dims multiply alike
        rest_in = [d for k, d in enumerate(source) if k != axis]
        rest_out = [d for k, d in enumerate(dims) if k != axis]
        if all(isinstance(d, int) for d in rest_in) and math.prod(rest_in) == math.prod(rest_out):
            dims[axis] = 0
            node.attributes["allowzero"] = ir.AttrInt64("allowzero", 0)  # 0 copies (no other 0s)
            if tuple(dims) not in targets:
                targets[tuple(dims)] = initializer(model.graph, np.asarray(dims, np.int64), f"{target.name}_named")
            node.replace_input_with(1, targets[tuple(dims)])
            changed += 1
    return changed


def _static_dims(node: ir.Node) -> list[int | None] | None:
    """The dims a Shape node reads (its start/end slice of the input's shape), each an
    int where the input's dim is static, else None; None when the input's rank is unknown."""
    shape = _shape(node.inputs[0])
    if shape is None:
        return None
    r = len(shape)
    start, end = int_attr(node, "start", 0), int_attr(node, "end", r)
    start, end = (min(max(i + r if i < 0 else i, 0), r) for i in (start, end))
    return [d if isinstance(d, int) else None for d in shape[start:end]]


def fold_static_shape_reads(model: ir.Model) -> int:
    """Constants for the static dims a dynamic export reads from ``Shape`` (a mean over a
    fixed hidden size counts its elements at run time): ``Shape`` of static dims, and
    ``Gather`` of static entries of a ``Shape``. The optimizer then folds what follows."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.domain != "" or node.graph is None:
            continue
        if node.op_type == "Shape":
            dims = _static_dims(node)
        elif node.op_type == "Gather" and producer(node.inputs[0], "Shape") is not None:
            read, indices = _static_dims(node.inputs[0].producer()), const_eval(node.inputs[1], depth=0)
            if read is None or indices is None or indices.ndim > 1 or not -len(read) <= indices.min(initial=0):
                continue
            if indices.size and indices.max() >= len(read):
                continue
            dims = [read[int(i)] for i in indices.reshape(-1)]
            if indices.ndim == 0 and None not in dims:
                dims = dims[0]
        else:
            continue
        if dims is None or (isinstance(dims, list) and None in dims):
            continue
        out = node.outputs[0]
        if out.is_graph_output():
            continue
        replace_value(graph, out, initializer(graph, np.asarray(dims, np.int64), f"{out.name}_static"))
        changed += 1
    remove_dead(graph, [n for n in graph if n.op_type in ("Shape", "Gather")])
    return changed


def _onnxscript_optimize(model: ir.Model, parameters: frozenset[int] = frozenset()) -> None:
    """onnxscript's ``optimize_ir`` (constant folding and its default rewrite rules, twice,
    then dead code, constant lifting, deduplication, CSE), with one rule swapped out:
    ``SlicesSplit`` matches its two-output pattern by scanning the graph for every Slice,
    quadratic in the node count (34 of the 43 s the optimizer took on the 4900-node
    bfloat16 1B llama); :func:`split_slice_halves` does the same rewrite in one sweep."""
    from onnx_ir.passes import common as common_passes
    from onnxscript import optimizer, rewriter

    try:
        from onnxscript.optimizer._constant_folding import FoldConstantsPass
        from onnxscript.rewriter.rules.common import slice_split_rule

        rules = [_cast_guarded(_clip_guarded(_matmul_collapse_guarded(rule))) for rule in rewriter._DEFAULT_REWRITE_RULES
                 if rule is not slice_split_rule and id(rule) not in _inexact_rule_ids()]
    except (ImportError, AttributeError):  # another onnxscript layout: its own pipeline
        _stock_optimize(model)
        return
    loop = ir.passes.PassManager(
        [
            FoldConstantsPass(shape_inference=False, input_size_limit=optimizer.constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
                              output_size_limit=optimizer.constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
                              should_fold=_should_fold),
            rewriter.RewritePass(rules),
            _ExactNoOpsPass(parameters),
            _SplitSliceHalvesPass(),
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


def _stock_optimize(model: ir.Model) -> None:
    """onnxscript's own ``optimize_ir``, its default rules guarded (:func:`_matmul_collapse_guarded`,
    :func:`_clip_guarded`)."""
    from onnxscript import optimizer, rewriter

    defaults = rewriter._DEFAULT_REWRITE_RULES  # optimize_ir reads the rules from here
    rewriter._DEFAULT_REWRITE_RULES = tuple(_cast_guarded(_clip_guarded(_matmul_collapse_guarded(rule))) for rule in defaults
                                            if id(rule) not in _inexact_rule_ids())
    try:
        optimizer.optimize_ir(model, num_iterations=2, onnx_shape_inference=False, should_fold=_should_fold)
    finally:
        rewriter._DEFAULT_REWRITE_RULES = defaults


def _inexact_rule_ids() -> set[int]:
    """onnxscript rules that would change results MLX computes, audited rule by rule:

    - its no-op rules match their constants within a tolerance (``x + 1e-12`` became
      ``x``: a LayerNorm with eps 1e-12 gave NaN for a constant row) and take ``x + 0.0``
      for ``x`` (-0.0 + 0.0 is +0.0); dropping an all-zero bias keeps a -0.0 that MLX's
      ``+ 0`` makes +0.0. :func:`remove_exact_no_ops` does the exact part of the first.
    - (guarded, not dropped) the Reshape-MatMul-Reshape collapses check only that the
      plain MatMul has the final *shape*, not that the batch axes line up: see
      :func:`_matmul_collapse_guarded`.

    Every other default rule rewrites to the same values by construction (Min/Max/Clip/Relu
    chains, Cast-Cast where :func:`_cast_guarded` holds, Transpose/Reshape/Unsqueeze
    composition, no-op Expand/Transpose/Cast, Flatten as Reshape, ScatterND of a whole
    tensor, constant Reshape shapes, Conv padding and BatchNorm folding of constants); the
    parity cases and the fuzzer exercise them."""
    from onnxscript.rewriter.rules.common import _no_op, _remove_optional_bias

    return {id(rule) for rules in (_no_op.rules, _remove_optional_bias.rules) for rule in rules}


def _cast_guarded(rule):
    """onnxscript's Cast(Cast(x, float32), float16 or bfloat16) -> Cast(x, ...) rounds once
    where MLX rounds twice; the same whenever x converts to float32 exactly (a float of at
    most 32 bits), not for float64 or integer x."""
    from onnxscript.rewriter.rules.common import _basic_rules

    condition = getattr(rule, "_condition_function", None)
    if not isinstance(getattr(condition, "__self__", None), _basic_rules.CastCast):
        return rule
    exact = {ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}

    def x_converts_exactly(context, x, **bindings):
        return x.dtype in exact and condition(context, x=x, **bindings)

    guarded = copy.copy(rule)
    guarded._condition_function = x_converts_exactly
    return guarded


_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE)


def _identity_operand(node: ir.Node, parameters: frozenset[int]) -> ir.Value | None:
    """x when ``node`` gives x exactly, bit for bit: x * 1, 1 * x, x / 1, x - (+0), x + (-0),
    -0 + x (integers: any zero), with a constant of those values that does not broadcast x."""
    if node.domain != "" or node.op_type not in ("Mul", "Div", "Sub", "Add") or len(node.inputs) != 2:
        return None
    slots = (0, 1) if node.op_type in ("Mul", "Add") else (0,)
    for slot in slots:
        x, c = node.inputs[slot], node.inputs[1 - slot]
        if c is None or id(c) in parameters:
            continue
        array = const_eval(c, limit=1 << 16, depth=0)
        shape, out = _shape(x), _shape(node.outputs[0])
        if array is None or array.size == 0 or shape is None or shape != out or x.dtype != node.outputs[0].dtype:
            continue
        if node.op_type in ("Mul", "Div"):
            if np.all(array == 1):
                return x
        elif np.all(array == 0) and (x.dtype not in _FLOATS or np.all(np.signbit(array) == (node.op_type == "Add"))):
            return x
    return None


def remove_exact_no_ops(model: ir.Model, parameters: frozenset[int] = frozenset()) -> int:
    """Bypass arithmetic that returns its operand bit for bit (:func:`_identity_operand`),
    where the constant is not a module parameter."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        x = _identity_operand(node, parameters)
        out = node.outputs[0] if x is not None else None
        if x is None or (out.is_graph_output() and (x.is_graph_input() or x.is_initializer() or x.is_graph_output())):
            continue  # (a graph output keeps its name: x takes it, unless x has a name of its own to keep)
        replace_value(graph, out, x)
        graph.remove(node, safe=True)
        changed += 1
    return changed


class _ExactNoOpsPass(ir.passes.InPlacePass):
    def __init__(self, parameters: frozenset[int]):
        super().__init__()
        self.parameters = parameters

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, bool(remove_exact_no_ops(model, self.parameters)))


def _matmul_collapse_guarded(rule):
    """onnxscript's Reshape -> MatMul -> Reshape rules (``_broadcast_to_matmul``), applied
    only where dropping the Reshapes is exact.

    The rule checks that the plain MatMul has the final *shape*, not that the batch axes
    line up: in ``einsum("bhwc,hkc->bhwk")`` with b == h, MLX reshapes one operand so that
    its batch axis meets the other's h axis, and the collapsed MatMul met b instead
    (silently wrong, tests/test_passes.py::test_reshape_matmul_reshape_with_misaligned_batch_axes).
    Kept only where that is exact: each Reshape leaves its operand's two matrix axes as
    they are and only adds or removes leading size-1 batch axes (right-aligned
    broadcasting then pairs the same axes with and without it), or the left operand alone
    is reshaped, keeping its last axis, against a 2-D right operand (a Linear layer over
    flattened rows: the same rows, in the same order, times the same matrix). It also read ``shape[-1]`` of a 0-d input and raised
    IndexError out of the whole optimizer (``reshape(scalar, [-1, 1, 1]) @ x``)."""
    from onnxscript.rewriter.rules.common import _broadcast_to_matmul

    condition = getattr(rule, "_condition_function", None)
    if condition is not _broadcast_to_matmul.check_if_not_need_reshape:
        return rule

    def batch_axes_line_up(context, input_a, input_b, shape_c, shape_a=None, shape_b=None, **bindings):
        if any(v.shape is not None and len(v.shape) == 0 for v in (input_a, input_b)):
            return False
        rows = shape_b is None and input_b.shape is not None and len(input_b.shape) == 2 and _keeps_rows(input_a, shape_a)
        if not rows and not all(t is None or _only_leading_ones_change(v, t) for v, t in ((input_a, shape_a), (input_b, shape_b))):
            return False
        extra = {k: v for k, v in (("shape_a", shape_a), ("shape_b", shape_b)) if v is not None}
        return condition(context, input_a, input_b, shape_c, **extra, **bindings)

    guarded = copy.copy(rule)
    guarded._condition_function = batch_axes_line_up
    return guarded


def _reshape_dims(value: ir.Value, target: ir.Value | None) -> tuple[list[int], list[int]] | None:
    """(input dims, output dims) of ``Reshape(value, target)`` when both are static (the
    target's 0 and -1 resolved), else None."""
    if target is None or value.shape is None or not value.shape.is_static() or target.const_value is None:
        return None
    source = [int(d) for d in value.shape]
    wanted = [int(d) for d in target.const_value.numpy().reshape(-1)]
    wanted = [source[i] if d == 0 and i < len(source) else d for i, d in enumerate(wanted)]
    if wanted.count(-1) == 1:
        known = int(np.prod([d for d in wanted if d != -1], dtype=np.int64))
        wanted[wanted.index(-1)] = int(np.prod(source, dtype=np.int64)) // known if known else 0
    return source, wanted


def _keeps_rows(value: ir.Value, target: ir.Value | None) -> bool:
    """Whether ``Reshape(value, target)`` only regroups whole rows (the last axis stays)."""
    dims = _reshape_dims(value, target)
    return dims is not None and len(dims[0]) >= 1 and len(dims[1]) >= 2 and dims[0][-1] == dims[1][-1]


def _only_leading_ones_change(value: ir.Value, target: ir.Value) -> bool:
    """Whether ``Reshape(value, target)`` keeps the last two axes and changes the batch
    axes only by leading 1s."""
    dims = _reshape_dims(value, target)
    if dims is None:
        return False
    source, wanted = dims
    if len(source) < 2 or len(wanted) < 2 or source[-2:] != wanted[-2:]:
        return False

    def batch(dims):
        dims = list(dims[:-2])
        while dims and dims[0] == 1:
            dims.pop(0)
        return dims

    return batch(source) == batch(wanted)


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
        shape = _shape(x)
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
            split = ir.Node("", "Split", [x, sizes], attributes=[ir.AttrInt64("axis", -1)], num_outputs=2,
                            name=f"{node.name}/split")
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


class _SplitSliceHalvesPass(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, bool(split_slice_halves(model)))


def _clip_guarded(rule):
    """onnxscript's Max/Min -> Clip rules take any one-element constant as a bound, but a
    bound of higher rank than x broadcasts x (``clip(broadcast_to(scalar, [1]), lo, hi)``
    once the Expand is folded into the bounds: Max(x[], lo[1])), which Clip does not: the
    result lost its axis and the checker refused the model. The same rules, applied only
    where no bound outranks x."""
    from onnxscript.rewriter.rules.common import _min_max_to_clip

    condition = getattr(rule, "_condition_function", None)
    owner = getattr(condition, "__self__", None)
    if not (isinstance(owner, _min_max_to_clip._FuseMinMaxBase) and owner.need_scalars):
        return rule

    def bounds_keep_the_shape(context, x, out1, out2, **bindings):
        bounds = out1.producer().inputs[1:] + out2.producer().inputs[1:]
        if x.shape is None or any(b is None or b.shape is None or len(b.shape) > len(x.shape) for b in bounds):
            return False
        return condition(context, x=x, out1=out1, out2=out2, **bindings)

    guarded = copy.copy(rule)
    guarded._condition_function = bounds_keep_the_shape
    return guarded


def _register_dangling_constants(model: ir.Model) -> None:
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


def _split_sizes_for_opset17(model: ir.Model) -> None:
    """onnxscript's SlicesSplit rule writes ``Split(num_outputs=2)``, an opset-18 attribute,
    whatever the opset: give such Splits the explicit ``split`` sizes input instead."""
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.op_type != "Split" or "num_outputs" not in node.attributes or len(node.inputs) > 1:
            continue
        shape = _shape(node.inputs[0])
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else 0
        count = node.attributes["num_outputs"].as_int()
        if shape is None:
            continue
        size = shape[axis]
        chunk = -(-size // count)
        sizes = [min(chunk, max(size - chunk * k, 0)) for k in range(count)]
        split = ir.Value(name=f"{node.name}_sizes", shape=ir.Shape([count]), type=ir.TensorType(ir.DataType.INT64),
                         const_value=ir.tensor(np.array(sizes, np.int64)))
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
    if node.op_type == "Transpose" and node.inputs[0] is not None and node.inputs[0].is_initializer():
        return False  # a weight: Gemm(transB) or a lazy view under its own name, later
    if node.op_type in _GROWING:
        shape = _shape(node.outputs[0])
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
