"""The passes: clean-up and fusion of the assembled model, in one ordered list.

:data:`PIPELINE` is the order, and reads as the documentation of what happens after
translation (``docs/passes.md`` is generated from it). Each pass keeps parity with MLX
(tests/passes/test_passes.py and the parity suite); each says what it requires and ensures
(:class:`.base.Pass`).
"""

from __future__ import annotations

import onnx_ir as ir

from ..translate.settings import ExportSettings
from . import (
    attention,
    broadcasts,
    byte_fields,
    cleanup,
    constants,
    conv_fold,
    gelu,
    layout,
    norms,
    pooling,
    products,
    rotary,
    shapes,
    tied_codes,
    weights,
    zero_sign,
)
from .base import Kernel, Pass, PassContractError, run

PIPELINE: list[Pass] = [
    Pass(
        "untie_extrema",
        zero_sign.untie_extrema,
        "a maximum or minimum of two values that can hold no -0.0 is a plain Max/Min (no tie between "
        "zeros of two signs to settle as MLX does)",
    ),
    Pass(
        "drop_redundant_broadcasts",
        broadcasts.drop_redundant_broadcasts,
        "no Expand is left whose every consumer broadcasts to the same result by itself (MLX records an "
        "explicit Broadcast before each elementwise op)",
    ),
    Pass(
        "fold_static_shape_reads",
        shapes.fold_static_shape_reads,
        "Shape, and Gather of a Shape, that read only static dims are constants",
    ),
    Pass(
        "onnxscript_optimizer",
        constants.fold_and_rewrite,
        "small constant subgraphs (Arange, masks, RoPE tables) are folded; onnxscript's exact rewrite rules "
        "are applied to a fixed point; functions inlined, constants lifted to initializers. First: its "
        "Reshape-MatMul-Reshape collapse must see the MatMuls before they become Gemms",
        inputs=("opset",),
    ),
    Pass(
        "fields_from_bytes",
        byte_fields.fields_from_bytes,
        "no bit field ((w << a) >> b, or (w >> t) & mask) of packed words joined from bytes is cut from the "
        "words: it is assembled from the bytes it spans (OpenVINO's CPU plugin misreads uint32 values at or "
        "above 2^31)",
        portable_only=True,
    ),
    Pass(
        "gemm_with_transposed_weights",
        weights.gemm_with_transposed_weights,
        "a 2-D MatMul by a transposed float weight is Gemm(transB=1): the weight is stored as MLX holds it",
    ),
    Pass(
        "fold_weight_transposes",
        weights.fold_weight_transposes,
        "no Transpose reads an initializer used nowhere else (the initializer is stored transposed)",
    ),
    Pass(
        "named_reshape_dims",
        shapes.keep_named_reshape_dims,
        "a Reshape target copies (0) a dynamic input dim it keeps, so shape inference names it",
        dynamic_only=True,
    ),
    Pass(
        "drop_redundant_broadcasts_2",
        broadcasts.drop_redundant_broadcasts,
        "as drop_redundant_broadcasts, for the Expands the folding exposed",
    ),
    Pass(
        "fuse_layer_norm",
        norms.fuse_layer_norm,
        "MLX's decomposed layer_norm chains are LayerNormalization",
        feature="LayerNormalization",
    ),
    Pass(
        "fuse_rms_norm",
        norms.fuse_rms_norm,
        "MLX's decomposed rms_norm chains are RMSNormalization",
        feature="RMSNormalization",
    ),
    Pass(
        "fuse_gelu",
        gelu.fuse_gelu,
        "float32 erf and tanh GELU chains are Gelu (with MLX's overflow to +inf kept)",
        feature="Gelu",
        kernels=(Kernel("Gelu"),),
    ),
    Pass(
        "drop_unseen_zero_sign_repairs",
        zero_sign.drop_unseen_zero_sign_repairs,
        "no sign-of-zero repair after a Where is left where every consumer ignores the sign of a zero; "
        "before fuse_attention, whose mask Where it frees",
    ),
    Pass(
        "fuse_attention",
        attention.fuse_attention,
        "float32 softmax(q k^T * scale + mask) v chains are Attention (grouped-query where MLX broadcast the keys)",
        feature="Attention",
        kernels=(Kernel("Attention", "T1"),),
    ),
    Pass(
        "fuse_rotary_embedding",
        rotary.fuse_rotary_embedding,
        "float32 half-split rotary embeddings are RotaryEmbedding",
        feature="RotaryEmbedding",
        kernels=(Kernel("RotaryEmbedding"),),
    ),
    Pass(
        "fuse_pooling",
        pooling.fuse_pooling,
        "MLX's pooling windows (Pad + AsStrided, or Reshape/Transpose blocks, + max/mean) are MaxPool / "
        "AveragePool where exactly so, at every size of a dynamic plan",
        inputs=("plan",),
    ),
    Pass(
        "sink_transposes",
        layout.sink_transposes,
        "the NHWC<->NCHW Transposes around convs and pools are moved until they cancel",
    ),
    Pass(
        "fold_conv_affine",
        conv_fold.fold_conv_affine,
        "per-channel constant Add/Sub/Mul/Div after a Conv (inference BatchNorm, a bias) are in its weights",
    ),
    Pass(
        "max_zero_to_relu",
        conv_fold.max_zero_to_relu,
        "Max(x, +0.0) of a float x that can hold no -0.0 (a Conv or bias add before it) is Relu(x)",
    ),
    Pass(
        "read_tied_tables_from_the_head",
        tied_codes.read_tied_tables_from_the_head,
        "no table of codes or scales is stored twice: an embedding lookup whose table is the head's low-bit "
        "product's codes (or scales) reads them from the product's blocks (the bytes rebuilt exactly)",
    ),
    Pass(
        "stack_sibling_products",
        products.fuse_sibling_products,
        "low-bit products (MatMulNBits) of one input, with their affine centre terms, are one product over "
        "their stacked rows and a Split (bit for bit the same: each output column is its own sum)",
    ),
    Pass(
        "cse_and_dce",
        cleanup.deduplicate_and_prune,
        "initializers folded alike are stored once, no subexpression is computed twice, no node is unused",
    ),
]


def reference_markdown() -> str:
    """docs/passes.md: :data:`PIPELINE` in order, each pass with its contract."""
    lines = [
        "# The passes",
        "",
        "Generated by `python -m scripts.generate_docs passes.md` from `mlx2onnx.passes.PIPELINE`; do not",
        "edit by hand. After translation the exporter runs these passes in this order (unless",
        "`optimize=False`); a pass whose requirements the export does not meet is skipped. Every",
        "pass keeps the graph outputs' names, element types and order (checked after each pass),",
        "and the number of rewrites each made is in the model's `mlx2onnx.passes` metadata.",
        "",
        "| # | pass | module | requires | ensures |",
        "|---|---|---|---|---|",
    ]
    for k, step in enumerate(PIPELINE, 1):
        module = step.run.__module__.removeprefix("mlx2onnx.")
        lines.append(
            f"| {k} | `{step.name}` | `{module}.{step.run.__name__}` | {step.requires() or '-'} | {step.ensures} |"
        )
    return "\n".join(lines) + "\n"


def optimize(model: ir.Model, settings: ExportSettings) -> dict[str, int]:
    """Run :data:`PIPELINE` on ``model``; returns the rewrites each pass made."""
    return run(PIPELINE, model, settings)


__all__ = ["PIPELINE", "Kernel", "Pass", "PassContractError", "optimize", "reference_markdown"]
