"""What a package records of itself in its config.json, under ``mlx2onnx``: one typed
record (:class:`PackageNotes`), one writer (:func:`noted`) and one reader
(:func:`notes_in`, :func:`read_notes`).

The record says the task the package was exported for, what a runtime cannot do with it
and why (``transformers.js``, ``onnxruntime-genai``, ``left_padded_batches``), how a
feature-extraction package's vectors are pooled, which model type a retyped text package
came from, which mlx-image model an image-classification package is, and what the package's
other dtype files measured. Fields at their defaults are not written: a text-generation
package that every runtime runs records nothing.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

KEY = "mlx2onnx"
# the notes that say what a runtime cannot do with the package, by their names in config.json
RUNTIME_NOTES = ("onnxruntime-genai", "transformers.js", "left_padded_batches")
_SPELLED = {"transformers_js": "transformers.js", "onnxruntime_genai": "onnxruntime-genai"}


@dataclass(frozen=True)
class PackageNotes:
    """A package's record of itself (config.json's ``mlx2onnx``)."""

    task: str = "text-generation"
    transformers_js: str | None = None  # "cannot run: WHY"
    onnxruntime_genai: str | None = None  # "cannot run: WHY"
    left_padded_batches: str | None = None  # "not served: WHY"
    pooling: str | None = None  # feature-extraction: the pipeline's pooling (None: the sentence_embedding output)
    normalize: bool | None = None  # feature-extraction: whether the pipeline normalises the pooled vectors
    source_model_type: str | None = None  # text generation: the folder's model type, where the package's differs
    why: str | None = None  # why the package has another model type than its folder
    mlx_image_model: str | None = None  # image-classification: the mlxim model the weights are
    dtype_files: dict | None = None  # text generation: the other dtype files and what they measured

    def runtime_notes(self) -> dict[str, str]:
        """{config.json's name: note} of what a runtime cannot do with the package."""
        written = self.as_json()
        return {name: written[name] for name in RUNTIME_NOTES if name in written}

    def as_json(self) -> dict:
        """The fields that differ from their defaults, by their names in config.json (a
        feature-extraction package's pooling always: none says the embedding is the
        ``sentence_embedding`` output)."""
        return {
            _SPELLED.get(f.name, f.name): getattr(self, f.name)
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default or (f.name == "pooling" and self.task == "feature-extraction")
        }


_FIELDS = {_SPELLED.get(f.name, f.name): f.name for f in dataclasses.fields(PackageNotes)}


def noted(config: dict, notes: PackageNotes) -> dict:
    """``config`` (a package's config.json content) with ``notes`` recorded (and none where
    every field is at its default)."""
    out = {k: v for k, v in config.items() if k != KEY}
    written = notes.as_json()
    return {**out, KEY: written} if written else out


def notes_in(config: dict) -> PackageNotes:
    """The notes a package's config.json content records (defaults where it records none;
    a package of another mlx2onnx may record more, which is not read)."""
    recorded = config.get(KEY, {})
    if not isinstance(recorded, dict):
        raise UsageError(f"config.json's {KEY!r} is not an object: {recorded!r}")
    return PackageNotes(**{_FIELDS[k]: v for k, v in recorded.items() if k in _FIELDS})


def read_notes(package: str | Path) -> PackageNotes:
    """The notes of the package folder ``package`` (defaults without a config.json)."""
    config = Path(package) / "config.json"
    return notes_in(json.loads(config.read_text())) if config.is_file() else PackageNotes()
