"""Bit fields of packed words cut from the bytes they lie in (the portable target).

MLX's CPU dequantization of gathered rows (a quantized embedding) cuts codes out of their
uint32 words: ``(w << a) >> b`` for 2, 4 and 8-bit codes, ``(w >> k) & 1`` bit by bit for
3, 5 and 6-bit codes. A portable export stores packed words as bytes and joins gathered
rows back into words (``words_from_bytes`` in op_mappings/quantized.py, which marks the
join with :data:`WORDS_FROM_BYTES`). OpenVINO's CPU plugin computes uint32 in 32-bit
signed or float arithmetic and loses every word at or above 2^31, so this pass assembles
each field from the bytes it spans in int32, where every value stays below 2^31: the
same integers, bits ``t .. t + n - 1`` of ``w``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..translate.markers import WORDS_FROM_BYTES
from .graph import const_eval, initializer, int_attr, rank, remove_dead, replace_value

_SHAPE_OPS = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Identity"})


def fields_from_bytes(model: ir.Model) -> int:
    """Replace ``(w << a) >> b`` (constant 0 <= a <= b <= 31, b >= 1) and
    ``(w >> t) & (2^n - 1)`` (constant t, n <= 31) over uint32 words joined from bytes by
    the same fields assembled from those bytes."""
    graph = model.graph
    changed = 0
    for node in list(graph):
        if node.graph is not graph:
            continue
        found = _shift_pair(node) or _masked_shift(node)
        if found is None:
            continue
        words, start, width = found
        view = _byte_view(graph, words, node)
        if view is None:
            continue
        replace_value(graph, node.outputs[0], _field(graph, view, start, width, node))
        remove_dead(graph, [node])
        changed += 1
    return changed


def _shift_pair(node: ir.Node):
    """(w, start, width) of ``(w << a) >> b``, or None."""
    found = _direction(node) == "RIGHT" and _constant_operands(node, "LEFT")
    if not found:
        return None
    left, a, b = found
    if np.any(a < 0) or np.any(a > b) or np.any(b < 1) or np.any(b > 31):
        return None
    return left.inputs[0], b - a, 32 - b


def _masked_shift(node: ir.Node):
    """(w, start, width) of ``(w >> t) & (2^n - 1)``, or None."""
    found = node.op_type == "BitwiseAnd" and node.domain == "" and _constant_operands(node, "RIGHT")
    if not found:
        return None
    shift, t, mask = found
    width = np.log2(mask + 1).round().astype(np.int64)
    if np.any(t < 0) or np.any(t > 31) or np.any(mask < 1) or np.any(mask != (1 << width) - 1) or np.any(width > 31):
        return None
    return shift.inputs[0], t, width


def _constant_operands(node: ir.Node, inner_direction: str):
    """(inner, its shift, ``node``'s second operand) when ``node`` reads the single-use
    BitShift ``inner`` of ``inner_direction`` and both second operands are constants
    (as int64 arrays); else None."""
    inner = node.inputs[0].producer()
    if inner is None or _direction(inner) != inner_direction or len(inner.outputs[0].uses()) != 1:
        return None
    amounts = [const_eval(v) for v in (inner.inputs[1], node.inputs[1])]
    if any(a is None or a.size == 0 for a in amounts):
        return None
    return inner, *(a.astype(np.int64) for a in amounts)


def _direction(node: ir.Node) -> str | None:
    if node.op_type != "BitShift" or node.domain != "":
        return None
    return node.attributes["direction"].as_string()


def _joined_bytes(value: ir.Value) -> ir.Value | None:
    """The uint8 bytes ``[..., P, 4]`` that ``words_from_bytes`` joined into the uint32
    words ``value`` (the marker says so; intermediate types may not be inferred yet)."""
    node = value.producer()
    if node is None or not node.metadata_props.get(WORDS_FROM_BYTES):
        return None
    cursor = node
    for op in ("Add", "Gather", "BitShift", "Cast"):  # Add(Add(b0, b1), ...), b0 = Gather(BitShift(Cast(bytes)))
        cursor = cursor.inputs[0].producer()
        if cursor is None or cursor.op_type != op:
            return None
    return cursor.inputs[0] if int_attr(cursor, "to", 0) == ir.DataType.UINT32 else None


def _byte_view(graph: ir.Graph, value: ir.Value, before: ir.Node) -> ir.Value | None:
    """Bytes ``[*S, 4]`` of the words ``value`` (shape S): the shape ops between the join
    and ``value`` replayed on the joined bytes, with one trailing axis of 4 more."""
    ops = []
    while (data := _joined_bytes(value)) is None:
        node = value.producer()
        if node is None or node.op_type not in _SHAPE_OPS or node.domain != "":
            return None
        ops.append(node)
        value = node.inputs[0]
    words_rank = _rank(data)
    for node in reversed(ops):
        if data is None or words_rank is None:
            return None
        data, words_rank = _replay(graph, node, data, words_rank - 1, before)
    return data


def _rank(value: ir.Value) -> int | None:
    """The rank of ``value``, from its shape or the constant target of its Reshape."""
    if rank(value) is not None:
        return rank(value)
    node = value.producer()
    target = const_eval(node.inputs[1]) if node is not None and node.op_type == "Reshape" else None
    return None if target is None else int(target.size)


def _replay(
    graph: ir.Graph, node: ir.Node, data: ir.Value, words_rank: int, before: ir.Node
) -> tuple[ir.Value | None, int | None]:
    """``node`` (a shape op on words of rank ``words_rank``) applied to their bytes: the
    bytes' value and rank (one more than the words')."""
    op, inputs, attributes = node.op_type, [data], []
    out_rank = words_rank
    if op in ("Reshape", "Expand"):
        target = const_eval(node.inputs[1])
        if target is None or int_attr(node, "allowzero", 0):
            return None, None
        inputs.append(initializer(graph, np.append(target.astype(np.int64), 4), "byte_view_shape"))
        out_rank = int(target.size) if op == "Reshape" else max(words_rank, int(target.size))
    elif op in ("Squeeze", "Unsqueeze"):
        axes = const_eval(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
        if axes is None:
            return None, None
        axes = np.asarray(axes, np.int64).reshape(-1)
        out_rank = words_rank - axes.size if op == "Squeeze" else words_rank + axes.size
        inputs.append(initializer(graph, axes % (words_rank if op == "Squeeze" else out_rank), "byte_view_axes"))
    elif op == "Transpose":
        perm = node.attributes.get("perm")
        perm = list(perm.as_ints()) if perm is not None else list(reversed(range(words_rank)))
        attributes.append(ir.AttrInt64s("perm", [*perm, words_rank]))
    view = ir.Node("", op, inputs, attributes=attributes, name=f"{node.name}/bytes")
    graph.insert_before(before, view)
    return view.outputs[0], out_rank + 1


def _field(graph: ir.Graph, view: ir.Value, start: np.ndarray, width: np.ndarray, before: ir.Node) -> ir.Value:
    """Bits ``start .. start + width - 1`` (constant arrays, broadcast like the words) of
    the little-endian words whose bytes are ``view`` ``[..., 4]``, as uint32.

    Shifting and masking distribute over the disjoint bytes, so the field is the sum over
    bytes j of ``((byte_j // 2^max(0, t - 8j)) mod 2^m_j) * 2^max(0, 8j - t)``, with m_j the
    bits of the field above 8j - t; in int32 every term is below 2^width <= 2^31."""
    nodes: list[ir.Node] = []

    def add(op, inputs, **attrs):
        attributes = [ir.AttrString(k, v) if isinstance(v, str) else ir.AttrInt64(k, v) for k, v in attrs.items()]
        nodes.append(ir.Node("", op, inputs, attributes=attributes, name=f"{before.name}/bytes_{len(nodes)}"))
        return nodes[-1].outputs[0]

    def const(value):
        return initializer(graph, np.asarray(value, np.int32), "byte_field")

    start, width = np.broadcast_arrays(start, width)
    total = None
    for j in range(4):
        down = np.maximum(0, start - 8 * j)
        up = np.maximum(0, 8 * j - start)
        keep = np.clip(width - up, 0, 8)  # a byte holds at most 8 of the field's bits
        if not np.any((keep > 0) & (down < 8)):
            continue
        share = add(
            "Cast",
            [add("Gather", [view, initializer(graph, np.asarray(j, np.int64), "byte_index")], axis=-1)],
            to=int(ir.DataType.INT32),
        )
        if np.any(down):
            share = add("Div", [share, const(1 << np.minimum(down, 8))])
        share = add("Mod", [share, const(1 << keep)])
        if np.any(up):
            share = add("Mul", [share, const(1 << np.minimum(up, 31))])
        total = share if total is None else add("Add", [total, share])
    total = add("Cast", [total], to=int(ir.DataType.UINT32))
    for node in nodes:
        graph.insert_before(before, node)
    return total
