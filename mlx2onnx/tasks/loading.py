"""A folder loaded with its MLX package's own loader, as its users load it: the package's
absence and the loader's failures as errors that say what is wrong."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any, Callable

from ..errors import MissingPackageError, UsageError, UserFunctionError


def load_with(
    folder: Path,
    package: str,
    module: str,
    name: str,
    call: Callable[[Callable], Any],
    usage: tuple[type[Exception], ...] = (),
) -> Any:
    """``call(module.name)``: the pip package ``package``'s loader applied to ``folder``.
    Its absence is a MissingPackageError naming the install; an error of ``usage`` (the loader's
    own complaint about the folder) a UsageError; any other a UserFunctionError."""
    try:
        loader = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise MissingPackageError(f"{folder} is a {package} model folder ({exc})", package) from None
    try:
        return call(loader)
    except usage as exc:
        raise UsageError(f"{package} cannot load {folder}: {exc}") from None
    except Exception as exc:
        raise UserFunctionError(f"loading the {package} folder {folder}", exc) from exc


def folder_json(folder: Path, name: str, **changes: Any) -> dict | None:
    """The folder's JSON file ``name`` with ``changes`` over it (a package's copy of the
    folder's file, changed where its runtime needs it), or None when the folder has none."""
    path = folder / name
    return dict(json.loads(path.read_text()), **changes) if path.is_file() else None
