"""Re-fuse MLX's CPU decomposition of ``mx.fast.scaled_dot_product_attention`` into the
ONNX ``Attention`` op (opset 23).

On the CPU MLX runs SDPA as its fallback (``mlx/fast.cpp``), and the export reads::

    q = scale * q                                   # [B, Hq, L, D]
    q = Reshape(q, [B, Hkv, R, L, D])               # grouped-query heads (R = Hq / Hkv > 1)
    k = Unsqueeze(k, 2); v = Unsqueeze(v, 2)        #   only then
    s = MatMul(q, Transpose(k, swap last two))
    s = Where(mask, s, finfo.min)                   # bool or causal mask, when there is one
    o = MatMul(Softmax(s, -1), v)
    o = Reshape(o, [B, Hq, L, Dv])                  # grouped-query heads only

which becomes ``Attention(scale * q, k, v, bias, scale=1)``: the query keeps MLX's own
scaling (one rounding, as in MLX), grouped-query heads are the op's own, and a bool mask
becomes the finfo.min/2 bias that :func:`op_mappings.fast.scaled_dot_product_attention`
uses for the fused primitive (a fully masked row stays uniform, as in MLX); a square
causal mask is ``is_causal=1``. Chains with an additive float mask (an all -inf row is NaN
in MLX, zero in onnxruntime), sinks or logsumexp are left alone, as the fused primitive's
handler leaves them; so is anything whose shapes do not prove the pattern. The one corner
where the op differs from MLX is the fused primitive's: a masked key whose score is +inf
or NaN (an infinite query or key) still takes part in onnxruntime's softmax.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..translate.markers import BOOL_MASK_BIAS
from .graph import const_eval, initializer, producer, replace_value
from .graph import dims as _dims
from .graph import same_dim as _same

_LOWEST = float(np.finfo(np.float32).min)


def _all_same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


def _perm(node: ir.Node) -> list[int] | None:
    attr = node.attributes.get("perm")
    return list(attr.as_ints()) if attr is not None else None


def _unsqueezed(value: ir.Value, axis: int) -> ir.Value | None:
    """x when ``value`` = Unsqueeze(x, [axis]) (axis counted in the result's rank)."""
    node = producer(value, "Unsqueeze")
    if node is None or len(node.inputs) < 2:
        return None
    axes = const_eval(node.inputs[1], depth=0)
    out = _dims(value)
    if axes is None or axes.size != 1 or out is None or int(axes.reshape(())) % len(out) != axis % len(out):
        return None
    return node.inputs[0]


def _grouped_query(q5: ir.Value, kv_heads: int) -> ir.Value | None:
    """q when ``q5`` = Reshape(q [B, Hq, L, D]) to [B, Hkv, R, L, D] with Hkv * R = Hq."""
    node = producer(q5, "Reshape")
    if node is None:
        return None
    q, grouped = node.inputs[0], _dims(q5)
    dims = _dims(q)
    if dims is None or grouped is None or len(dims) != 4 or len(grouped) != 5:
        return None
    heads, r = dims[1], grouped[2]
    if not (isinstance(heads, int) and isinstance(r, int) and _same(grouped[1], kv_heads) and kv_heads * r == heads):
        return None
    return q if _all_same([dims[0], *dims[2:]], [grouped[0], *grouped[3:]]) else None


def _grouped_output(o: ir.Value) -> ir.Value | None:
    """The Reshape of o [B, Hkv, R, L, Dv] to [B, Hkv * R, L, Dv] that alone reads o."""
    uses = o.uses()
    if len(uses) != 1 or o.is_graph_output() or uses[0].node.op_type != "Reshape" or uses[0].node.domain != "":
        return None
    out = uses[0].node.outputs[0]
    a, b = _dims(o), _dims(out)
    if a is None or b is None or len(a) != 5 or len(b) != 4:
        return None
    if not (isinstance(a[1], int) and isinstance(a[2], int) and _same(b[1], a[1] * a[2])):
        return None
    return out if _all_same([a[0], *a[3:]], [b[0], *b[2:]]) else None


def _constant_or(mask: ir.Value) -> ir.Value | np.ndarray:
    array = const_eval(mask, depth=0)
    return array if array is not None else mask


def _ungrouped_mask(mask: ir.Value) -> ir.Value | np.ndarray | None:
    """The mask as broadcast against [B, Hq, L, Lk] scores, from MLX's grouped one
    (``[..., Hkv, R, L, Lk]`` or ``[..., 1, 1, L, Lk]``, made by Reshape or Unsqueeze
    of the original; masks of rank <= 2 are not grouped): a constant comes back as an
    array, a runtime mask as the value it was grouped from."""
    dims = _dims(mask)
    if dims is None:
        return None
    if len(dims) <= 2:
        return _constant_or(mask)
    if len(dims) < 4 or not all(isinstance(d, int) for d in dims[-4:-2]):
        return None
    merged = [*dims[:-4], dims[-4] * dims[-3], *dims[-2:]]
    array = const_eval(mask, depth=0)
    if array is not None:
        return array.reshape(array.shape[:-4] + (array.shape[-4] * array.shape[-3],) + array.shape[-2:])
    node = mask.producer()
    if node is None or node.domain != "" or node.op_type not in ("Reshape", "Unsqueeze"):
        return None
    source = node.inputs[0]
    if node.op_type == "Unsqueeze" and _unsqueezed(mask, -3) is None:
        return None
    if node.op_type == "Reshape" and len(dims) - 1 != len(_dims(source) or []):
        return None
    return source if _all_same(_dims(source) or [], merged) else None


def _mask_of(scores: ir.Value) -> tuple[ir.Node | None, ir.Value | None] | None:
    """(the Where, its bool mask) when ``scores`` feeds Where(mask, scores, finfo.min) and
    on to Softmax; (None, None) when it feeds Softmax directly; else None."""
    uses = scores.uses()
    if len(uses) != 1 or scores.is_graph_output():
        return None
    node = uses[0].node
    if node.op_type == "Softmax" and node.domain == "":
        return None, None
    if node.op_type != "Where" or node.domain != "" or uses[0].idx != 1:
        return None
    mask, _, lowest = node.inputs
    fill = const_eval(lowest, depth=0)
    if mask.dtype != ir.DataType.BOOL or fill is None or fill.size != 1 or float(fill.reshape(())) != _LOWEST:
        return None
    return node, mask


def _softmax_of(value: ir.Value) -> ir.Node | None:
    uses = value.uses()
    if len(uses) != 1 or value.is_graph_output():
        return None
    node = uses[0].node
    if node.op_type != "Softmax" or node.domain != "":
        return None
    axis = node.attributes.get("axis")
    return node if axis is not None and axis.as_int() in (-1, len(_dims(value) or [0]) - 1) else None


class _Chain:
    """One matched attention chain, from its score MatMul."""

    def __init__(self, qk: ir.Node):
        self.qk = qk

    def match(self) -> bool:
        q_side, kt = self.qk.inputs
        transpose = producer(kt, "Transpose")
        rank = len(_dims(kt) or [])
        if transpose is None or rank not in (4, 5):
            return False
        if _perm(transpose) != [*range(rank - 2), rank - 1, rank - 2]:
            return False
        k = transpose.inputs[0] if rank == 4 else _unsqueezed(transpose.inputs[0], 2)
        k_dims = _dims(k)
        if k is None or k_dims is None or len(k_dims) != 4 or not isinstance(k_dims[1], int):
            return False
        q = q_side if rank == 4 else _grouped_query(q_side, k_dims[1])
        q_dims = _dims(q)
        if q is None or q_dims is None or len(q_dims) != 4 or not isinstance(q_dims[1], int) or q_dims[1] % k_dims[1]:
            return False
        if not (_same(q_dims[0], k_dims[0]) and _same(q_dims[3], k_dims[3])):
            return False  # Attention takes one batch and one head size for q and k
        found = _mask_of(self.qk.outputs[0])
        if found is None:
            return False
        where, mask = found
        softmax = _softmax_of(where.outputs[0] if where is not None else self.qk.outputs[0])
        if softmax is None:
            return False
        probs = softmax.outputs[0]
        uses = probs.uses()
        if len(uses) != 1 or probs.is_graph_output() or uses[0].node.op_type != "MatMul" or uses[0].idx != 0:
            return False
        pv = uses[0].node
        v = pv.inputs[1] if rank == 4 else _unsqueezed(pv.inputs[1], 2)
        v_dims = _dims(v)
        if v is None or v_dims is None or not _all_same(v_dims[:3], k_dims[:3]):
            return False
        out = pv.outputs[0] if rank == 4 else _grouped_output(pv.outputs[0])
        if out is None or not _all_same(_dims(out) or [], [*q_dims[:3], v_dims[3]]):
            return False
        if mask is not None:
            mask = _ungrouped_mask(mask) if rank == 5 else _constant_or(mask)
            if mask is None:
                return False
        self.q, self.k, self.v, self.mask, self.out = q, k, v, mask, out
        return True

    def fuse(self, graph: ir.Graph) -> None:
        causal, bias = 0, None
        q_len, k_len = _dims(self.q)[2], _dims(self.k)[2]
        if isinstance(self.mask, np.ndarray):
            square = self.mask.shape[-2:]
            if (
                isinstance(q_len, int)
                and q_len == k_len
                and square == (q_len, k_len)
                and self.mask.size == q_len * k_len
                and np.array_equal(self.mask.reshape(square), np.tri(q_len, dtype=bool))
            ):
                causal = 1
            else:
                bias = initializer(graph, np.where(self.mask, 0.0, BOOL_MASK_BIAS).astype(np.float32), "attention_bias")
        elif self.mask is not None:
            zero = initializer(graph, np.array(0.0, np.float32), "zero")
            low = initializer(graph, np.array(BOOL_MASK_BIAS, np.float32), "attention_mask_bias")
            to_bias = ir.Node("", "Where", [self.mask, zero, low], name=f"{self.qk.name}/mask_bias")
            graph.insert_before(self.qk, to_bias)
            bias = to_bias.outputs[0]
        inputs = [self.q, self.k, self.v] + ([bias] if bias is not None else [])
        node = ir.Node(
            "",
            "Attention",
            inputs,
            name=f"{self.qk.name}/fused_Attention",
            attributes=[ir.AttrFloat32("scale", 1.0), ir.AttrInt64("is_causal", causal)],
        )
        node.metadata_props.update(self.qk.metadata_props)
        graph.insert_before(self.out.producer(), node)
        result = node.outputs[0]
        result.shape, result.type = self.out.shape, self.out.type
        replace_value(graph, self.out, result)


def fuse_attention(model: ir.Model) -> int:
    """MLX's CPU attention chain -> Attention (float32, opset 23, where onnxruntime runs it)."""
    graph = model.graph
    fused = 0
    for node in list(graph):
        if node.graph is None or node.op_type != "MatMul" or node.domain != "":
            continue
        if node.outputs[0].dtype != ir.DataType.FLOAT:
            continue
        chain = _Chain(node)
        if chain.match():
            chain.fuse(graph)
            fused += 1
    return fused
