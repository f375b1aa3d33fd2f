"""What one export knows, as one typed value: :class:`ExportSettings`.

The exporter (:mod:`mlx2onnx.exporter`) makes it from its options and the traces; the
translation context hands it to every handler (``ctx.settings``) and the pass pipeline
reads it (:mod:`mlx2onnx.passes`): the opset, how float dtypes are carried, how
quantized weights are stored, and, for a dynamic export, the plan of symbols with their
steps, ranges and the closed forms of the dimensions they name. Nothing of it travels
through globals, context variables or the model's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..capture.symbolic import Plan
from ..dtypes import FloatPolicy

QUANTIZED_WEIGHT_CHOICES = ("packed", "bytes", "dequantize", "dequantizelinear")


@dataclass(frozen=True)
class ExportSettings:
    """opset: the ONNX opset the export targets.
    floats: how MLX float dtypes are carried in the graph (bfloat16 as float32, ...).
    quantized_weights: how constant quantized weights are stored: ``"packed"`` (4-bit
        blocks the runtime keeps packed where they fit, as ``MatMulNBits`` that carries its
        own accuracy level; else MLX's bytes unpacked in the graph), ``"bytes"`` (always
        MLX's bytes, unpacked in the graph), ``"dequantize"`` (dense, at export time) or
        ``"dequantizelinear"`` (the blocks as standard ``DequantizeLinear`` + ``MatMul``).
    int8_activations: the 4-bit blocks ask the runtime to quantize their activations to
        int8 (``MatMulNBits`` accuracy level 4) instead of computing in float32.
    plan: the dynamic dimensions (None for a static export).
    """

    opset: int
    floats: FloatPolicy = field(default_factory=FloatPolicy)
    quantized_weights: str = "packed"
    int8_activations: bool = False
    plan: Plan | None = None
    target: str = "portable"

    @property
    def portable(self) -> bool:
        """Whether the export must run in every runtime of the portable target."""
        return self.target == "portable"

    @property
    def dynamic(self) -> bool:
        return self.plan is not None
