"""Exceptions raised by mlx2onnx.

Every error names what is wrong (the primitive, argument, value or input) and says what
would work instead. All of them derive from :class:`Mlx2OnnxError`, and all are raised
before anything is written to disk.

Every exception class of the package lives here (tests/api/test_errors.py holds it to that): the
errors a user's input gets above, then the signals the pipeline raises and catches inside
itself and the errors of its own contracts (a bug of mlx2onnx's, not of the input) below.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping


class Mlx2OnnxError(Exception):
    """Base class of every error mlx2onnx raises on purpose."""


class CaptureError(Mlx2OnnxError):
    """MLX could not trace the function, or the example inputs are not usable."""


class UnsupportedPrimitiveError(Mlx2OnnxError):
    """The traced graph contains primitives that have no ONNX handler.

    ``missing`` counts primitives no handler knows; ``refused`` maps primitives that
    ONNX cannot express exactly to the reason and what the user can do about it.
    """

    def __init__(self, missing: Mapping[str, int], refused: Mapping[str, tuple[int, str]]):
        self.missing = Counter(missing)
        self.refused = dict(refused)
        lines = []
        if self.missing:
            listed = ", ".join(f"{name} (x{count})" for name, count in sorted(self.missing.items()))
            lines.append(f"no ONNX handler for {len(self.missing)} MLX primitive(s): {listed}.")
        for name, (count, reason) in sorted(self.refused.items()):
            lines.append(f"{name} (x{count}) cannot be exported: {reason}")
        lines.append(
            "Nothing was written. See mlx2onnx.supported_primitives() for what is handled; "
            "evaluating the offending values before export (mx.eval) turns them into constants."
        )
        super().__init__("\n".join(lines))


class ConversionError(Mlx2OnnxError):
    """A handler cannot express one primitive record exactly in ONNX."""

    def __init__(self, primitive: str, message: str, index: int | None = None):
        self.primitive = primitive
        self.index = index
        where = f"{primitive}" if index is None else f"{primitive} (node {index})"
        super().__init__(f"{where}: {message}")


class UnsupportedModelError(Mlx2OnnxError):
    """A model the package export cannot serve (a cache type it does not carry, an input
    convention a package cannot meet); the message names what is missing (CLI exit 3)."""


class ExportOptionError(Mlx2OnnxError, ValueError):
    """An export option has a value that cannot work."""


class VerificationError(Mlx2OnnxError):
    """The parity harness could not run the model or the function."""


class DynamicShapeError(Mlx2OnnxError, ValueError):
    """A dimension named dynamic cannot be: the function fixes it, or the request is malformed."""


class DynamicSpecError(ExportOptionError, DynamicShapeError):
    """The ``dynamic`` option itself is malformed (unknown input, axis out of range, ...)."""


class CheckOptionError(Mlx2OnnxError, ValueError):
    """An option of the parity check (seed, tolerance, sizes) has a value that cannot work."""


class UserFunctionError(Mlx2OnnxError):
    """The user's function raised while the parity check ran it; ``error`` is its exception."""

    def __init__(self, where: str, error: BaseException):
        self.where = where
        self.error = error
        super().__init__(f"{where} raised {type(error).__name__}: {error}")


class UsageError(Mlx2OnnxError, ValueError):
    """What the caller names does not exist or cannot be read: a target, a model folder or
    one of its files, a command-line spec (CLI exit 2)."""


class NotAModelFolderError(UsageError):
    """A folder that no folder kind recognises: no config.json an MLX package writes, no
    weights, or not a folder at all; the message says what a model folder holds."""


class MissingPackageError(UsageError):
    """A folder (or a hub id) needs a package that is not installed here; ``package`` is its
    pip name and ``install`` the command that installs it."""

    def __init__(self, message: str, package: str):
        self.package = package
        self.install = f"pip install {package}"
        super().__init__(f"{message}: install {package} to load it ({self.install})")


class UnsupportedVariantError(UnsupportedModelError):
    """A model folder of a known kind in a variant its package cannot serve (a head, a
    decoder, a quantization or a cache the export does not carry)."""


class RuntimeUnavailableError(CheckOptionError):
    """The runtime asked to run the check is unknown or not installed here."""


# -- signals caught inside the pipeline, and its own contracts ----------------------------
class NeedsStatic(Exception):
    """A handler needed a fixed number where the value depends on a dynamic size (the
    capture traces again at fixed sizes, or refuses the dynamic dimension)."""

    def __init__(self, sym, what: str):
        self.sym = sym
        self.what = what
        super().__init__(f"{what}: {sym!r} changes with the dynamic size")


class LoopError(Exception):
    """These records repeat, but not as a loop ONNX can run: the reason (the capture keeps
    them unrolled)."""


class CannotEvaluate(Exception):
    """The record interpreter has no MLX implementation of this record."""


class Mismatch(Exception):
    """The command line's model does not fit the callable (exit 1)."""


class StagingTerminated(BaseException):
    """SIGTERM arrived while a staging folder was open (raised so that it is removed)."""


class DuplicateRegistrationError(RuntimeError):
    """Two handlers (or two claims) for one primitive name."""


class UnknownPrimitiveError(RuntimeError):
    """A handler for a primitive the records table does not describe."""


class PassContractError(RuntimeError):
    """A pass broke the contract every pass keeps (a bug in the pass)."""
