"""The registry of model-folder kinds, the extension point for the MLX packages' folders
(as :mod:`mlx2onnx.translate.registry` is for primitives).

A :class:`FolderKind` declares what it recognises (from the folder and its config.json),
its task, the functions that export and check its package, and which runtimes read the
folder's tokenizer. Kinds are registered once, explicitly, in :mod:`mlx2onnx.tasks`; at
most one kind may recognise a folder, and the fallback kind (mlx-lm's) takes a folder no
other kind recognises. Adding a kind: its module, and one :func:`register` call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class FolderKind:
    """One kind of model folder, named by the MLX package that writes it."""

    name: str
    task: str
    export: Callable  # (folder, out, exporter, stage) -> the package folder
    check: Callable  # (package, folder, **options) -> the check's result
    recognises: Callable[[Path, dict | None], bool]  # (folder, config.json's content or None without one)
    tokenizer_for: str | None = None  # the runtimes that read the folder's tokenizer from its package


_KINDS: dict[str, FolderKind] = {}
_FALLBACK: list[FolderKind] = []


def register(kind: FolderKind, fallback: bool = False) -> FolderKind:
    """Add ``kind``; a second kind of the same name, or a second fallback, is refused."""
    if kind.name in _KINDS:
        raise ValueError(f"folder kind {kind.name!r} is registered already")
    if fallback and _FALLBACK:
        raise ValueError(f"{_FALLBACK[0].name!r} is the fallback kind already; {kind.name!r} cannot be one too")
    _KINDS[kind.name] = kind
    if fallback:
        _FALLBACK.append(kind)
    return kind


def kinds() -> list[FolderKind]:
    """Every registered kind, in the order of registration."""
    return list(_KINDS.values())


def kind_named(name: str) -> FolderKind:
    return _KINDS[name]


def folder_config(folder: Path) -> dict | None:
    """config.json's content (``{}`` when it is not a JSON object), or None without one."""
    config = folder / "config.json"
    if not config.is_file():
        return None
    try:
        settings = json.loads(config.read_text())
    except ValueError:
        return {}
    return settings if isinstance(settings, dict) else {}


def recognising(folder: Path) -> list[FolderKind]:
    """The kinds other than the fallback that recognise ``folder`` (a registry holds at
    most one for any folder; tests/packages/test_folder_kinds.py holds it to that)."""
    config = folder_config(folder)
    return [k for k in _KINDS.values() if k not in _FALLBACK and k.recognises(folder, config)]


def recognise(folder: str | Path) -> FolderKind:
    """The kind of ``folder``: the one kind that recognises it, else the fallback (whose
    loader then says what is wrong with a folder it cannot load)."""
    found = recognising(Path(folder))
    if len(found) > 1:
        raise RuntimeError(
            f"{folder} is recognised by the folder kinds {', '.join(k.name for k in found)}: "
            "a registry holds one kind for a folder"
        )
    return found[0] if found else _FALLBACK[0]


def is_model_folder(folder: str | Path) -> bool:
    """Whether ``folder`` is a folder some kind exports: one with config.json, or one a kind
    recognises without it (mlx-image's weights file)."""
    folder = Path(folder)
    return folder.is_dir() and ((folder / "config.json").is_file() or bool(recognising(folder)))
