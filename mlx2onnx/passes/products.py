"""Low-bit products that read the same input, as one: a layer's query, key and value
projections (and its gate and up projections) are one ``MatMulNBits`` over their rows
stacked, then a ``Split``.

Each output column of ``MatMulNBits`` is its own sum over K, blocked the same whatever N is:
the stacked product gives each projection's numbers bit for bit (onnxruntime 1.32, float32
and int8 accuracy levels, one row and prompt-sized inputs: tests/passes/test_products.py).
The affine centre terms beside them (``groupsum(x) @ centre.T``, see op_mappings/lowbit.py)
are stacked the same way and added before the split. The stacked weights are joined when
the model is written (lazily: no second copy of a large model's weights in memory).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import onnx_ir as ir

from ..translate.markers import WEIGHT_BITS
from .graph import fresh_name, remove_dead

_ATTRIBUTES = ("K", "bits", "block_size", "accuracy_level")
SPLIT_SIZES_INPUT = 13  # the opset from which Split reads its sizes as an input


def fuse_sibling_products(model: ir.Model) -> int:
    """``MatMulNBits`` nodes of one input, one shape of blocks and constant weights ->
    one over their stacked rows and a ``Split``; where each is added to a ``MatMul`` of
    one shared group-sum by a constant, those are stacked too. Returns the products
    folded into another."""
    graph = model.graph
    if model.opset_imports.get("", 0) < SPLIT_SIZES_INPUT:
        return 0
    groups: dict[tuple, list[ir.Node]] = defaultdict(list)
    for node in graph:
        key = _key(node)
        if key is not None:
            groups[key].append(node)
    changed = 0
    for nodes in groups.values():
        if len(nodes) > 1:
            _fuse(graph, nodes)
            changed += len(nodes) - 1
    if changed:
        graph.sort()
    return changed


def _key(node: ir.Node) -> tuple | None:
    """What products must share to be stacked, or None for a node that cannot be."""
    if node.op_type != "MatMulNBits" or node.domain != "com.microsoft" or len(node.inputs) not in (3, 4):
        return None
    if any(v is None or v.const_value is None for v in node.inputs[1:]):
        return None
    if node.outputs[0].is_graph_output() or node.inputs[0] is None or node.inputs[0].dtype is None:
        return None
    attrs = tuple(node.attributes[a].as_int() if a in node.attributes else None for a in _ATTRIBUTES)
    if set(node.attributes) - {*_ATTRIBUTES, "N"}:
        return None
    types = tuple(v.dtype for v in node.inputs[1:])
    return (id(node.inputs[0]), attrs, types, node.metadata_props.get(WEIGHT_BITS))


def _fuse(graph: ir.Graph, nodes: list[ir.Node]) -> None:
    """Stack ``nodes``; the new nodes are appended and the caller sorts the graph."""
    first = nodes[0]
    sizes = [node.attributes["N"].as_int() for node in nodes]
    inputs = [first.inputs[0]] + [
        _stacked(graph, [node.inputs[i] for node in nodes], f"{first.name}/stacked_{i}")
        for i in range(1, len(first.inputs))
    ]
    attributes = [first.attributes[a] for a in _ATTRIBUTES if a in first.attributes]
    fused = _node(graph, "MatMulNBits", inputs, first, attributes=[*attributes, ir.AttrInt64("N", sum(sizes))])
    fused.domain = "com.microsoft"
    fused.metadata_props.update(first.metadata_props)
    source, results, olds = fused.outputs[0], [node.outputs[0] for node in nodes], list(nodes)
    centres = _centre_terms(nodes)
    if centres is not None:
        adds, products = centres
        stacked = _stacked(graph, [p.inputs[1] for p in products], f"{products[0].name}/stacked", axis=1)
        centre = _node(graph, "MatMul", [products[0].inputs[0], stacked], products[0])
        total = _node(graph, "Add", [fused.outputs[0], centre.outputs[0]], adds[0])
        source, results, olds = total.outputs[0], [add.outputs[0] for add in adds], adds
    sizes_value = _ints(graph, sizes, f"{first.name}/sizes")
    split = _node(
        graph, "Split", [source, sizes_value], first, attributes=[ir.AttrInt64("axis", -1)], outputs=len(nodes)
    )
    for old, new in zip(results, split.outputs):
        new.type, new.shape = old.type, old.shape
        old.replace_all_uses_with(new)
    remove_dead(graph, olds)


def _node(graph: ir.Graph, op_type: str, inputs: list, like: ir.Node, attributes=(), outputs: int = 1) -> ir.Node:
    """A new node named after ``like``, appended to ``graph``, its outputs typed as ``like``'s."""
    name = fresh_name(graph, f"{like.name}/stacked")
    node = ir.Node("", op_type, inputs, attributes=list(attributes), num_outputs=outputs, name=name)
    for k, value in enumerate(node.outputs):
        value.name = fresh_name(graph, f"{name}:{k}" if k else name)
        value.type = like.outputs[0].type or like.inputs[0].type  # MatMulNBits: A's type
    graph.append(node)
    return node


def _centre_terms(nodes: list[ir.Node]) -> tuple[list[ir.Node], list[ir.Node]] | None:
    """(the Adds, the MatMuls) where each product's only use is ``Add(product, MatMul(s, C))``
    with one ``s`` for all and a constant 2-D ``C`` of one type and height."""
    adds, products = [], []
    for node in nodes:
        uses = list(node.outputs[0].uses())
        if len(uses) != 1 or uses[0].node.op_type != "Add" or uses[0].node.domain != "" or uses[0].idx != 0:
            return None
        add = uses[0].node
        centre = add.inputs[1].producer() if add.inputs[1] is not None else None
        if centre is None or centre.op_type != "MatMul" or centre.domain != "" or len(centre.outputs[0].uses()) != 1:
            return None
        weight = centre.inputs[1]
        if weight.const_value is None or weight.shape is None or len(weight.shape) != 2:
            return None
        if add.outputs[0].is_graph_output():
            return None
        adds.append(add)
        products.append(centre)
    weights = [p.inputs[1] for p in products]
    if len({id(p.inputs[0]) for p in products}) != 1 or len({(w.dtype, w.shape[0]) for w in weights}) != 1:
        return None
    return adds, products


def _stacked(graph: ir.Graph, values: list[ir.Value], base: str, axis: int = 0) -> ir.Value:
    """One initializer: the constants ``values`` joined along ``axis``, computed when read."""
    tensors = [v.const_value for v in values]
    shape = list(tensors[0].shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    name = fresh_name(graph, base)
    lazy = ir.LazyTensor(
        lambda: ir.Tensor(np.concatenate([t.numpy() for t in tensors], axis=axis), name=name),
        dtype=tensors[0].dtype,
        shape=ir.Shape(shape),
        name=name,
    )
    value = ir.Value(name=name, shape=ir.Shape(shape), type=ir.TensorType(tensors[0].dtype), const_value=lazy)
    graph.register_initializer(value)
    return value


def _ints(graph: ir.Graph, values: list[int], base: str) -> ir.Value:
    name = fresh_name(graph, base)
    array = np.asarray(values, np.int64)
    value = ir.Value(
        name=name,
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.INT64),
        const_value=ir.Tensor(array, name=name),
    )
    graph.register_initializer(value)
    return value
