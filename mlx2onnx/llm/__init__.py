"""Decoder LLMs: export with a KV cache, and generate tokens with the export."""

from .decoder import (
    DecoderExport,
    GrowingKVCache,
    cache_layout,
    export_decoder,
    generate,
    mlx_generate,
)

__all__ = ["DecoderExport", "GrowingKVCache", "cache_layout", "export_decoder", "generate", "mlx_generate"]
