"""The handler registry: each record kind's handler, and for MLX primitives the
handler of each primitive name.

Primitive handlers register with :func:`handles`; primitives that ONNX cannot express
exactly register a documented reason with :func:`refuses`. The records the exporter makes
itself (:class:`~mlx2onnx.capture.trace.LoopRecord`) register their kind's handler with
:func:`handles_kind`. A name or kind can be registered once: a second registration is a
bug and raises at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..capture import records
from ..errors import DuplicateRegistrationError, UnknownPrimitiveError

Handler = Callable  # (ctx, rec) -> list of ONNX values, one per rec.outputs
KindHandler = Callable  # (ctx, rec, translate) -> list of ONNX values; translate(records) translates its nested records


@dataclass(frozen=True)
class Refusal:
    """Why a primitive cannot be exported, and what the user can do instead."""

    reason: str
    advice: str

    def __str__(self) -> str:
        return f"{self.reason} {self.advice}"


_HANDLERS: dict[str, Handler] = {}
_REFUSALS: dict[str, Refusal] = {}


def _claim(name: str, what: str) -> None:
    if name not in records.FIELDS:
        raise UnknownPrimitiveError(
            f"MLX primitive {name!r} has no row in mlx2onnx/capture/records.py FIELDS; add its argument "
            f"layout there (and regenerate docs/records.md) before registering {what}"
        )
    if name in _HANDLERS or name in _REFUSALS:
        holder = _HANDLERS.get(name) or _REFUSALS.get(name)
        where = getattr(holder, "__module__", "a refusal")
        raise DuplicateRegistrationError(
            f"MLX primitive {name!r} is already registered (by {where}); cannot register {what}"
        )


def handles(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of each MLX primitive in ``names``."""
    if not names:
        raise ValueError("handles() needs at least one primitive name")

    def register(fn: Handler) -> Handler:
        for name in names:
            _claim(name, f"{fn.__module__}.{fn.__name__}")
            _HANDLERS[name] = fn
        return fn

    return register


def register(name: str, fn: Handler) -> None:
    """Register ``fn`` for ``name`` (for table-driven handlers)."""
    _claim(name, f"{fn.__module__}.{getattr(fn, '__name__', fn)}")
    _HANDLERS[name] = fn


def refuses(name: str, reason: str, advice: str) -> None:
    """Record that ``name`` cannot be exported exactly: ``reason``, and ``advice`` for the user."""
    _claim(name, "a refusal")
    _REFUSALS[name] = Refusal(reason, advice)


_COMPLEX_HANDLERS: dict[str, Handler] = {}


def handles_complex(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated function for records of ``names`` that read or produce
    complex64 values (carried as float32 pairs, see ``context.onnx_layout``). The
    translator dispatches such records only to these handlers; without one it refuses."""

    def register_complex(fn: Handler) -> Handler:
        for name in names:
            if name not in records.FIELDS:
                raise UnknownPrimitiveError(f"MLX primitive {name!r} has no row in mlx2onnx/capture/records.py FIELDS")
            _once(_COMPLEX_HANDLERS, name, fn, f"complex handler of {name!r}")
        return fn

    return register_complex


def _once(table: dict, key: str, fn, what: str) -> None:
    if key in table:
        raise DuplicateRegistrationError(f"{what} is already registered")
    table[key] = fn


def lookup_complex(name: str) -> Handler | None:
    return _COMPLEX_HANDLERS.get(name)


def complex_handlers() -> dict[str, Handler]:
    return dict(_COMPLEX_HANDLERS)


def complex_primitives() -> list[str]:
    """Sorted names of the primitives that have a complex64 handler."""
    return sorted(_COMPLEX_HANDLERS)


_KIND_HANDLERS: dict[str, KindHandler] = {}


def handles_kind(kind: str) -> Callable[[KindHandler], KindHandler]:
    """Register the decorated function as the handler of every record of ``kind`` (a
    record kind other than ``"primitive"``: ``"loop"``). It is called as
    ``fn(ctx, rec, translate)``, where ``translate(records)`` translates the records the
    record holds (a loop's body) in the same context."""

    if kind == "primitive":
        raise ValueError("primitives are registered by name: handles(name)")

    def register_kind(fn: KindHandler) -> KindHandler:
        _once(_KIND_HANDLERS, kind, fn, f"the handler of record kind {kind!r}")
        return fn

    return register_kind


def lookup_kind(kind: str) -> KindHandler | None:
    return _KIND_HANDLERS.get(kind)


def lookup(name: str) -> Handler | None:
    return _HANDLERS.get(name)


def refusal(name: str) -> Refusal | None:
    return _REFUSALS.get(name)


def handlers() -> dict[str, Handler]:
    return dict(_HANDLERS)


def refusals() -> dict[str, Refusal]:
    return dict(_REFUSALS)


def supported_primitives() -> list[str]:
    """Sorted names of every MLX primitive that has a handler."""
    return sorted(_HANDLERS)
