"""The reference pages in docs/ are generated (python -m scripts.generate_docs) and must
match what the code says now: records.md (record layouts), primitives.md (registry and
case tables), passes.md (the pass pipeline), handlers.md (the handler API)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlx2onnx.capture import records
from mlx2onnx.translate import registry
from scripts import architecture, generate_docs

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "primitives.md"


@pytest.mark.slow
def test_committed_primitive_table_is_current():
    generated = generate_docs.primitives_markdown()
    committed = DOC.read_text() if DOC.exists() else ""
    assert committed == generated, (
        f"{DOC} is stale: regenerate it with `python -m scripts.generate_docs primitives.md` and commit it"
    )


def test_table_lists_every_registered_primitive_once():
    text = DOC.read_text()
    rows = [line.split("|")[1].strip().strip("`") for line in text.splitlines() if line.startswith("| `")]
    assert len(rows) == len(set(rows))
    assert set(registry.handlers()) | set(registry.refusals()) <= set(rows)
    assert set(records.CALLBACK_PRIMITIVES) <= set(rows)


def test_refused_rows_carry_their_reason():
    text = DOC.read_text()
    for name, refusal in registry.refusals().items():
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert "| refused |" in row and " ".join(refusal.reason.split()) in row.replace("\\|", "|")


def test_committed_records_reference_is_current():
    """docs/records.md is generated from mlx2onnx/capture/records.py (argument layouts, enum codes)."""
    path = ROOT / "docs" / "records.md"
    assert path.read_text() == records.reference_markdown(), (
        f"{path} is stale: regenerate it with `python -m scripts.generate_docs records.md`"
    )


def test_committed_pass_reference_is_current():
    """docs/passes.md is generated from mlx2onnx.passes.PIPELINE."""
    from mlx2onnx import passes

    path = ROOT / "docs" / "passes.md"
    assert path.read_text() == passes.reference_markdown(), (
        f"{path} is stale: regenerate it with `python -m scripts.generate_docs passes.md`"
    )


def test_committed_handler_api_reference_is_current():
    """docs/handlers.md is generated from mlx2onnx.translate.handler_api (record kinds, ctx members)."""
    from mlx2onnx.translate import handler_api

    path = ROOT / "docs" / "handlers.md"
    assert path.read_text() == handler_api.reference_markdown(), (
        f"{path} is stale: regenerate it with `python -m scripts.generate_docs handlers.md`"
    )


def test_generate_docs_check_passes_on_the_committed_pages():
    assert generate_docs.main(["--check", "records.md", "passes.md", "handlers.md", "architecture.md"]) == 0


def test_the_architecture_page_is_written_from_the_modules_docstrings():
    """docs/architecture.md lists every module of the package under its stage, with the first
    paragraph of its docstring: a module without one, or the page left behind the code, fails."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    stages = {ROOT / folder for folder, _ in architecture.STAGES}
    assert page == architecture.architecture_markdown(), (
        "docs/architecture.md is stale: run python -m scripts.generate_docs architecture.md"
    )
    for folder in ("mlx2onnx", "op_mappings", "models"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "__init__.py" and path.parent in stages:  # the stage's own paragraph
                continue
            row = f"| `{path.relative_to(ROOT)}` | "
            assert row in page, f"{path.relative_to(ROOT)} is not on docs/architecture.md"
            assert page.split(row, 1)[1].split(" |\n", 1)[0].strip(), f"{path.relative_to(ROOT)} has no docstring"


def test_the_pages_name_only_what_exists(tmp_path):
    """README.md and docs/*.md name no file, module or name that is gone; a page naming one
    is reported."""
    assert architecture.stale_references() == []
    page = tmp_path / "page.md"
    page.write_text(
        "see `mlx2onnx.dynamic_shapes`, `mlx2onnx/capture/gone.py`, [x](nowhere.md), "
        "`mlx2onnx.capture.records.FIELDS` and `mlx2onnx.dynamic`\n"
    )
    found = architecture.stale_references([page], root=tmp_path)
    assert found == [
        "page.md: link nowhere.md",
        "page.md: mlx2onnx/capture/gone.py",
        "page.md: mlx2onnx.dynamic_shapes",
    ], found
