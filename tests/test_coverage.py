"""Every registered handler is exercised by some parity case (a handler without a test
is a defect), and every refusal is explained."""

from __future__ import annotations

import mlx2onnx
from mlx2onnx.translate import registry

from harness import traced_primitives
from test_parity import CASES, all_case_modules


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
