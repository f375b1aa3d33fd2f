"""Resolve what the command line names: ``MODULE:CALLABLE`` targets and ``--input`` specs.

A target is one of

* a reference model's short name (``mlp``, ``encoder``, ``llama``);
* ``package.module:callable``, a dotted module importable from the current directory;
* ``path/to/file.py:callable``, a file loaded from exactly that path;
* ``path/to/model_folder``, an mlx-lm model folder (``config.json`` and weights).

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
import math
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import mlx.nn as nn
import numpy as np

from . import dtypes


class UsageError(Exception):
    """The command line names something that does not exist or cannot be parsed (exit 2)."""


class UserCodeError(Exception):
    """The user's code raised; ``error`` is the user's exception, ``where`` says what ran."""

    def __init__(self, where: str, error: BaseException):
        self.where = where
        self.error = error
        super().__init__(f"{where} raised {type(error).__name__}: {error}")


@dataclass
class Target:
    """What to export: the function, its example inputs (None when not given), a label."""

    fun: Any
    args: tuple | None
    kwargs: dict = field(default_factory=dict)
    label: str = ""


# -- targets ----------------------------------------------------------------------------
def load_target(spec: str, seed: int = 0) -> Target:
    """Resolve ``spec`` (see the module docstring) and call the factory, if it is one."""
    from .models import REFERENCE_MODELS

    if spec in REFERENCE_MODELS:
        return _from_result(_call_factory(REFERENCE_MODELS[spec], spec, seed), spec)
    if os.path.isdir(spec):
        return load_model_folder(spec, seed)
    if ":" not in spec:
        raise UsageError(
            f"{spec!r} is neither a reference model ({', '.join(sorted(REFERENCE_MODELS))}) nor "
            "MODULE:CALLABLE; write e.g. mypackage.models:build or path/to/file.py:build"
        )
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


# The example a model folder is traced at: a batch of token ids of this many.
FOLDER_EXAMPLE_TOKENS = (1, 8)


def load_model_folder(folder: str, seed: int = 0) -> Target:
    """An mlx-lm model folder (``config.json`` and ``*.safetensors``, float, bf16 or
    quantized): the model loaded with mlx-lm's own loader, traced on random token ids
    ``[1, 8]`` (``--input`` gives others); the export is the logits of the whole sequence."""
    path = Path(folder)
    config = path / "config.json"
    if not config.is_file():
        raise UsageError(f"{folder} is a folder but not a model folder: it has no config.json "
                         "(an mlx-lm model folder holds config.json and *.safetensors)")
    try:
        settings = json.loads(config.read_text())
    except ValueError as exc:
        raise UsageError(f"{config} is not valid JSON: {exc}") from None
    if not isinstance(settings, dict) or "model_type" not in settings:
        raise UsageError(f"{config} has no model_type; mlx-lm needs it to choose the architecture")
    if not any(path.glob("*.safetensors")):
        raise UsageError(f"{folder} has no *.safetensors weights")
    try:
        from mlx_lm.utils import load_model
    except ImportError:
        raise UsageError(f"{folder} is an mlx-lm model folder: install mlx-lm to load it (pip install mlx-lm)") from None
    try:
        model, loaded = load_model(path)
    except ValueError as exc:
        raise UsageError(f"mlx-lm cannot load {folder}: {exc}") from None
    except Exception as exc:
        raise UserCodeError(f"loading the model folder {folder}", exc) from exc
    except SystemExit as exc:  # mlx-lm's olmo exits when the package its module imports is missing
        raise UserCodeError(f"loading the model folder {folder} (mlx-lm's model module for "
                            f"{settings['model_type']!r} stopped the program; the line it printed says what it needs)",
                            exc) from exc
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
            raise UserCodeError(f"importing {module_part}", exc) from exc
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
        raise UserCodeError(f"importing {module_part}", exc) from exc
    except Exception as exc:
        raise UserCodeError(f"importing {module_part}", exc) from exc


def _attribute(module, attr: str, spec: str):
    obj = module
    for part in attr.split("."):
        if not part.isidentifier() or not hasattr(obj, part):
            names = sorted(
                n for n, v in vars(module).items()
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
        p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
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
        raise UserCodeError(f"calling {label}", exc) from exc


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


# -- --input specs ----------------------------------------------------------------------
@dataclass(frozen=True)
class InputSpec:
    """``name=SHAPE:DTYPE[:LOW..HIGH]``: a random example input."""

    name: str | None
    shape: tuple[int, ...]
    dtype: mx.Dtype
    low: float | None = None
    high: float | None = None

    def make(self, rng: np.random.Generator) -> mx.array:
        """Random values: floats standard normal (or uniform in [low, high)); integers
        uniform in [low, high) (default [0, 10)); bools fair coin flips."""
        if self.dtype == mx.bool_:
            return mx.array(rng.random(self.shape) < 0.5)
        np_dtype = dtypes.to_numpy(self.dtype)
        if dtypes.is_integer(self.dtype):
            low = 0 if self.low is None else int(self.low)
            high = 10 if self.high is None else int(self.high)
            return mx.array(rng.integers(low, high, size=self.shape, dtype=np_dtype))
        if self.low is not None:
            sample = rng.uniform(self.low, self.high, size=self.shape)
        else:
            sample = rng.standard_normal(self.shape)
        return mx.array(sample.astype(np.float32)).astype(self.dtype)


# The most elements one --input may have (2**28: 1 GiB of float32).
MAX_INPUT_ELEMENTS = 1 << 28

_DTYPE_NAMES = {dtypes.name(d): d for d in (
    mx.bool_, mx.uint8, mx.uint16, mx.uint32, mx.uint64, mx.int8, mx.int16, mx.int32, mx.int64,
    mx.float16, mx.float32, mx.float64, mx.bfloat16,
)}
_DTYPE_NAMES.update({"bool": mx.bool_, "f32": mx.float32, "f16": mx.float16, "bf16": mx.bfloat16,
                     "i32": mx.int32, "i64": mx.int64})

INPUT_SPEC_HELP = (
    "[NAME=]SHAPE[:DTYPE[:LOW..HIGH]], e.g. x=4x32:float32, ids=2,8:int32:0..128, s=():float32; "
    "DTYPE defaults to float32"
)


def parse_input_spec(text: str) -> InputSpec:
    """Parse one ``--input``; raises :class:`UsageError` saying what would work."""
    original = text
    name = None
    if "=" in text:
        name, _, text = text.partition("=")
        if not name.isidentifier():
            raise UsageError(f"--input {original!r}: {name!r} is not a valid input name")
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not parts[0]:
        raise UsageError(f"--input {original!r} is not {INPUT_SPEC_HELP}")
    shape = _parse_shape(parts[0], original)
    dtype = mx.float32
    if len(parts) >= 2:
        key = parts[1].strip().lower()
        if key not in _DTYPE_NAMES:
            raise UsageError(
                f"--input {original!r}: unknown dtype {parts[1]!r}; choose one of "
                f"{', '.join(n for n in _DTYPE_NAMES if len(n) > 3 or n == 'bool')}"
            )
        dtype = _DTYPE_NAMES[key]
    low = high = None
    if len(parts) == 3:
        match = re.fullmatch(r"\s*(-?[0-9.eE+-]+)\s*\.\.\s*(-?[0-9.eE+-]+)\s*", parts[2])
        try:
            low, high = float(match.group(1)), float(match.group(2))
        except (AttributeError, ValueError):
            raise UsageError(f"--input {original!r}: the range must read LOW..HIGH, e.g. 0..128") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise UsageError(f"--input {original!r}: the range {parts[2]} is not finite; give finite bounds")
        if not low < high:
            raise UsageError(f"--input {original!r}: the range {parts[2]} is empty; LOW must be below HIGH")
        if dtypes.is_integer(dtype) or dtype == mx.bool_:
            if dtype == mx.bool_:
                raise UsageError(f"--input {original!r}: bool inputs take no range")
            if low != int(low) or high != int(high):
                raise UsageError(f"--input {original!r}: an integer input's range needs integer bounds, e.g. 0..128")
            info = np.iinfo(dtypes.to_numpy(dtype))
            if low < info.min or high - 1 > info.max:
                raise UsageError(
                    f"--input {original!r}: {dtypes.name(dtype)} holds {info.min}..{info.max + 1} (HIGH excluded); "
                    f"the range {parts[2]} does not fit"
                )
        elif max(abs(low), abs(high)) > float(np.finfo(dtypes.to_numpy(dtype)).max):
            raise UsageError(f"--input {original!r}: the range {parts[2]} exceeds what {dtypes.name(dtype)} holds")
    count = math.prod(shape)
    if count > MAX_INPUT_ELEMENTS:
        raise UsageError(
            f"--input {original!r}: shape {'x'.join(map(str, shape))} has {count} elements, more than "
            f"{MAX_INPUT_ELEMENTS}; give a smaller example (dynamic dimensions can be checked at larger sizes)"
        )
    return InputSpec(name, shape, dtype, low, high)


def _parse_shape(text: str, original: str) -> tuple[int, ...]:
    body = text.strip()
    if body in ("()", "[]", "scalar"):
        return ()
    body = body.strip("()[]")
    pieces = [p.strip() for p in re.split(r"[x,×]", body)]
    if not pieces or any(re.fullmatch(r"[0-9]+", p) is None for p in pieces):
        raise UsageError(
            f"--input {original!r}: shape {text!r} must be non-negative integers joined by 'x' or ',' "
            "(4x32, 2,8) or () for a scalar"
        )
    return tuple(int(p) for p in pieces)


def bind_inputs(fun: Any, specs: list[InputSpec], seed: int) -> tuple[tuple, dict]:
    """Random example inputs for ``fun`` from ``--input`` specs, as (args, kwargs).

    Unnamed specs are positional, in order. A named spec is positional when its name is
    the function's next positional parameter, otherwise a keyword input.
    """
    rng = np.random.default_rng(seed)
    positional_params, accepts, var_kw = _parameters(fun)
    args: list[mx.array] = []
    kwargs: dict[str, mx.array] = {}
    for spec in specs:
        value = spec.make(rng)
        if spec.name is None:
            if kwargs:
                raise UsageError("unnamed --input after a keyword input: give every later input a name")
            args.append(value)
        elif not kwargs and len(args) < len(positional_params) and positional_params[len(args)] == spec.name:
            args.append(value)
        else:
            if spec.name in kwargs:
                raise UsageError(f"--input {spec.name} is given twice")
            if accepts is not None and spec.name not in accepts and not var_kw:
                raise UsageError(
                    f"--input {spec.name}=...: the function has no parameter {spec.name!r}; "
                    f"its parameters are {', '.join(accepts) or '(none)'}"
                )
            kwargs[spec.name] = value
    return tuple(args), kwargs


def _parameters(fun: Any) -> tuple[list[str], list[str] | None, bool]:
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return [], None, True
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    return positional, keywords, var_kw


DYNAMIC_SPEC_HELP = (
    "NAME:AXIS=SYMBOL[,AXIS=SYMBOL...] (SYMBOL%N: sizes in steps of N; SYMBOL:MIN..MAX or "
    "SYMBOL:..MAX: sizes in a range), e.g. input_ids:0=batch,1=seq:..512"
)


def parse_dynamic_specs(texts: list[str]) -> dict | None:
    """``--dynamic`` options -> the ``dynamic`` mapping of :class:`~mlx2onnx.Exporter`."""
    from .capture.dynamic import Dim

    if not texts:
        return None
    spec: dict[str, dict[int, Dim]] = {}
    for original in texts:
        name, sep, rest = original.partition(":")
        if not sep or not name.isidentifier() or not rest:
            raise UsageError(f"--dynamic {original!r} is not {DYNAMIC_SPEC_HELP}")
        for part in rest.split(","):
            match = re.fullmatch(
                r"\s*(-?\d+)\s*=\s*([A-Za-z_]\w*)\s*(?:%\s*(\d+))?\s*(?::\s*(\d*)\s*\.\.\s*(\d+)\s*)?", part
            )
            if match is None:
                raise UsageError(
                    f"--dynamic {original!r}: {part!r} is not AXIS=SYMBOL[%N][:MIN..MAX] ({DYNAMIC_SPEC_HELP})"
                )
            axis, symbol, step, low, high = match.groups()
            if step is not None and int(step) < 1:
                raise UsageError(f"--dynamic {original!r}: the step in {part!r} must be at least 1")
            spec.setdefault(name, {})[int(axis)] = Dim(
                symbol, int(step) if step else 1, int(low) if low else None, int(high) if high is not None else None
            )
    return spec


def parse_sizes(texts: list[str]) -> dict | None:
    """``--sizes SYMBOL=N,N,...`` options -> :attr:`~mlx2onnx.Verifier.sizes`."""
    if not texts:
        return None
    sizes: dict[str, list[int]] = {}
    for original in texts:
        match = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*(\d+(?:\s*,\s*\d+)*)\s*", original)
        if match is None:
            raise UsageError(f"--sizes {original!r} is not SYMBOL=N[,N...], e.g. seq=1,7,64")
        sizes[match.group(1)] = [int(v) for v in match.group(2).split(",")]
    return sizes
