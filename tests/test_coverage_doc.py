"""docs/primitives.md is generated (python -m mlx2onnx.coverage --write docs/primitives.md)
and must match what the registry and the case tables say now."""

from __future__ import annotations

from pathlib import Path

from mlx2onnx import coverage
from mlx2onnx.translate import registry

DOC = Path(__file__).resolve().parent.parent / "docs" / "primitives.md"


def test_committed_primitive_table_is_current():
    generated = coverage.generate()
    committed = DOC.read_text() if DOC.exists() else ""
    assert committed == generated, (
        f"{DOC} is stale: regenerate it with `python -m mlx2onnx.coverage --write docs/primitives.md` and commit it"
    )


def test_table_lists_every_registered_primitive_once():
    text = DOC.read_text()
    rows = [line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows))
    assert set(registry.handlers()) | set(registry.refusals()) <= set(rows)
    assert set(coverage.CALLBACK_PRIMITIVES) <= set(rows)


def test_refused_rows_carry_their_reason():
    text = DOC.read_text()
    for name, refusal in registry.refusals().items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert "| refused |" in row and " ".join(refusal.reason.split()) in row.replace("\\|", "|")


def test_committed_records_reference_is_current():
    """docs/records.md is generated from mlx2onnx/records.py (argument layouts, enum codes)."""
    from pathlib import Path

    from mlx2onnx.capture import records

    path = Path(__file__).resolve().parent.parent / "docs" / "records.md"
    assert path.read_text() == records.reference_markdown(), (
        f"{path} is stale: regenerate it with `python -m mlx2onnx.records --write docs/records.md`")
