"""Every registered handler is exercised by some parity case (a handler without a test
is a defect), and every refusal is explained."""

from __future__ import annotations

import mlx2onnx
from mlx2onnx.translate import registry
from tests.support.harness import traced_primitives
from tests.translate.test_parity import CASES, all_case_modules


def covered_primitives() -> set[str]:
    covered: set[str] = set()
    for case in CASES:
        covered |= traced_primitives(case, case.dtypes[0])
    for module in all_case_modules():
        covered |= set(getattr(module, "COVERS", ()))
    return covered


def test_every_handler_has_a_parity_case():
    missing = sorted(set(mlx2onnx.supported_primitives()) - covered_primitives())
    assert not missing, f"handlers without a parity case: {missing}"


def test_refusals_say_why_and_what_to_do():
    for name, refusal in registry.refusals().items():
        assert len(refusal.reason) > 20 and len(refusal.advice) > 10, name


def test_handler_families_import_no_other_family():
    """A family (a module of ``op_mappings.FAMILIES``) shares code only through the helper
    modules beside it (bits, order_keys, indices, quant_codes, lowbit), never by importing
    another family's handlers' module."""
    import ast
    from pathlib import Path

    import mlx2onnx.op_mappings as op_mappings

    families = {m.__name__.rsplit(".", 1)[-1]: Path(m.__file__) for m in op_mappings.FAMILIES}
    crossing = []
    for name, path in families.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [alias.name for alias in node.names]
                crossing += [f"{name} -> {t}" for t in targets if t in families]
    assert not crossing, crossing


def test_handlers_read_only_the_handler_api():
    """Every ``ctx.<member>`` a module of ``op_mappings/`` reads is in the documented
    handler API (translate.handler_api.HANDLER_API), and the context has every member the
    API lists: handlers never reach the translator's state (its values, nodes, trace)."""
    import ast
    from pathlib import Path

    import mlx2onnx.op_mappings as op_mappings
    from mlx2onnx.translate.context import Context
    from mlx2onnx.translate.handler_api import members

    allowed = members()
    outside = set()
    for path in sorted(Path(op_mappings.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "ctx":
                if node.attr not in allowed:
                    outside.add(f"{path.name}: ctx.{node.attr}")
    assert not outside, sorted(outside)
    assert "values" not in allowed and "nodes" not in allowed and "trace" not in allowed
    missing = [name for name in allowed if not hasattr(Context, name) and name not in ("op", "settings")]
    assert not missing, missing
    assert {"op", "settings"} <= set(Context.__init__.__code__.co_names)  # set per instance
