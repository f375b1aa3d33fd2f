"""Saving: atomic writes, and ONNX external data when protobuf's 2 GB limit would be hit."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import onnx
import onnx_ir as ir

from .errors import ExportOptionError

# protobuf refuses messages of 2 GiB; keep a margin for the graph itself.
EXTERNAL_DATA_THRESHOLD = 2**31 - 64 * 2**20


def initializer_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def needs_external_data(model: ir.Model) -> bool:
    return initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD


def check_output_path(path: str | os.PathLike, overwrite: bool = True) -> Path:
    """Validate an output path before any work is done; raise a clear error if unusable."""
    path = Path(path)
    if path.suffix.lower() != ".onnx":
        raise ExportOptionError(f"output path {str(path)!r} should end in .onnx")
    if path.is_dir():
        raise ExportOptionError(f"output path {str(path)!r} is a directory; give a file name ending in .onnx")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ExportOptionError(f"the directory {str(parent)!r} for {path.name!r} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise ExportOptionError(f"the directory {str(parent)!r} is not writable; choose another output path")
    if path.exists() and not overwrite:
        raise ExportOptionError(f"{str(path)!r} already exists; pass overwrite=True (CLI: --overwrite) to replace it")
    return path


def save_model(
    model: ir.Model | onnx.ModelProto,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    check: bool = True,
    overwrite: bool = True,
) -> Path:
    """Write ``model`` to ``path`` atomically; return the path.

    The files are first written into a temporary folder beside ``path`` (and checked with
    ``onnx.checker`` when ``check``), then renamed into place, so a failure never leaves a
    partial model behind. ``external_data=None`` stores weights in ``<name>.onnx.data``
    beside the model only when the model would exceed protobuf's 2 GB limit.
    """
    path = check_output_path(path, overwrite)
    if isinstance(model, onnx.ModelProto):
        model = ir.serde.deserialize_model(model)
    use_external = needs_external_data(model) if external_data is None else external_data
    data_name = path.name + ".data"
    staging = Path(tempfile.mkdtemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent or "."))
    try:
        staged = staging / path.name
        if use_external:
            ir.save(model, staged, external_data=data_name)
        else:
            ir.save(model, staged)
        if check:
            onnx.checker.check_model(str(staged), full_check=True)
        if use_external:
            os.replace(staging / data_name, path.parent / data_name)
        elif (path.parent / data_name).exists() and overwrite:
            os.remove(path.parent / data_name)  # a stale weights file from an earlier export
        os.replace(staged, path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return path
