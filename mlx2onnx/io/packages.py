"""Package folders (a model folder's export for the runtimes' own pipelines): the output
path checked before any work, and the folder written whole or not at all."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Iterator

from ..errors import ExportOptionError
from .saving import staging_folder

# what a model folder's tokenizer (and chat template) is written in, for both runtimes
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja")


def check_package_path(out: str | os.PathLike, overwrite: bool) -> Path:
    """``out`` as a package folder path, or ExportOptionError naming what is wrong."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise ExportOptionError(f"{str(out)!r} already exists; pass overwrite=True (--overwrite) to replace it")
    if out.suffix == ".onnx":
        raise ExportOptionError(f"{str(out)!r} names a file; a package is a folder (e.g. {str(out.with_suffix(''))}/)")
    return out


@contextlib.contextmanager
def package_folder(out: Path) -> Iterator[Path]:
    """A staging folder (with ``onnx/`` made) that becomes ``out`` when the block ends
    without an exception; on an exception nothing of it is left and ``out`` is untouched."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with staging_folder(out.parent, f".{out.name}.") as staging:
        package = staging / "package"
        (package / "onnx").mkdir(parents=True)
        yield package
        if out.exists():
            shutil.rmtree(out)
        os.replace(package, out)


def save_graphs(package: Path, graphs: dict, check: bool) -> None:
    """Write each ``{file under the package: onnx-ir model}``, its external data (when it
    has any) beside it as ``<file>_data``; ``check``: onnx.checker's full check first."""
    from .saving import save_model

    for name, graph in graphs.items():
        save_model(graph, package / name, check=check, data_name=f"{Path(name).name}_data")


def copy_present(folder: Path, package: Path, names) -> None:
    """Copy the files of ``names`` that ``folder`` has into ``package``."""
    for name in names:
        if (folder / name).is_file():
            shutil.copy2(folder / name, package / name)


def write_json_files(package: Path, files: dict[str, dict]) -> None:
    """Write each ``{file name: content}`` as strict JSON (:func:`json_text`) into
    ``package``; config.json tells transformers.js (``use_external_data_format``) when a
    graph under ``onnx/`` keeps its weights in an ``.onnx_data`` file (write the graphs
    first)."""
    external = any((package / "onnx").glob("*.onnx_data"))
    for name, content in files.items():
        if name == "config.json" and external:
            content = dict(content, **{"transformers.js_config": {**content.get("transformers.js_config", {}),
                                                                  "use_external_data_format": True}})
        (package / name).write_text(json_text(content))


def json_text(config: dict) -> str:
    """``config`` as strict JSON: JavaScript's JSON.parse (transformers.js) rejects the
    ``Infinity`` and ``NaN`` Python writes (mamba2's ``time_step_limit`` is [0, inf]), so
    an infinity is written as the largest float64 and NaN as null."""
    def strict(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None if math.isnan(value) else math.copysign(sys.float_info.max, value)
        if isinstance(value, dict):
            return {k: strict(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [strict(v) for v in value]
        return value
    return json.dumps(strict(config), indent=2, allow_nan=False)
