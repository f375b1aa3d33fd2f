"""A package's record of itself (config.json's ``mlx2onnx``, mlx2onnx/io/notes.py): one
typed record, one writer, one reader."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import mlx2onnx
from mlx2onnx.errors import UsageError
from mlx2onnx.io.notes import KEY, PackageNotes, noted, notes_in, read_notes


def test_notes_are_written_by_their_config_names_and_read_back(tmp_path):
    notes = PackageNotes(
        task="feature-extraction",
        pooling="last_token",
        normalize=False,
        transformers_js="cannot run: no such type",
        left_padded_batches="not served: the scan reads padding",
    )
    config = noted({"model_type": "qwen3", KEY: {"task": "stale"}}, notes)
    assert config[KEY] == {
        "task": "feature-extraction",
        "transformers.js": "cannot run: no such type",
        "left_padded_batches": "not served: the scan reads padding",
        "pooling": "last_token",
        "normalize": False,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert read_notes(tmp_path) == notes
    assert notes.runtime_notes() == {
        "transformers.js": "cannot run: no such type",
        "left_padded_batches": "not served: the scan reads padding",
    }


def test_defaults_are_not_written_and_an_older_package_reads_as_defaults(tmp_path):
    assert noted({"model_type": "llama", KEY: {"why": "old"}}, PackageNotes()) == {"model_type": "llama"}
    # a feature-extraction package says it has no pooling: its embedding is the sentence_embedding output
    assert PackageNotes(task="feature-extraction").as_json() == {"task": "feature-extraction", "pooling": None}
    assert read_notes(tmp_path) == PackageNotes()  # no config.json
    assert notes_in({"model_type": "llama"}).task == "text-generation"
    assert notes_in({KEY: {"task": "image-classification", "from_a_newer_mlx2onnx": 1}}).task == "image-classification"
    with pytest.raises(UsageError, match="is not an object"):
        notes_in({KEY: ["task"]})


def _writes_notes(path: Path) -> list[str]:
    """Where ``path`` writes config.json's notes itself: a ``"mlx2onnx"`` key in a dict
    literal or a subscript, or an ``mlx2onnx=`` keyword."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        keys = node.keys if isinstance(node, ast.Dict) else []
        if any(isinstance(k, ast.Constant) and k.value == KEY for k in keys):
            found.append(f"{path}:{node.lineno}")
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value == KEY:
            found.append(f"{path}:{node.lineno}")
        if isinstance(node, ast.keyword) and node.arg == KEY:
            found.append(f"{path}:{node.value.lineno}")
    return found


def test_only_the_notes_module_writes_or_reads_the_notes_key(tmp_path):
    root = Path(mlx2onnx.__file__).parent
    found = [f for p in sorted(root.rglob("*.py")) if p.name != "notes.py" for f in _writes_notes(p)]
    assert not found, found
    sample = tmp_path / "sample.py"  # the scan finds each way of writing the key
    sample.write_text('a = {"mlx2onnx": {}}\nb["mlx2onnx"] = {}\nc = dict(d, mlx2onnx={})\n')
    assert len(_writes_notes(sample)) == 3
