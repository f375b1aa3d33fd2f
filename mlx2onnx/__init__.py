"""mlx2onnx: export Apple MLX functions and models to ONNX, verified against MLX.

import mlx2onnx
model = mlx2onnx.export(fun, x, mask=m)          # an onnx.ModelProto
report = mlx2onnx.verify(model, fun, x, mask=m)  # onnxruntime vs MLX
"""

from ._version import __version__
from .capture import Dim, Trace, capture
from .errors import (
    CaptureError,
    ConversionError,
    DynamicShapeError,
    DynamicSpecError,
    ExportOptionError,
    MissingPackageError,
    Mlx2OnnxError,
    NotAModelFolderError,
    UnsupportedModelError,
    UnsupportedPrimitiveError,
    UnsupportedVariantError,
    UsageError,
    UserFunctionError,
    VerificationError,
)
from .exporter import Exporter, export, save, supported_primitives
from .verify.parity import Verifier, VerifyReport, verify

__all__ = [
    "__version__",
    "CaptureError",
    "Dim",
    "ConversionError",
    "DynamicShapeError",
    "DynamicSpecError",
    "Exporter",
    "ExportOptionError",
    "MissingPackageError",
    "Mlx2OnnxError",
    "NotAModelFolderError",
    "Trace",
    "UnsupportedModelError",
    "UnsupportedPrimitiveError",
    "UnsupportedVariantError",
    "UsageError",
    "UserFunctionError",
    "VerificationError",
    "Verifier",
    "VerifyReport",
    "capture",
    "export",
    "save",
    "supported_primitives",
    "verify",
]
