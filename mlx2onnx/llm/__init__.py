"""Decoder LLMs: export with a KV cache, generate tokens with the export, and packages for
onnxruntime-genai and transformers.js."""

from .caches import GrowingKVCache
from .decoder import (
    DecoderExport,
    cache_layout,
    export_decoder,
    generate,
    mlx_generate,
)
from .check import check_package, package_generate
from .package import export_package

__all__ = ["DecoderExport", "GrowingKVCache", "cache_layout", "check_package", "export_decoder", "export_package",
           "generate", "mlx_generate", "package_generate"]
