"""What an export may replace, and replacing it without losing anything.

An export replaces only what mlx2onnx wrote: a folder written whole (a package,
check-suite's reports) that carries its marker (:data:`FOLDER_MARKER`, the list of the
files it was written with) and holds no other file, or an ``.onnx`` file whose producer is mlx2onnx (and the weights file beside it).
It never replaces the current directory, the model folder it exports, or a folder that
holds either. Files are moved into place by :func:`publish`: what is replaced is moved
aside first and put back if the move in fails, so an interrupted or failing write leaves
the old files or the new ones, never neither.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from ..errors import ExportOptionError
from ..translate.assemble import PRODUCER

FOLDER_MARKER = ".mlx2onnx.json"
_LISTED = 5  # foreign files named in a refusal


# -- packages ---------------------------------------------------------------------------------
def write_marker(package: Path) -> None:
    """Mark ``package`` (a staged folder, written whole) as mlx2onnx's, listing its files."""
    from .._version import __version__

    files = sorted(p.relative_to(package).as_posix() for p in package.rglob("*") if p.is_file())
    (package / FOLDER_MARKER).write_text(
        json.dumps({"written_by": f"{PRODUCER} {__version__}", "files": files}, indent=1)
    )


def foreign_files(folder: Path) -> list[str] | None:
    """The files of ``folder`` that its marker does not list (``[]``: every file is the
    package's, or the folder is empty), or None when it has no readable marker."""
    present = (
        sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() or p.is_symlink())
        if folder.is_dir()
        else []
    )
    marker = folder / FOLDER_MARKER
    if not present:
        return []
    try:
        listed = set(json.loads(marker.read_text())["files"]) | {FOLDER_MARKER}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [name for name in present if name not in listed]


def folder_refusal(out: Path) -> str | None:
    """Why the existing folder ``out`` may not be replaced by a folder mlx2onnx writes
    whole (a package, check-suite's reports), or None."""
    if not out.is_dir() or out.is_symlink():
        kind = "a link" if out.is_symlink() else "a file"
        return f"{str(out)!r} is {kind}, not a folder; choose a folder path (e.g. {out.name}_out/)"
    foreign = foreign_files(out)
    if foreign is None:
        return (
            f"{str(out)!r} is a folder that mlx2onnx did not write (it has no {FOLDER_MARKER}); mlx2onnx "
            "replaces only a folder it wrote: choose a new folder, or empty this one yourself"
        )
    if foreign:
        names = ", ".join(foreign[:_LISTED]) + (f" and {len(foreign) - _LISTED} more" if len(foreign) > _LISTED else "")
        return (
            f"{str(out)!r} holds files mlx2onnx did not write there ({names}); it replaces only a folder as it "
            "wrote it: move those files out, or choose a new folder"
        )
    return None


def refuse_enclosing(out: Path, source: str | os.PathLike | None) -> None:
    """ExportOptionError when ``out`` is the current directory, the model folder
    ``source``, or a folder that holds either (replacing it would delete them)."""
    where = out.resolve()
    name = f"{Path(source).resolve().name if source is not None else 'model'}_onnx"
    held = [("the current directory", Path.cwd().resolve())]
    if source is not None:
        held.append((f"the model folder {str(source)!r} being exported", Path(source).resolve()))
    for what, path in held:
        if where == path or where in path.parents:
            # beside the model folder when it is the output, else inside the output
            instead = out.parent / name if source is not None and where == Path(source).resolve() else out / name
            raise ExportOptionError(
                f"the output {str(out)!r} {'is' if where == path else 'holds'} {what}: replacing "
                f"it would delete it; a package is written to a folder of its own, e.g. {instead}/"
            )


# -- single files -----------------------------------------------------------------------------
def producer_name(path: Path) -> str | None:
    """The ``producer_name`` of the ONNX model file ``path``, read from its first bytes
    (the fields before the graph), or None when it is not such a file."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return None
    at = 0
    try:
        while at < len(head):
            key, at = _varint(head, at)
            field, wire = key >> 3, key & 7
            if wire == 0:
                _, at = _varint(head, at)
            elif wire == 2:
                size, at = _varint(head, at)
                if field == 2:
                    return head[at : at + size].decode("utf-8")
                if field >= 7:  # the graph: producer_name (2) comes before it
                    return None
                at += size
            else:
                return None
    except (IndexError, UnicodeDecodeError):
        return None
    return None


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise IndexError("not a varint")


def file_refusal(path: Path, companions: Iterable[Path] = ()) -> str | None:
    """Why the existing model file ``path`` (with its weights files ``companions``) may not
    be replaced, or None: only a model mlx2onnx wrote is, never a folder or another file."""
    if path.is_dir():
        return f"{str(path)!r} is a folder; give a file name ending in .onnx"
    if path.exists():
        producer = producer_name(path)
        if producer != PRODUCER:
            made = f"written by {producer!r}" if producer else "not an ONNX model"
            return (
                f"{str(path)!r} is {made}; --overwrite replaces only a model mlx2onnx wrote: choose another "
                "path, or remove the file yourself"
            )
        return None
    for companion in companions:
        if companion.exists():
            return (
                f"{str(companion)!r} exists without the model {path.name!r} it would belong to; --overwrite "
                "replaces only files of a model mlx2onnx wrote: choose another path, or remove it yourself"
            )
    return None


# -- moving into place ------------------------------------------------------------------------
def publish(staging: Path, moves: list[tuple[Path | None, Path]]) -> None:
    """Move each staged ``(source, final)`` into place (a None source: ``final`` is only
    removed); what was at a final path is moved into ``staging`` first (removed with it)
    and put back if any move fails or is interrupted, so the finals are all old or all
    new."""
    aside = staging / ".replaced"
    aside.mkdir()
    kept = [(final, aside / str(i)) for i, (_, final) in enumerate(moves)]
    try:
        for final, old in kept:
            if final.exists() or final.is_symlink():
                os.replace(final, old)
        for source, final in moves:
            if source is not None:
                os.replace(source, final)
    except BaseException:
        for (source, final), (_, old) in zip(moves, kept):
            if source is not None and not source.exists() and (final.exists() or final.is_symlink()):
                os.replace(final, source)  # moved in: back to the staging folder
            if old.exists() or old.is_symlink():
                os.replace(old, final)
        raise
