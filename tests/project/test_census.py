"""docs/packages.md's census (scripts/census.py) is the one the installed MLX packages, the
runtimes' type lists, the registry and the measured table give now: an architecture
registered, or a row measured, without the census written again fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import census

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.third_party
def test_the_census_in_packages_md_is_current():
    for module in ("mlx_vlm", "mlx_embeddings", "mlx_audio", "mlxim", "onnxruntime_genai"):
        pytest.importorskip(module)
    if not (ROOT / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    page = (ROOT / "docs" / "packages.md").read_text()
    written = census.BEGIN + page.split(census.BEGIN)[1].split(census.END)[0] + census.END
    assert written == census.section(), "run `python -m scripts.census`"


@pytest.mark.third_party
def test_every_registered_vision_language_architecture_is_in_the_census_as_served():
    """Each mlx-vlm architecture of the registry appears in the census as served, with its
    measured transformers.js result (a registered architecture the census cannot place fails)."""
    pytest.importorskip("mlx_vlm")
    if not (ROOT / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    from mlx2onnx.tasks import VISION_LANGUAGE

    table, typed, serving = census.census()
    served = {line.split("|")[2].strip() for line in table.splitlines()[2:] if "| served:" in line}
    rows = {line.split("|")[2].strip(): line for line in table.splitlines()[2:]}
    from mlx_vlm.utils import MODEL_REMAPPING

    for model_type in VISION_LANGUAGE:
        module = MODEL_REMAPPING.get(model_type, model_type)
        assert module in served, module
        assert "PASS" in rows[module].split("|")[6], rows[module]
    assert serving <= typed
