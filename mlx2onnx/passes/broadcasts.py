"""Drop the explicit broadcasts MLX records before every elementwise op where ONNX's own
broadcasting gives the same result."""

from __future__ import annotations

import onnx_ir as ir

from .graph import broadcast_named, named_shape

BROADCASTING = frozenset(
    "Add Sub Mul Div Pow Max Min Mod Equal Less Greater LessOrEqual GreaterOrEqual And Or Xor Where "
    "BitwiseAnd BitwiseOr BitwiseXor BitShift PRelu Sum Mean".split()
)


def drop_redundant_broadcasts(model: ir.Model) -> int:
    """Bypass ``Expand`` nodes whose every consumer broadcasts to the same result anyway."""
    graph = model.graph
    outputs = set(id(v) for v in graph.outputs)
    changed = 0
    for node in list(graph):
        if node.op_type != "Expand" or node.domain != "":
            continue
        source, out = node.inputs[0], node.outputs[0]
        if id(out) in outputs or named_shape(source) is None:
            continue
        for use in list(out.uses()):
            consumer, slot = use.node, use.idx
            if consumer.domain != "":
                continue
            if consumer.op_type == "Gemm" and slot == 2:  # C broadcasts to (M, N)
                if broadcast_named([named_shape(source), named_shape(out)]) == named_shape(out):
                    consumer.replace_input_with(slot, source)
                    changed += 1
                continue
            if consumer.op_type == "MatMul":  # batch dims broadcast, matrix dims do not
                if _matmul_batch_broadcasts(consumer, slot, named_shape(source)):
                    consumer.replace_input_with(slot, source)
                    changed += 1
                continue
            if consumer.op_type not in BROADCASTING:
                continue
            shapes = [named_shape(v) for v in consumer.inputs]
            if any(s is None for s in shapes):
                continue
            before = broadcast_named(shapes)
            shapes[slot] = named_shape(source)
            after = broadcast_named(shapes)
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
    shapes = [named_shape(v) for v in node.inputs]
    if any(s is None or len(s) < 2 for s in shapes) or len(source) < 2:
        return False
    expanded, other = shapes[slot], shapes[1 - slot]
    if source[-2:] != expanded[-2:]:
        return False
    before = broadcast_named([expanded[:-2], other[:-2]])
    return before is not None and before == broadcast_named([source[:-2], other[:-2]])
