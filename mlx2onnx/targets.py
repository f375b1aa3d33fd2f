"""Resolve what the command line names: ``MODULE:CALLABLE`` targets and ``--input`` specs.

A target is one of

* a reference model's short name (``mlp``, ``encoder``, ``llama``);
* ``package.module:callable``, a dotted module importable from the current directory;
* ``path/to/file.py:callable``, a file loaded from exactly that path;
* ``path/to/model_folder``, an mlx-lm model folder (``config.json`` and weights), or a
  Hugging Face hub id ``ORG/NAME`` of one (its folder in huggingface_hub's cache).

User code is imported only from the module the user names; nothing is evaluated from
strings. The callable is either a factory (no required parameters; it may take ``seed``)
returning a module or function, or a ``(function, args)`` / ``(function, args, kwargs)``
tuple; or, when it has required parameters or is an ``mlx.nn.Module``, the function to
export itself (then ``--input`` gives its example inputs).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from .errors import MissingPackageError, NotAModelFolderError, UsageError, UserFunctionError


@dataclass
class Target:
    """What to export: the function, its example inputs (None when not given), a label."""

    fun: Any
    args: tuple | None
    kwargs: dict = field(default_factory=dict)
    label: str = ""


# -- targets ----------------------------------------------------------------------------
def load_target(spec: str, seed: int = 0, revision: str | None = None) -> Target:
    """Resolve ``spec`` (see the module docstring) and call the factory, if it is one; a
    hub id (ORG/NAME, no such path here) is the hub model's folder at ``revision``."""
    from .io.folders import hub_folder, is_hub_id
    from .models import REFERENCE_MODELS

    if spec in REFERENCE_MODELS:
        return _from_result(_call_factory(REFERENCE_MODELS[spec], spec, seed), spec)
    if os.path.isdir(spec):
        return load_model_folder(spec, seed)
    if is_hub_id(spec):
        return load_model_folder(str(hub_folder(spec, revision)), seed)
    if ":" not in spec:
        raise UsageError(_unresolved(spec, sorted(REFERENCE_MODELS)))
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr:
        raise UsageError(f"{spec!r}: both MODULE and CALLABLE are needed, as in mymodule:build")
    module = _import(module_part)
    obj = _attribute(module, attr, spec)
    if isinstance(obj, nn.Module) or _needs_arguments(obj):
        return Target(obj, None, {}, spec)
    if not callable(obj):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a callable or an mlx.nn.Module")
    return _from_result(_call_factory(obj, spec, seed), spec)


def _unresolved(spec: str, references: list[str]) -> str:
    """Why ``spec`` (no folder, no ``:``) names nothing to export, and what would."""
    kinds = f"a reference model ({', '.join(references)}), MODULE:CALLABLE, path/to/file.py:CALLABLE or a model folder"
    path = Path(spec).expanduser()
    if path.is_file():
        if path.suffix == ".onnx":
            return (
                f"{spec!r} is an ONNX model, not something to export: TARGET is {kinds}; to compare an exported "
                f"model with the function it came from: mlx2onnx check {spec} TARGET"
            )
        if path.suffix == ".py":
            return f"{spec!r} is a Python file: name the callable in it, e.g. {spec}:build"
        if path.suffix in (".safetensors", ".npz"):
            return f"{spec!r} is a weights file: give the model folder that holds it (with its config.json)"
        return f"{spec!r} is a file, not a target: TARGET is {kinds}"
    if os.sep in spec or "/" in spec or spec.startswith((".", "~")):
        return f"no such folder or file: {spec!r}; TARGET is {kinds}"
    return f"{spec!r} is not {kinds}; write e.g. mypackage.models:build or path/to/file.py:build"


# The example a model folder is traced at: a batch of token ids of this many.
FOLDER_EXAMPLE_TOKENS = (1, 8)


