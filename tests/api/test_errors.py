"""Every exception class of the package lives in mlx2onnx/errors.py: one place to read what
the library raises, for a user's input (Mlx2OnnxError's subclasses) and inside itself."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import mlx2onnx.errors as errors

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mlx2onnx", "op_mappings", "models")


def _exception_names() -> set[str]:
    """The builtin exception names and every class errors.py defines."""
    names = {
        name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
    }
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
                    bases = {
                        base.id if isinstance(base, ast.Name) else getattr(base, "attr", "") for base in node.bases
                    }
                    if bases & known:
                        outside.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not outside, f"exception classes outside mlx2onnx/errors.py: {outside}"


def test_errors_for_a_users_input_are_mlx2onnx_errors():
    """The errors the library raises for what a caller gives are caught by one except."""
    for name in (
        "UsageError",
        "UserFunctionError",
        "ExportOptionError",
        "CheckOptionError",
        "UnsupportedModelError",
        "NotAModelFolderError",
        "MissingPackageError",
        "UnsupportedVariantError",
        "UnsupportedPrimitiveError",
        "DynamicShapeError",
        "RuntimeUnavailableError",
    ):
        assert issubclass(getattr(errors, name), errors.Mlx2OnnxError), name


def test_a_missing_package_names_the_pip_command(tmp_path, monkeypatch):
    """A folder whose MLX package is not installed: a MissingPackageError (a UsageError, exit
    2) naming the package and the command that installs it."""
    import sys

    from mlx2onnx.cli.common import EXIT_USAGE, exit_code
    from mlx2onnx.tasks.loading import load_with

    # as if it were not installed: import raises ImportError (also where another test imported it before)
    for name in ["mlx_audio", *(m for m in sys.modules if m.startswith("mlx_audio."))]:
        monkeypatch.setitem(sys.modules, name, None)
    try:
        load_with(tmp_path, "mlx-audio", "mlx_audio.stt.utils", "load", lambda load: load(str(tmp_path)))
    except errors.MissingPackageError as exc:
        assert exc.package == "mlx-audio" and exc.install == "pip install mlx-audio"
        assert "pip install mlx-audio" in str(exc) and str(tmp_path) in str(exc)
        assert exit_code(exc)[0] == EXIT_USAGE
    else:
        raise AssertionError("no MissingPackageError")


def test_a_folder_no_kind_recognises_is_named_so(tmp_path):
    from mlx2onnx.tasks import export_folder

    (tmp_path / "weights.bin").write_bytes(b"\0" * 8)
    for folder in (tmp_path / "absent", tmp_path):
        try:
            export_folder(folder, tmp_path / "out")
        except errors.NotAModelFolderError as exc:
            assert str(folder) in str(exc)
        else:
            raise AssertionError(f"{folder}: no NotAModelFolderError")
    assert not (tmp_path / "out").exists()


def test_every_library_error_has_one_exit_code():
    """The CLI maps errors to exit codes in one place (cli.common.exit_code)."""
    from mlx2onnx.cli.common import EXIT_EXPORT, EXIT_USAGE, EXIT_USER, exit_code

    assert exit_code(errors.NotAModelFolderError("x"))[0] == EXIT_USAGE
    assert exit_code(errors.ExportOptionError("x"))[0] == EXIT_USAGE
    assert exit_code(errors.UserFunctionError("here", ValueError("x")))[0] == EXIT_USER
    assert exit_code(errors.UnsupportedVariantError("x"))[0] == EXIT_EXPORT
    assert exit_code(errors.VerificationError("x")) == (EXIT_EXPORT, "verification failed: ")
