"""The function and its example inputs as MLX's export reads them: calling convention,
parameter names, the modules whose weights it uses, and what it returns."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten

from ..errors import CaptureError

Scalar = (bool, int, float)


@dataclass(frozen=True)
class Signature:
    """Example inputs, normalised the way ``mx.export_function`` reads them."""

    args: tuple  # arrays and Python scalars, in call order
    kwargs: Mapping[str, Any]

    def arrays(self) -> tuple[list[mx.array], dict[str, mx.array]]:
        pos = [a for a in self.args if isinstance(a, mx.array)]
        kw = {k: v for k, v in self.kwargs.items() if isinstance(v, mx.array)}
        return pos, kw


def normalize_inputs(args: tuple, kwargs: Mapping[str, Any]) -> Signature:
    """Apply MLX's calling convention: ``*args, **kwargs``, or one tuple and/or one dict.

    NumPy arrays are converted to MLX arrays; Python scalars are kept and baked into the
    trace as constants (MLX treats them as weakly typed constants, not as inputs).
    """
    args = tuple(args)
    kwargs = dict(kwargs)
    if not kwargs and len(args) in (1, 2) and isinstance(args[-1], dict):
        if len(args) == 1 or isinstance(args[0], (tuple, list)):
            kwargs = dict(args[-1])
            args = tuple(args[0]) if len(args) == 2 else ()
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    args = tuple(_check_input(a, f"positional input {i}") for i, a in enumerate(args))
    for key in kwargs:
        if not isinstance(key, str):
            raise CaptureError(f"keyword input names must be strings, got {key!r}")
    kwargs = {k: _check_input(v, f"keyword input {k!r}") for k, v in kwargs.items()}
    return Signature(args, kwargs)


def _check_input(value: Any, where: str) -> Any:
    if isinstance(value, mx.array):
        return value
    if isinstance(value, np.ndarray):
        from ..dtypes import numpy_to_array

        return numpy_to_array(value)
    if isinstance(value, Scalar) and not isinstance(value, np.generic):
        return value
    if isinstance(value, np.generic):
        return value.item()
    kind = type(value).__name__
    hint = ""
    if isinstance(value, (tuple, list, dict)):
        hint = " Nested containers are not inputs MLX can trace: pass each array as its own argument."
    elif value is None:
        hint = " Bind optional arguments with functools.partial or a lambda before exporting."
    raise CaptureError(
        f"{where} is a {kind}; example inputs must be mlx.core.array (or NumPy arrays), "
        f"or Python bool/int/float scalars, which are baked in as constants.{hint}"
    )


def resolve_callable(fun: Any) -> tuple[Callable, nn.Module | None, str]:
    """The callable to trace, the module that owns it (if any), and a display name."""
    if isinstance(fun, nn.Module):
        return fun, fun, type(fun).__name__
    owner = getattr(fun, "__self__", None)
    if inspect.ismethod(fun) and isinstance(owner, nn.Module):
        return fun, owner, f"{type(owner).__name__}.{fun.__name__}"
    if not callable(fun):
        raise CaptureError(f"expected a function, an mlx.nn.Module or a bound method of one, got {type(fun).__name__}")
    return fun, None, getattr(fun, "__qualname__", getattr(fun, "__name__", type(fun).__name__))


def positional_names(fun: Callable, count: int) -> list[str]:
    """Names for the first ``count`` positional arguments: the parameters' own names."""
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        return [f"input_{i}" for i in range(count)]
    names: list[str] = []
    for param in params:
        if len(names) == count:
            break
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            names.append(param.name)
        elif param.kind is param.VAR_POSITIONAL:
            names.extend(f"{param.name}_{j}" for j in range(count - len(names)))
    names.extend(f"input_{i}" for i in range(len(names), count))
    return names


def owned_modules(call: Callable, module: nn.Module | None) -> list[tuple[str, nn.Module]]:
    """The module the callable belongs to, and modules a plain function closes over
    (prefixed by their variable name), so their weights are evaluated and named."""
    if module is not None:
        return [("", module)]
    found: list[tuple[str, nn.Module]] = []
    target = call
    while hasattr(target, "func") and hasattr(target, "args"):  # functools.partial
        for i, arg in enumerate(target.args):
            if isinstance(arg, nn.Module):
                found.append((f"arg{i}.", arg))
        target = target.func
    code = getattr(target, "__code__", None)
    cells = getattr(target, "__closure__", None) or ()
    if code is not None:
        for name, cell in zip(code.co_freevars, cells):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(value, nn.Module):
                found.append((f"{name}.", value))
        namespace = getattr(target, "__globals__", {})
        for name in code.co_names:
            value = namespace.get(name)
            if isinstance(value, nn.Module):
                found.append((f"{name}.", value))
    return found


def input_labels(call: Callable, signature: Signature) -> dict[str, mx.array]:
    """The example arrays by the label their graph input gets (parameter name or keyword)."""
    names = positional_names(call, len(signature.args))
    labelled = {names[i]: a for i, a in enumerate(signature.args) if isinstance(a, mx.array)}
    labelled.update({k: v for k, v in signature.kwargs.items() if isinstance(v, mx.array)})
    return labelled


def with_arrays(signature: Signature, call: Callable, arrays: Mapping[str, mx.array]) -> Signature:
    """``signature`` with the arrays replaced by ``arrays`` (keyed as :func:`input_labels`)."""
    names = positional_names(call, len(signature.args))
    args = tuple(arrays.get(names[i], a) if isinstance(a, mx.array) else a for i, a in enumerate(signature.args))
    kwargs = {k: arrays.get(k, v) if isinstance(v, mx.array) else v for k, v in signature.kwargs.items()}
    return Signature(args, kwargs)


def flatten_outputs(result: Any) -> tuple[list[mx.array], list[str | None]]:
    """Flatten what the function returned into a list of arrays and their key paths."""
    if isinstance(result, mx.array):
        return [result], [None]
    if result is None or (isinstance(result, (tuple, list, dict)) and not result):
        raise CaptureError("the function returned nothing; it must return at least one array")
    if not isinstance(result, (tuple, list, dict)):
        raise CaptureError(
            f"the function returned a {type(result).__name__}; return an array, or a tuple, list or dict of arrays"
        )
    flat = tree_flatten(result)
    arrays, labels = [], []
    keyed = isinstance(result, dict) or any(not part.isdigit() for path, _ in flat for part in path.split("."))
    for path, value in flat:
        if not isinstance(value, mx.array):
            raise CaptureError(f"output {path!r} is a {type(value).__name__}, not an array; only arrays can be outputs")
        arrays.append(value)
        labels.append(path if keyed else None)
    return arrays, labels
