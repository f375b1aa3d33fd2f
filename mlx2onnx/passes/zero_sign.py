"""Bypass the sign-of-zero repairs handlers leave after a ``Where`` where nothing downstream
can see the sign of a zero."""

from __future__ import annotations

import onnx_ir as ir

from ..translate.markers import ZERO_SIGN_REPAIR
from .graph import remove_dead

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

