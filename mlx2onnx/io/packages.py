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
from .graph_files import DTYPE_SUFFIXES, dtype_file, graph_dtype
from .ownership import folder_refusal, publish, refuse_enclosing, write_marker
from .saving import staging_folder

# what a model folder's tokenizer (and chat template) is written in, for both runtimes
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "added_tokens.json",
    "chat_template.jinja",
)


def check_folder_path(out: str | os.PathLike, overwrite: bool, source: str | os.PathLike | None = None) -> Path:
    """``out`` as a package folder path, or ExportOptionError naming what is wrong: a
    ``.onnx`` name, the current directory, the model folder ``source`` or a folder holding
    either, or an existing path that is not an empty folder (with ``overwrite``: that is
    not a package mlx2onnx wrote, or that holds other files; :mod:`.ownership`)."""
    out = Path(out)
    if out.suffix == ".onnx":
        raise ExportOptionError(f"{str(out)!r} names a file; a package is a folder (e.g. {str(out.with_suffix(''))}/)")
    refuse_enclosing(out, source)
    if out.exists() or out.is_symlink():
        reason = folder_refusal(out)
        empty = out.is_dir() and not out.is_symlink() and not any(out.iterdir())
        if not overwrite and not empty:
            raise ExportOptionError(
                f"{str(out)!r} already exists"
                + (
                    " and is not a package mlx2onnx wrote: choose a new folder"
                    if reason
                    else "; pass overwrite=True (--overwrite) to replace the package"
                )
            )
        if reason:
            raise ExportOptionError(reason)
    for parent in out.parents:  # the first existing folder above must take the package
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                raise ExportOptionError(f"{str(parent)!r} is a file, so {str(out)!r} cannot be made inside it")
            break
    return out


@contextlib.contextmanager
def package_folder(out: Path, source: Path) -> Iterator[Path]:
    """:func:`folder_written_whole` with ``onnx/`` made, where a package's graphs go, and
    its model card written last (:func:`~.card.write_card`, ``source``: the model folder)."""
    from .card import write_card

    with folder_written_whole(out) as package:
        (package / "onnx").mkdir()
        yield package
        write_card(package, Path(source))


@contextlib.contextmanager
def folder_written_whole(out: Path) -> Iterator[Path]:
    """A staging folder that becomes ``out`` when the block ends without an exception,
    marked as mlx2onnx's (:func:`~.ownership.write_marker`); an existing ``out`` is
    replaced only when mlx2onnx wrote it and it holds nothing else (checked again now), and
    is kept if the move fails. On an exception nothing of it is left and ``out`` is
    untouched."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with staging_folder(out.parent, f".{out.name}.") as staging:
        folder = staging / "folder"
        folder.mkdir()
        yield folder
        if out.exists() or out.is_symlink():
            reason = folder_refusal(out)
            if reason:
                raise ExportOptionError(reason)
        write_marker(folder)
        publish(staging, [(folder, out)])


def save_graphs(package: Path, graphs: dict, check: bool) -> dict[str, str]:
    """Write each ``{file under the package: onnx-ir model}``, a graph under ``onnx/``
    named by what it holds (:func:`graph_dtype`: ``onnx/model.onnx`` of 4-bit weights is
    written as ``onnx/model_q4.onnx``), its external data (when it has any) beside it as
    ``<file>_data``; ``check``: onnx.checker's full check first. Returns the dtype of each
    graph under ``onnx/``, ``{name: dtype}``, for :func:`write_json_files`."""
    from .saving import save_model

    dtypes = {name: graph_dtype(graph) for name, graph in graphs.items() if name.startswith("onnx/")}
    for name, graph in graphs.items():
        file = dtype_file(name, dtypes[name]) if name in dtypes else name
        save_model(graph, package / file, check=check, data_name=f"{Path(file).name}_data")
    return dtypes


def copy_present(folder: Path, package: Path, names) -> None:
    """Copy the files of ``names`` that ``folder`` has into ``package``."""
    for name in names:
        if (folder / name).is_file():
            shutil.copy2(folder / name, package / name)


def write_json_files(package: Path, files: dict[str, dict], dtypes: dict[str, str] | None = None) -> None:
    """Write each ``{file name: content}`` as strict JSON (:func:`json_text`) into
    ``package``; config.json's ``transformers.js_config`` (write the graphs first) names
    the dtype of each graph under ``onnx/`` as transformers.js names its files, so that
    its defaults find them (in a browser, wasm's default dtype is q8, the file
    ``model_quantized.onnx``): ``dtypes`` (:func:`save_graphs`) gives each graph's,
    ``{"onnx/model.onnx": "q4"}``; a graph not in it is ``fp32``, its file without a
    suffix. A ``filename`` in another file (genai_config.json's) that names a graph is
    changed to the file written for it. config.json also says when a graph keeps its
    weights in an ``.onnx_data`` file (``use_external_data_format``)."""
    dtypes = dtypes or {}
    written = {name: dtype_file(name, dtype) for name, dtype in dtypes.items()}
    suffixes = tuple(suffix for suffix in DTYPE_SUFFIXES.values() if suffix)  # the other dtypes' files
    named = {path.stem: "fp32" for path in (package / "onnx").glob("*.onnx") if not path.stem.endswith(suffixes)}
    named.update({Path(name).stem: dtype for name, dtype in dtypes.items()})
    for name, content in files.items():
        if name == "config.json" and named:
            js = dict(content.get("transformers.js_config", {}), dtype=dict(sorted(named.items())))
            if any((package / "onnx").glob("*.onnx_data")):
                js["use_external_data_format"] = True
            content = dict(content, **{"transformers.js_config": js})
        elif written:
            content = _renamed(content, written)
        (package / name).write_text(json_text(content))


def _renamed(content, written: dict[str, str]):
    """``content`` with each ``filename`` that is a key of ``written`` changed to its value."""
    if isinstance(content, dict):
        return {
            k: written.get(v, v) if k == "filename" and isinstance(v, str) else _renamed(v, written)
            for k, v in content.items()
        }
    if isinstance(content, list):
        return [_renamed(v, written) for v in content]
    return content


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
