"""The last pass: constants folded alike are stored once, repeated subexpressions are
computed once, and unused nodes go (onnx-ir's common passes)."""

from __future__ import annotations

import onnx_ir as ir
import onnx_ir.passes.common as common_passes


def deduplicate_and_prune(model: ir.Model) -> int:
    """Deduplicate initializers (up to 64 KiB), eliminate common subexpressions, remove
    unused nodes. Returns the nodes removed."""
    before = len(model.graph)
    common_passes.DeduplicateInitializersPass(size_limit=1 << 16)(model)
    common_passes.CommonSubexpressionEliminationPass()(model)
    common_passes.RemoveUnusedNodesPass()(model)
    return before - len(model.graph)


def prune(model: ir.Model) -> int:
    """Remove the nodes nothing uses (after a fusion left its chain behind)."""
    before = len(model.graph)
    common_passes.RemoveUnusedNodesPass()(model)
    return before - len(model.graph)