def load_model_folder(folder: str, seed: int = 0) -> Target:
    """An mlx-lm model folder (``config.json`` and ``*.safetensors``, float, bf16 or
    quantized): the model loaded with mlx-lm's own loader, traced on random token ids
    ``[1, 8]`` (``--input`` gives others); the export is the logits of the whole sequence."""
    from .io.folders import check_model_folder

    path = Path(folder)
    check_model_folder(path)
    config = path / "config.json"
    if not config.is_file():
        raise NotAModelFolderError(
            f"{folder} is a folder but not a model folder: it has no config.json "
            "(an mlx-lm or mlx-embeddings model folder holds config.json and *.safetensors, an mlx-image "
            "folder one weights file)"
        )
    try:
        settings = json.loads(config.read_text())
    except ValueError as exc:
        raise UsageError(f"{config} is not valid JSON: {exc}") from None
    if not isinstance(settings, dict) or "model_type" not in settings:
        raise UsageError(f"{config} has no model_type; mlx-lm needs it to choose the architecture")
    if not any(path.glob("*.safetensors")):
        raise NotAModelFolderError(f"{folder} has no *.safetensors weights")
    try:
        from mlx_lm.utils import load_model
    except ImportError:
        raise MissingPackageError(f"{folder} is an mlx-lm model folder", "mlx-lm") from None
    try:
        model, loaded = load_model(path)
    except ValueError as exc:
        raise UsageError(f"mlx-lm cannot load {folder}: {exc}") from None
    except Exception as exc:
        raise UserFunctionError(f"loading the model folder {folder}", exc) from exc
    except SystemExit as exc:  # mlx-lm's olmo exits when the package its module imports is missing
        raise UserFunctionError(
            f"loading the model folder {folder} (mlx-lm's model module for "
            f"{settings['model_type']!r} stopped the program; the line it printed says what it needs)",
            exc,
        ) from exc
    vocab = int(loaded.get("vocab_size") or settings.get("vocab_size") or 2)
    ids = np.random.default_rng(seed).integers(0, vocab, FOLDER_EXAMPLE_TOKENS).astype(np.int32)
    return Target(model, (mx.array(ids),), {}, folder)


def _import(module_part: str):
    if module_part.endswith(".py") or os.sep in module_part or "/" in module_part:
        path = Path(module_part)
        if not path.is_file():
            raise UsageError(f"no such file: {module_part}")
        path = path.resolve()
        name = f"mlx2onnx_user_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"{module_part} cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)  # so the file can import its siblings, as `python file.py` would
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise UserFunctionError(f"importing {module_part}", exc) from exc
        return module
    if not all(part.isidentifier() for part in module_part.split(".")):
        raise UsageError(f"{module_part!r} is not a dotted module name nor a path to a .py file")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module_part)
    except ModuleNotFoundError as exc:
        wanted = module_part.split(".")
        if exc.name is not None and exc.name in {".".join(wanted[: i + 1]) for i in range(len(wanted))}:
            raise UsageError(
                f"no module named {exc.name!r} (looked in the current directory {cwd} and the installed "
                "packages); give a dotted module importable from here or a path/to/file.py"
            ) from None
        raise UserFunctionError(f"importing {module_part}", exc) from exc
    except Exception as exc:
        raise UserFunctionError(f"importing {module_part}", exc) from exc


def _attribute(module, attr: str, spec: str):
    obj = module
    for part in attr.split("."):
        if not part.isidentifier() or not hasattr(obj, part):
            names = sorted(
                n
                for n, v in vars(module).items()
                if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__
            )
            hint = f"; callables defined there: {', '.join(names)}" if names else ""
            raise UsageError(f"{spec}: module {module.__name__!r} has no attribute {attr!r}{hint}")
        obj = getattr(obj, part)
    return obj


def _needs_arguments(obj) -> bool:
    """Whether ``obj`` has required parameters (other than ``seed``): then it is the
    function to export, not a factory."""
    if not callable(obj) or inspect.isclass(obj):
        return False
    try:
        params = inspect.signature(obj).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.default is p.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name != "seed"
        for p in params
    )


def _call_factory(factory: Callable, label: str, seed: int):
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    try:
        return factory(seed=seed) if "seed" in params else factory()
    except Exception as exc:
        raise UserFunctionError(f"calling {label}", exc) from exc


def _from_result(result: Any, label: str) -> Target:
    if isinstance(result, tuple) and len(result) in (2, 3) and callable(result[0]):
        fun, args = result[0], result[1]
        kwargs = result[2] if len(result) == 3 else {}
        if isinstance(args, (mx.array, np.ndarray)):
            args = (args,)
        if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
            raise UsageError(
                f"{label} returned ({type(fun).__name__}, {type(args).__name__}, ...); the example inputs "
                "must be a tuple of arrays and, optionally, a dict of keyword arrays"
            )
        return Target(fun, tuple(args), dict(kwargs), label)
    if callable(result):
        return Target(result, None, {}, label)
    raise UsageError(
        f"{label} returned a {type(result).__name__}; it must return a function or mlx.nn.Module, "
        "or a (function, args) or (function, args, kwargs) tuple"
    )
