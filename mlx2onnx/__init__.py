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
    Mlx2OnnxError,
    UnsupportedModelError,
    UnsupportedPrimitiveError,
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
    "Mlx2OnnxError",
    "Trace",
    "UnsupportedModelError",
    "UnsupportedPrimitiveError",
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
