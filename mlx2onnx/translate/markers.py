"""What handlers leave in the graph for the passes that run after them.

Handlers (``op_mappings/``) write these node metadata keys and constants; the passes
(``mlx2onnx/passes/zero_sign.py``, ``attention.py``, ``constants.py``) read them. They live here, in the translate
stage, so that nothing in a handler imports a later stage.
"""

from __future__ import annotations

import numpy as np

# Node metadata: the Mul of select_value's zero-sign repair (op_mappings/elementwise.py);
# passes.drop_unseen_zero_sign_repairs removes it where no consumer can see the sign.
ZERO_SIGN_REPAIR = "mlx2onnx.zero_sign_repair"

# Node metadata: quantized weight unpacking (op_mappings/quantized.py, conv.py); constant
# folding must not fold it, or the weights would be stored unpacked.
KEEP_PACKED = "mlx2onnx.keep_packed"

# Node metadata: the Add that joins packed words from their bytes (words_from_bytes in
# op_mappings/quantized.py, portable target); passes.byte_fields assembles the bit fields
# MLX cuts out of those words from the bytes instead.
WORDS_FROM_BYTES = "mlx2onnx.words_from_bytes"

# A bool attention mask becomes an additive bias of this value for onnxruntime's
# Attention: far below any real score (so a partly masked row gives its masked keys
# weight 0) but above float32's lowest value, so a fully masked row stays a uniform
# softmax as in MLX (which replaces masked scores by finfo.min), instead of the zero row
# onnxruntime writes when a row's maximum is -inf or finfo.min.
BOOL_MASK_BIAS = float(np.finfo(np.float32).min) / 2

# Value metadata (``value.meta``, in memory only): an initializer that holds a module
# parameter (translate.context), whose value passes do not assume (passes.constants leaves
# x * w alone where w happens to be all ones). On the value, so no pass's replacement of
# another value can make a stale identity claim it.
PARAMETER = "mlx2onnx.parameter"


def is_parameter(value) -> bool:
    return value is not None and bool(value.meta.get(PARAMETER))


# Node metadata: the MLX record a node translates, "Primitive:index" (primitive_tag); the
# value a record's k-th output becomes is named value_name(record, k). verify.localize reads
# both back to match the graph to a trace.
PRIMITIVE_TAG = "mlx.primitive"

# Node metadata: the width in bits of the MLX quantized weights a low-bit block product
# holds (op_mappings.lowbit writes it on the first block of each product: 8-bit weights
# are two 4-bit blocks); io.graph_files names a package's file by it.
WEIGHT_BITS = "mlx.weight_bits"


def primitive_tag(record) -> str:
    """``"Name:index"`` of a record (anything with ``name`` and ``index``)."""
    return f"{record.name}:{record.index}"


def value_name(record, k: int = 0) -> str:
    """The ONNX name of a record's ``k``-th output: ``name_index`` (``:k`` after the first)."""
    return f"{record.name.lower()}_{record.index}" + (f":{k}" if k else "")


# Node metadata: the node's output holds its MLX value in another layout, written by the
# layout pass (passes.sink_plan) when it moves a Transpose past the node: the MLX value is
# Transpose(output, perm), perm as comma-separated axes. verify.localize reads it back to
# compare the value in MLX's layout.
LAYOUT_TAG = "mlx.layout"


def layout_perm(node) -> list[int] | None:
    """The perm of ``LAYOUT_TAG`` on an onnx_ir or protobuf node (None: MLX's layout)."""
    props = node.metadata_props
    text = (
        props.get(LAYOUT_TAG)
        if isinstance(props, dict)
        else next((p.value for p in props if p.key == LAYOUT_TAG), None)
    )
    return None if text is None else [int(a) for a in text.split(",")]


def relaid(node, perm: list[int]) -> None:
    """Record that ``node``'s output is now its former value transposed by the inverse of
    ``perm`` (the former value = Transpose(output, perm)), composing with what it held."""
    before = layout_perm(node)
    total = list(perm) if before is None else [perm[i] for i in before]
    if total == list(range(len(total))):
        node.metadata_props.pop(LAYOUT_TAG, None)
    else:
        node.metadata_props[LAYOUT_TAG] = ",".join(map(str, total))
