"""A tied quantized embedding held once: its lookup reads the codes and scales of the output
head's low-bit product instead of a second copy.

A model whose head is its embedding (``tie_word_embeddings``) holds one table of codes in
MLX; the export makes two: the bytes the embedding's ``Gather`` reads, and the head's
``MatMulNBits`` blocks (4-bit codes as they are; 8-bit codes as two 4-bit planes, their low
and high nibbles). Here the ``Gather`` reads the head's blocks (and the head's scales, where
they are the same numbers), rebuilding the bytes from the planes with integer operations:
the same bytes, so the same numbers. Only after the data is compared: a table whose rows are
not a head's codes is left alone. SmolLM2-135M's package: 28 MiB less (benchmarks/README.md).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from .graph import fresh_name, initializer, remove_dead

BITWISE_OPS = 18  # the opset with BitwiseAnd / BitwiseOr


def read_tied_tables_from_the_head(model: ir.Model) -> int:
    """``Gather(table, ids)`` of a constant table equal to a MatMulNBits product's codes (or
    scales) -> the same rows read from that product's initializers. Returns the tables no
    longer stored."""
    graph = model.graph
    if model.opset_imports.get("", 0) < BITWISE_OPS:
        return 0
    heads = _heads(graph)
    if not heads:
        return 0
    changed = 0
    for node in list(graph):
        if (
            node.op_type != "Gather"
            or node.domain != ""
            or node.attributes.get("axis", ir.AttrInt64("axis", 0)).as_int()
        ):
            continue
        table, ids = node.inputs
        if table is None or table.const_value is None or not table.is_initializer() or ids is None:
            continue
        if table.shape is None or len(table.shape) != 2 or table.shape[0] not in heads:
            continue
        if node.outputs[0].is_graph_output():
            continue
        rows = _rows(graph, node, table, heads[table.shape[0]])
        if rows is None:
            continue
        node.outputs[0].replace_all_uses_with(rows)
        remove_dead(graph, [node])
        changed += 1
    if changed:
        graph.sort()
    return changed


def _heads(graph: ir.Graph) -> dict[int, list[ir.Node]]:
    """N -> the 4-bit MatMulNBits nodes with N rows and constant blocks, in graph order."""
    found: dict[int, list[ir.Node]] = {}
    for node in graph:
        if node.op_type != "MatMulNBits" or node.domain != "com.microsoft" or len(node.inputs) < 3:
            continue
        if node.attributes["bits"].as_int() != 4 or any(v is None or v.const_value is None for v in node.inputs[1:3]):
            continue
        found.setdefault(node.attributes["N"].as_int(), []).append(node)
    return found


def _rows(graph: ir.Graph, gather: ir.Node, table: ir.Value, heads: list[ir.Node]) -> ir.Value | None:
    """The gathered rows of ``table`` read from one of ``heads``, or None where none holds it."""
    data = table.const_value.numpy()
    ids = gather.inputs[1]
    for node in heads:
        planes = _planes(node, heads)
        k = node.attributes["K"].as_int()
        if data.dtype == np.uint8 and data.shape[1] == k // 2 and len(planes) >= 1:
            if _same(_plane_rows(planes[0]), data):
                return _gathered_plane(graph, gather, planes[0], ids, k)
        if data.dtype == np.uint8 and data.shape[1] == k and len(planes) == 2:
            low, high = (_plane_rows(p) for p in planes)
            if _same(_nibbles(data[:, 0::2]) | (_nibbles(data[:, 1::2]) << 4), low) and _same(
                (data[:, 0::2] >> 4) | (data[:, 1::2] & np.uint8(0xF0)), high
            ):
                return _rebuilt_bytes(graph, gather, planes, ids, k)
        scales = node.inputs[2].const_value.numpy()
        if data.dtype == scales.dtype and data.size == scales.size and _same(scales.reshape(data.shape), data):
            return _gathered_flat(graph, gather, node.inputs[2], ids, data.shape[1])
    return None


def _planes(node: ir.Node, heads: list[ir.Node]) -> list[ir.Node]:
    """``node`` and, for an 8-bit product, its high-nibble plane: the product over the same
    input whose result is added to it."""
    uses = list(node.outputs[0].uses())
    if len(uses) == 1 and uses[0].node.op_type == "Add":
        other = uses[0].node.inputs[1 - uses[0].idx]
        partner = other.producer() if other is not None else None
        if partner in heads and partner.inputs[0] is node.inputs[0]:
            return [node, partner]
    return [node]


def _plane_rows(node: ir.Node) -> np.ndarray:
    blocks = node.inputs[1].const_value.numpy()
    return blocks.reshape(blocks.shape[0], -1)


def _nibbles(x: np.ndarray) -> np.ndarray:
    return x & np.uint8(15)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def _emit(graph: ir.Graph, before: ir.Node, op_type: str, inputs: list, dtype: ir.DataType, **attrs) -> ir.Value:
    node = ir.Node(
        "",
        op_type,
        inputs,
        attributes=ir.convenience.convert_attributes(attrs),
        name=fresh_name(graph, f"{before.name}/{op_type}"),
    )
    node.outputs[0].name = node.name
    node.outputs[0].type = ir.TensorType(dtype)
    graph.insert_before(before, node)
    return node.outputs[0]


def _ints(graph: ir.Graph, values, base: str) -> ir.Value:
    return initializer(graph, np.asarray(values, np.int64), base)


def _row_bytes(graph: ir.Graph, gather: ir.Node, plane: ir.Node, ids: ir.Value, k: int) -> ir.Value:
    """One plane's bytes of the gathered rows: [*ids, K / 2] uint8."""
    rows = _emit(graph, gather, "Gather", [plane.inputs[1], ids], ir.DataType.UINT8, axis=0)
    return _emit(graph, gather, "Reshape", [rows, _shape_with(graph, gather, ids, k // 2)], ir.DataType.UINT8)


def _shape_with(graph: ir.Graph, gather: ir.Node, ids: ir.Value, last: int) -> ir.Value:
    """[*shape(ids), last]."""
    int64 = ir.DataType.INT64
    dims = _emit(graph, gather, "Shape", [ids], int64)
    return _emit(graph, gather, "Concat", [dims, _ints(graph, [last], f"{gather.name}/last_dim")], int64, axis=0)


def _gathered_plane(graph, gather, plane, ids, k) -> ir.Value:
    return _row_bytes(graph, gather, plane, ids, k)


def _rebuilt_bytes(graph, gather, planes, ids, k) -> ir.Value:
    """8-bit codes from the low and high nibble planes: code 2i = (low_i & 15) | (high_i << 4),
    code 2i+1 = (low_i >> 4) | (high_i & 0xF0), interleaved."""
    low, high = (_row_bytes(graph, gather, p, ids, k) for p in planes)
    u8 = ir.DataType.UINT8

    def const(value):
        return initializer(graph, np.asarray(value, np.uint8), f"{gather.name}/c_uint8_{value}")

    even = _emit(
        graph,
        gather,
        "BitwiseOr",
        [
            _emit(graph, gather, "BitwiseAnd", [low, const(15)], u8),
            _emit(graph, gather, "BitShift", [high, const(4)], u8, direction="LEFT"),
        ],
        u8,
    )
    odd = _emit(
        graph,
        gather,
        "BitwiseOr",
        [
            _emit(graph, gather, "BitShift", [low, const(4)], u8, direction="RIGHT"),
            _emit(graph, gather, "BitwiseAnd", [high, const(0xF0)], u8),
        ],
        u8,
    )
    last = _ints(graph, [-1], f"{gather.name}/last_axis")
    pairs = _emit(
        graph,
        gather,
        "Concat",
        [_emit(graph, gather, "Unsqueeze", [v, last], u8) for v in (even, odd)],
        u8,
        axis=-1,
    )
    return _emit(graph, gather, "Reshape", [pairs, _shape_with(graph, gather, ids, k)], u8)


def _gathered_flat(graph, gather, flat: ir.Value, ids: ir.Value, width: int) -> ir.Value:
    """Rows of ``width`` read from a flat table: Gather(flat, ids * width + [0 .. width))."""
    int64 = ir.DataType.INT64  # (ids of unknown type are cast too: a Cast to int64 of int64 is free)
    ids64 = ids if ids.dtype == int64 else _emit(graph, gather, "Cast", [ids], int64, to=int64.value)
    last = _ints(graph, [-1], f"{gather.name}/last_axis")
    start = _emit(
        graph,
        gather,
        "Mul",
        [
            _emit(graph, gather, "Unsqueeze", [ids64, last], ir.DataType.INT64),
            _ints(graph, width, f"{gather.name}/width"),
        ],
        ir.DataType.INT64,
    )
    index = _emit(
        graph, gather, "Add", [start, _ints(graph, np.arange(width), f"{gather.name}/columns")], ir.DataType.INT64
    )
    return _emit(graph, gather, "Gather", [flat, index], flat.dtype, axis=0)
