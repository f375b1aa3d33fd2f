"""Linear weights stored as MLX holds them: a transposed 2-D weight feeds ``Gemm(transB=1)``,
and any other Transpose of an initializer becomes a (lazily) transposed initializer."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .graph import replace_value


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
            gemm = ir.Node(
                "", "Gemm", [node.inputs[0], b], attributes=[ir.AttrInt64("transB", 1)], name=f"{node.name}/gemm"
            )
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
