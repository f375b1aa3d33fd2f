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
