"""Where in the user's Python a dynamic size is fixed: the line a refusal names.

Run only after a dynamic export has been refused, to say which line to change:

- :func:`branch_line`: the function runs at two sizes under ``sys.settrace``; the line
  before the first one (in the example's order) that runs at one size only is where
  Python branches on the size; else the first line that runs a different number of
  times is where it loops over it.
- :func:`constant_line`: the function runs at the example sizes with ``mx.array`` calls
  watched; the first call, outside MLX itself, whose array equals the constant that
  changed with the size is where the size became a NumPy or Python value.

Both return ``(file, line, source text)`` or None. Lines inside ``mlx`` and ``mlx2onnx``
are not the user's and are skipped.
"""

from __future__ import annotations

import linecache
import os
import sys
from pathlib import Path
from typing import Any, Callable

import mlx.core as mx
import numpy as np

# MLX's package folder and ours (with a separator: mlx_lm's files are the user's)
_OURS = tuple(str(p) + os.sep for p in (Path(mx.__file__).resolve().parent, Path(__file__).resolve().parents[1]))


def _user_file(filename: str) -> bool:
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return not resolved.startswith(_OURS) and not filename.startswith("<")


_TRACED = str(Path(__file__).with_name("tracing.py"))  # the wrapper that calls the user's function


def _inside_function(frame) -> bool:
    """Whether ``frame`` runs within the user's function (called by the capture's wrapper),
    not in a library the export itself calls before or after it (NumPy's caches warm up)."""
    while frame is not None:
        if frame.f_code.co_name == "traced" and frame.f_code.co_filename == _TRACED:
            return True
        frame = frame.f_back
    return False


def _lines(run: Callable[[], Any]) -> dict[tuple[str, int], int]:
    """The user's lines ``run()`` executes within the traced function, with how often, in
    first-run order."""
    seen: dict[tuple[str, int], int] = {}

    def tracer(frame, event, arg):
        if not _user_file(frame.f_code.co_filename) or event == "call" and not _inside_function(frame):
            return None
        if event == "line":
            where = (frame.f_code.co_filename, frame.f_lineno)
            seen[where] = seen.get(where, 0) + 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        run()
    except Exception:  # the other size may fail: the lines up to there still tell
        pass
    finally:
        sys.settrace(previous)
    return seen


def _described(where: tuple[str, int]) -> tuple[str, int, str]:
    return where[0], where[1], linecache.getline(where[0], where[1]).strip()


def branch_line(run_example: Callable[[], Any], run_other: Callable[[], Any]) -> tuple[str, int, str] | None:
    """The first user line that runs at one size and not the other (the line before it
    decided: a branch), else the first that runs a different number of times (a loop)."""
    example, other = _lines(run_example), _lines(run_other)
    for first, second in ((list(example), other), (list(other), example)):
        for k, where in enumerate(first):
            if where not in second:
                return _described(first[k - 1] if k else where)
    for where, count in example.items():
        if other.get(where) != count:
            return _described(where)
    return None


class _Watch(type):
    """Stands in for ``mx.array`` while :func:`constant_line` runs: records where each
    array is built and still answers ``isinstance`` for real arrays."""

    made: list = []
    real = mx.array

    def __instancecheck__(cls, obj):
        return isinstance(obj, _Watch.real)

    def __call__(cls, *args, **kwargs):
        array = _Watch.real(*args, **kwargs)
        frame = sys._getframe(1)  # the caller itself: arrays MLX or mlx2onnx build are not the user's
        if _user_file(frame.f_code.co_filename):
            _Watch.made.append(((frame.f_code.co_filename, frame.f_lineno), array))
        return array


class _WatchedArray(metaclass=_Watch):
    pass


def constant_line(run_example: Callable[[], Any], value: np.ndarray) -> tuple[str, int, str] | None:
    """The first user line that builds an ``mx.array`` equal to ``value``."""
    _Watch.made = []
    mx.array = _WatchedArray
    try:
        run_example()
    except Exception:
        pass
    finally:
        mx.array = _Watch.real
    target = np.asarray(value)
    for where, array in _Watch.made:
        try:
            if tuple(array.shape) == target.shape and np.array_equal(np.array(array), target):
                return _described(where)
        except Exception:  # an array that cannot be read back (a tracer's)
            continue
    return None
