"""Where a runtime computes a model with less precision than MLX, under the options it runs with.

A runtime's defaults can trade MLX's float32 numbers for speed, and the check runs each
runtime as the user does: so it says which trade the runtime made for this model, and
compares float outputs at the tolerance of that arithmetic (``precision``, a row of
:data:`mlx2onnx.verify.compare.DEFAULT_TOLERANCES`). What each runtime does was measured
(docs/runtimes.md, tests/runtimes/test_arithmetic.py):

- onnxruntime (Python, node): ``MatMulNBits`` computes with the ``accuracy_level`` its node
  carries (4: int8 activations, quantized per block); a 4-bit ``DequantizeLinear`` feeding
  a ``MatMul`` is fused into ``MatMulNBits`` at graph optimization level extended or all,
  with the session's ``session.qdq_matmulnbits_accuracy_level`` (default 4).
- onnxruntime-web (WebAssembly) computes every ``MatMulNBits`` in float32.
- OpenVINO on the CPU computes in its ``INFERENCE_PRECISION_HINT`` (bf16 by default on CPUs
  with bfloat16 units) and quantizes the activations of low-bit-weight products to int8 in
  groups of ``DYNAMIC_QUANTIZATION_GROUP_SIZE`` (default 32; 0 turns it off).
- tract (0.23) runs a ``MatMulNBits`` of 32-code blocks as its own 4-bit blocks with float16
  scales (other block sizes exactly): scales that float16 cannot hold are rounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping

import onnx

INT8_ACTIVATIONS = "int8-activations"  # the tolerance row of int8-quantized activations
ORT_ACCURACY_KEY = "session.qdq_matmulnbits_accuracy_level"
ORT_DEFAULT_ACCURACY = "4"
ORT_INT8_ACCURACY = 4
_FOUR_BIT = (onnx.TensorProto.UINT4, onnx.TensorProto.INT4)


@dataclass(frozen=True)
class Arithmetic:
    """One way a runtime computes this model with less precision than MLX."""

    what: str  # "int8 activations in 4-bit products"
    why: str  # what in the model and the options makes the runtime do it
    precision: str  # the tolerance row float outputs are compared at

    def __str__(self) -> str:
        return f"{self.what} ({self.why})"


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attribute.g)
            for sub in attribute.graphs:
                yield from _graphs(sub)


def _nodes(proto: onnx.ModelProto, op_type: str, domain: str = "") -> Iterator[tuple[onnx.GraphProto, onnx.NodeProto]]:
    for graph in _graphs(proto.graph):
        for node in graph.node:
            if node.op_type == op_type and node.domain == domain:
                yield graph, node


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((a.i for a in node.attribute if a.name == name), default)


def matmul_nbits_levels(proto: onnx.ModelProto) -> list[int]:
    """The ``accuracy_level`` of every ``com.microsoft.MatMulNBits`` node (subgraphs too)."""
    return [_attribute(n, "accuracy_level", 0) for _, n in _nodes(proto, "MatMulNBits", "com.microsoft")]


def blocked_dequantize_matmuls(proto: onnx.ModelProto) -> int:
    """4-bit ``DequantizeLinear`` nodes of a constant, blocked along an axis, that a
    ``MatMul`` reads as its second input: the pairs onnxruntime fuses into MatMulNBits."""
    graphs = list(_graphs(proto.graph))
    four_bit = {t.name for g in graphs for t in g.initializer if t.data_type in _FOUR_BIT}
    count = 0
    for graph in graphs:
        weights = {
            n.output[0]
            for n in graph.node
            if n.op_type == "DequantizeLinear" and n.input[0] in four_bit and _attribute(n, "block_size", 0) > 0
        }
        count += sum(1 for n in graph.node if n.op_type == "MatMul" and len(n.input) > 1 and n.input[1] in weights)
    return count


def low_bit_products(proto: onnx.ModelProto) -> int:
    """Products with low-bit weights: MatMulNBits nodes and 4-bit DequantizeLinear + MatMul."""
    return len(matmul_nbits_levels(proto)) + blocked_dequantize_matmuls(proto)


def onnxruntime(proto: onnx.ModelProto, config: Mapping[str, str], level: str, wasm: bool = False) -> list[Arithmetic]:
    """What onnxruntime trades for ``proto`` with session ``config`` at optimization ``level``."""
    if wasm:  # the WebAssembly build has no int8 kernels: MatMulNBits runs in float32 at every level
        return []
    explicit = sum(1 for level_ in matmul_nbits_levels(proto) if level_ == ORT_INT8_ACCURACY)
    session_level = str(config.get(ORT_ACCURACY_KEY, ORT_DEFAULT_ACCURACY))
    fused = (
        blocked_dequantize_matmuls(proto)
        if level in ("all", "extended") and session_level == str(ORT_INT8_ACCURACY)
        else 0
    )
    reasons = []
    if explicit:
        reasons.append(f"{explicit} MatMulNBits node(s) carry accuracy_level 4")
    if fused:
        setting = "the session's default" if ORT_ACCURACY_KEY not in config else "the session's"
        reasons.append(
            f"{fused} 4-bit DequantizeLinear + MatMul pair(s) fused into MatMulNBits at "
            f"{setting} {ORT_ACCURACY_KEY}={session_level}"
        )
    if not reasons:
        return []
    return [Arithmetic("int8 activations in 4-bit products", "; ".join(reasons), INT8_ACTIVATIONS)]


def tract(proto: onnx.ModelProto, base_dir: str = "") -> list[Arithmetic]:
    """What tract trades for ``proto`` (initializers in external data found from ``base_dir``)."""
    import numpy as np

    rounded = 0
    for graph, node in _nodes(proto, "MatMulNBits", "com.microsoft"):
        if _attribute(node, "block_size", 0) != 32 or len(node.input) < 3:
            continue
        scales = next((t for t in graph.initializer if t.name == node.input[2]), None)
        values = None if scales is None else onnx.numpy_helper.to_array(scales, base_dir).astype(np.float32)
        if values is None or not np.array_equal(values.astype(np.float16).astype(np.float32), values):
            rounded += 1
    if not rounded:
        return []
    return [
        Arithmetic(
            "float16 scales in 4-bit products",
            f"tract runs {rounded} MatMulNBits of 32-code blocks as "
            "its own blocks with float16 scales; quantized_weights='bytes' keeps them float32",
            "float16",
        )
    ]


def openvino(proto: onnx.ModelProto, precision: str, group_size: int) -> list[Arithmetic]:
    """What OpenVINO's CPU plugin trades for ``proto`` at inference precision ``precision``
    (as the compiled model reports it: ``f32``, ``bf16``, ``f16``) and dynamic quantization
    group ``group_size``."""
    out = []
    narrow = {"bf16": "bfloat16", "f16": "float16"}.get(precision)
    if narrow:
        out.append(
            Arithmetic(
                f"{narrow} inference precision",
                f"INFERENCE_PRECISION_HINT={precision}; INFERENCE_PRECISION_HINT=f32 computes in float32",
                narrow,
            )
        )
    products = low_bit_products(proto)
    if group_size > 0 and products:
        out.append(
            Arithmetic(
                "int8 activations in low-bit products",
                f"DYNAMIC_QUANTIZATION_GROUP_SIZE={group_size} over {products} low-bit product(s); 0 turns it off",
                INT8_ACTIVATIONS,
            )
        )
    return out
