"""The reference pages in docs/ are generated (python scripts/generate_docs.py) and must
match what the code says now: records.md (record layouts), primitives.md (registry and
case tables), passes.md (the pass pipeline), handlers.md (the handler API)."""

from __future__ import annotations

from pathlib import Path

import importlib.util

from mlx2onnx.capture import records
from mlx2onnx.translate import registry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "primitives.md"
_spec = importlib.util.spec_from_file_location("generate_docs", ROOT / "scripts" / "generate_docs.py")
generate_docs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate_docs)


def test_committed_primitive_table_is_current():
    generated = generate_docs.primitives_markdown()
    committed = DOC.read_text() if DOC.exists() else ""
    assert committed == generated, (
        f"{DOC} is stale: regenerate it with `python scripts/generate_docs.py primitives.md` and commit it"
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
        f"{path} is stale: regenerate it with `python scripts/generate_docs.py records.md`")


def test_committed_pass_reference_is_current():
    """docs/passes.md is generated from mlx2onnx.passes.PIPELINE."""
    from mlx2onnx import passes

    path = ROOT / "docs" / "passes.md"
    assert path.read_text() == passes.reference_markdown(), (
        f"{path} is stale: regenerate it with `python scripts/generate_docs.py passes.md`")


def test_committed_handler_api_reference_is_current():
    """docs/handlers.md is generated from mlx2onnx.translate.handler_api (record kinds, ctx members)."""
    from mlx2onnx.translate import handler_api

    path = ROOT / "docs" / "handlers.md"
    assert path.read_text() == handler_api.reference_markdown(), (
        f"{path} is stale: regenerate it with `python scripts/generate_docs.py handlers.md`")


def test_generate_docs_check_passes_on_the_committed_pages():
    assert generate_docs.main(["--check", "records.md", "passes.md", "handlers.md"]) == 0
