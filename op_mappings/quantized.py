"""quantized primitives (see the module docstrings of the other families for the conventions)."""

from __future__ import annotations
