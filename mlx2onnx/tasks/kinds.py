"""The registry of model-folder kinds, the extension point for the MLX packages' folders
(as :mod:`mlx2onnx.translate.registry` is for primitives).

A :class:`FolderKind` declares what it recognises (from the folder and its config.json),
its task, the functions that export and check its package, which runtimes read the
folder's tokenizer, and the architectures it exports: config.json's ``model_type`` -> the
architecture's spec (a vision-language :class:`~.vlm_architecture.Architecture`, an
embedding :class:`~.embedding_encoders.Encoder`; None where the kind's module has one
architecture and nothing to choose), which the registry gives the kind's export and check.
Kinds and their architectures are registered once, explicitly, in :mod:`mlx2onnx.tasks`:
the one place an architecture is named (tests/packages/test_folder_kinds.py holds it); at
most one kind may recognise a folder, and the fallback kind (mlx-lm's) takes a folder no
other kind recognises. Adding a kind: its module, and one :func:`register` call; adding an
architecture of a known family: its module, and one line of its kind's table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import UnsupportedModelError


@dataclass(frozen=True)
class FolderKind:
    """One kind of model folder, named by the MLX package that writes it."""

    name: str
    task: str
    # (folder, out, exporter, stage[, architecture= | architectures=]) -> the package folder (export_package)
    export: Callable
    check: Callable  # (package, folder[, architecture=], **options) -> the check's result (check_package)
    # (folder, config.json's content or None without one); a keyed kind's folders have one of its model_types too
    recognises: Callable[[Path, dict | None], bool]
    tokenizer_for: str | None = None  # the runtimes that read the folder's tokenizer from its package
    # config.json's model_type -> the architecture's spec, or None where the kind's module has nothing to choose
    architectures: Mapping[str, Any] = field(default_factory=dict)
    keyed: bool = True  # a folder's model_type names its architecture (mlx-whisper's config has none)

    def architecture(self, config: dict | None) -> Any:
        """The spec of the architecture ``config`` names (``model_type``; ``-`` and ``_``
        alike, as configs write both), refused with the architectures the kind exports."""
        if not self.names(config):
            raise UnsupportedModelError(
                f"model_type {(config or {}).get('model_type')!r}: the {self.task} export of {self.name} "
                f"folders handles {', '.join(sorted(self.architectures))}"
            )
        return spec_of(self.architectures, config)

    def names(self, config: dict | None) -> bool:
        """Whether ``config``'s ``model_type`` is one of the kind's architectures."""
        return named(self.architectures, config)

    def export_package(self, folder: Path, out: Path, exporter, stage) -> Path:
        """The kind's export of ``folder``, given the folder's architecture where the kind has specs."""
        return self.export(folder, out, exporter, stage, **self._given(folder))

    def check_package(self, package: Path, folder: Path, **options) -> dict:
        """The kind's check of ``package`` against ``folder``, given the folder's architecture
        where the kind is keyed and has specs (an unkeyed kind's check identifies the folder as
        its export did)."""
        given = self._given(folder) if self.keyed else {}
        return self.check(package, folder, **given, **options)

    def _given(self, folder: Path) -> dict:
        """A keyed kind's module is given the folder's architecture; an unkeyed one's the
        whole table (it tells the folder's from the folder itself: mlx-image's weights)."""
        if not any(spec is not None for spec in self.architectures.values()):
            return {}
        if not self.keyed:
            return {"architectures": self.architectures}
        return {"architecture": self.architecture(folder_config(folder))}


def _spelled(model_type: str) -> str:
    return model_type.replace("-", "_")


def named(architectures: Mapping[str, Any], config: dict | None) -> bool:
    """Whether ``config``'s model_type is one of ``architectures`` (``-`` and ``_`` alike)."""
    model_type = _spelled(str((config or {}).get("model_type", "")))
    return any(_spelled(name) == model_type for name in architectures)


def spec_of(architectures: Mapping[str, Any], config: dict | None) -> Any:
    """The spec ``architectures`` holds for ``config``'s model_type (``-`` and ``_`` alike), or None."""
    model_type = _spelled(str((config or {}).get("model_type", "")))
    return next((spec for name, spec in architectures.items() if _spelled(name) == model_type), None)


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
    return [
        k
        for k in _KINDS.values()
        if k not in _FALLBACK and (not k.keyed or k.names(config)) and k.recognises(folder, config)
    ]


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
