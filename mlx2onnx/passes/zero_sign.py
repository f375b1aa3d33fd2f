"""Bypass the sign-of-zero repairs handlers leave after a ``Where`` where nothing downstream
can see the sign of a zero; which values can never be -0.0."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..translate.markers import ZERO_SIGN_REPAIR
from .graph import const_eval, remove_dead

# ops whose result is the same for -0.0 and +0.0 in any input
SIGN_BLIND = frozenset(
    "Softmax LogSoftmax Exp Cos Cosh Abs Sigmoid Equal Less Greater LessOrEqual GreaterOrEqual IsNaN IsInf".split()
)
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


# ops whose output is never -0.0, whatever their inputs
_NEVER_NEGATIVE_ZERO = frozenset("Abs Exp Sigmoid Softmax".split())
# ops whose output is -0.0 only where their first input is
_KEEP_ZERO_SIGN = frozenset("Relu MaxPool Transpose Reshape Identity Expand Squeeze Unsqueeze".split())


def never_negative_zero(value: ir.Value | None, depth: int = 6) -> bool:
    """True when ``value`` can hold no -0.0: a constant without one, or the sum of a value
    that cannot (a float sum is -0.0 only where every addend is: a Conv or Gemm with such
    a bias, an Add of such a constant), or a Relu/pool/reshaping of such a value, or an
    op whose result is never -0.0 (Abs, Exp, Sigmoid, Softmax)."""
    if value is None or depth < 0:
        return False
    array = const_eval(value, limit=1 << 24, depth=0)
    if array is not None:
        return not np.any((array == 0) & np.signbit(array))
    node = value.producer()
    if node is None or node.domain != "":
        return False
    if node.op_type in _NEVER_NEGATIVE_ZERO:
        return True
    if node.op_type in _KEEP_ZERO_SIGN:
        return never_negative_zero(node.inputs[0], depth - 1)
    if node.op_type == "Add":
        return any(never_negative_zero(v, depth - 1) for v in node.inputs)
    beta = node.attributes.get("beta")
    if node.op_type == "Conv" or (node.op_type == "Gemm" and (beta is None or beta.as_float() == 1.0)):
        return len(node.inputs) > 2 and never_negative_zero(node.inputs[2], depth - 1)
    return False


def untie_extrema(model: ir.Model) -> int:
    """``Max(Where(a == b, -inf, a), b)`` (``Min`` with +inf; op_mappings' extremum, which
    moves a out of a tie so that equal zeros give b's sign, as MLX) as ``Max(a, b)`` where
    neither a nor b can hold a -0.0 (:func:`never_negative_zero`): their ties are then equal
    bit for bit. A relu after a Conv or a bias add is a plain Max again, for
    :func:`.conv_fold.max_zero_to_relu` and the Clip rule."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.op_type not in ("Max", "Min") or node.domain != "" or len(node.inputs) != 2:
            continue
        moved, b = node.inputs
        a = _untied(moved, b, -np.inf if node.op_type == "Max" else np.inf)
        if a is None or not never_negative_zero(a) or not never_negative_zero(b):
            continue
        node.replace_input_with(0, a)
        remove_dead(graph, [moved.producer()])
        changed += 1
    return changed


def _untied(moved: ir.Value, b: ir.Value, away: float) -> ir.Value | None:
    """a when ``moved`` is ``Where(a == b, away, a)``, the Where computed in a's type or
    in float32 between Casts (as many before a as after the Where); else None."""
    moved_from, casts_after = _uncast(moved)
    where = moved_from.producer()
    if where is None or where.op_type != "Where" or where.domain != "" or len(where.inputs) != 3:
        return None
    (a, casts_before), tie = _uncast(where.inputs[2]), where.inputs[0].producer()
    far = const_eval(where.inputs[1])
    if far is None or far.size != 1 or float(far.reshape(())) != away or casts_before != casts_after:
        return None
    if tie is None or tie.op_type != "Equal" or _uncast(tie.inputs[0])[0] is not a:
        return None
    return a if _same_values(tie.inputs[1], b) else None


def _same_values(x: ir.Value, y: ir.Value) -> bool:
    """x and y hold the same values, broadcast alike: one value (before Casts and Expands,
    which MLX records around a Python scalar), or equal constants."""
    x, y = _unbroadcast(x), _unbroadcast(y)
    if x is y:
        return True
    cx, cy = const_eval(x, limit=1 << 16, depth=0), const_eval(y, limit=1 << 16, depth=0)
    return (
        cx is not None
        and cy is not None
        and cx.size == cy.size == 1
        and np.array_equal(np.signbit(cx.reshape(())), np.signbit(cy.reshape(())))
        and float(cx.reshape(())) == float(cy.reshape(()))
    )


def _unbroadcast(value: ir.Value) -> ir.Value:
    while True:
        value = _uncast(value)[0]
        node = value.producer()
        if node is None or node.op_type != "Expand" or node.domain != "":
            return value
        value = node.inputs[0]


def _uncast(value: ir.Value) -> tuple[ir.Value, int]:
    """``value`` before the float-to-float Casts that made it, and how many there were."""
    casts, node = 0, value.producer()
    while node is not None and node.op_type == "Cast" and node.inputs[0].dtype in _FLOAT_TYPES:
        value, casts = node.inputs[0], casts + 1
        node = value.producer()
    return value, casts
