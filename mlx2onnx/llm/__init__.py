"""Decoder LLMs: export with a KV cache, packages for onnxruntime-genai and transformers.js,
and greedy generation with either in onnxruntime (:func:`generate`)."""

from .caches import GrowingKVCache
from .check import check_package, package_generate
from .decoder import (
    DecoderExport,
    cache_layout,
    export_decoder,
)
from .generation import generate
from .greedy import mlx_generate
from .package import export_package

__all__ = [
    "DecoderExport",
    "GrowingKVCache",
    "cache_layout",
    "check_package",
    "export_decoder",
    "export_package",
    "generate",
    "mlx_generate",
    "package_generate",
]
