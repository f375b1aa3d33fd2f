"""Fused ``mx.fast`` primitives (GPU stream only).

This CPU never records them (``mx.fast`` ops decompose before export), so they are
tested through hand-built GPU records in ``tests/test_fast_records.py``; the
decomposed CPU forms are covered by the elementwise, reduce, shape and matmul cases.
"""

from __future__ import annotations

COVERS = {"RMSNorm", "LayerNorm", "RoPE", "ScaledDotProductAttention"}

CASES: list = []
