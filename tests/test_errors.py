"""Every exception class of the package lives in mlx2onnx/errors.py: one place to read what
the library raises, for a user's input (Mlx2OnnxError's subclasses) and inside itself."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import mlx2onnx.errors as errors

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mlx2onnx", "op_mappings", "models")


def _exception_names() -> set[str]:
    """The builtin exception names and every class errors.py defines."""
    names = {name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)}
    return names | {name for name, value in vars(errors).items() if isinstance(value, type)}


def test_every_exception_class_is_defined_in_errors_py():
    known = _exception_names()
    outside = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "mlx2onnx" / "errors.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    bases = {base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases}
                    if bases & known:
                        outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not outside, f"exception classes outside mlx2onnx/errors.py: {outside}"


def test_errors_for_a_users_input_are_mlx2onnx_errors():
    """The errors the library raises for what a caller gives are caught by one except."""
    for name in ("UsageError", "UserFunctionError", "ExportOptionError", "CheckOptionError", "UnsupportedModelError",
                 "UnsupportedPrimitiveError", "DynamicShapeError", "RuntimeUnavailableError"):
        assert issubclass(getattr(errors, name), errors.Mlx2OnnxError), name
