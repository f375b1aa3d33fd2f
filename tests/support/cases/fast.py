"""Fused ``mx.fast`` primitives (GPU stream only).

This CPU never records them (``mx.fast`` ops decompose before export), so they are
tested through hand-built GPU records in ``tests/capture/test_fast_records.py`` (the
forward ops) and ``tests/capture/test_grad_records.py`` (the fused backward norms); the
decomposed CPU forms are covered by the elementwise, reduce, shape and matmul cases.
"""

from __future__ import annotations

COVERS = {"RMSNorm", "LayerNorm", "RoPE", "ScaledDotProductAttention", "RMSNormVJP", "LayerNormVJP"}

CASES: list = []
