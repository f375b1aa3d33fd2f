"""Saving: atomic writes, and ONNX external data when protobuf's 2 GB limit would be hit."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir

from ..errors import ExportOptionError, StagingTerminated
from .ownership import file_refusal, publish

# protobuf refuses messages of 2 GiB; keep a margin for the graph itself.
EXTERNAL_DATA_THRESHOLD = 2**31 - 64 * 2**20


def initializer_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def needs_external_data(model: ir.Model) -> bool:
    return initializer_bytes(model) > EXTERNAL_DATA_THRESHOLD


# Bytes a strided (e.g. folded-transpose) weight is made contiguous in while writing it.
WRITE_CHUNK_BYTES = 16 * 2**20
_TILE = 64


class _StridedTensor(ir.Tensor):
    """A tensor over a non-contiguous array (a lazily transposed weight), written to a
    file in contiguous row blocks: neither a whole contiguous copy nor NumPy's slow
    element-wise ``tofile`` of a strided array."""

    def tobytes(self) -> bytes:
        array = self.numpy()
        if array.ndim != 2 or array.flags.c_contiguous:
            return super().tobytes()
        out = np.empty(array.shape, dtype=array.dtype)
        _tiled_copy(out, array)
        return out.tobytes()

    def tofile(self, file) -> None:
        array = self.numpy()
        if array.ndim == 0 or array.flags.c_contiguous:
            return super().tofile(file)
        rows = max(1, WRITE_CHUNK_BYTES // max(1, array[0].nbytes))
        buffer = np.empty((min(rows, array.shape[0]),) + array.shape[1:], dtype=array.dtype)
        for start in range(0, array.shape[0], rows):
            part = array[start : start + rows]
            block = buffer[: part.shape[0]]
            if array.ndim == 2:
                _tiled_copy(block, part)
            else:
                np.copyto(block, part)
            file.write(block.view(np.uint8).reshape(-1).data)


def _tiled_copy(out: np.ndarray, array: np.ndarray) -> None:
    """``out[...] = array`` for a 2-D strided array, in tiles that fit the cache (about 3x
    faster than NumPy's single strided copy of a transposed weight)."""
    for i in range(0, array.shape[0], _TILE):
        for j in range(0, array.shape[1], _TILE):
            out[i : i + _TILE, j : j + _TILE] = array[i : i + _TILE, j : j + _TILE]


def stream_strided(model: ir.Model) -> None:
    """Let strided initializers write themselves in blocks (see :class:`_StridedTensor`)."""
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if type(tensor) is ir.Tensor and isinstance(tensor.raw, np.ndarray) and not tensor.raw.flags.c_contiguous:
            value.const_value = _StridedTensor(tensor.raw, dtype=tensor.dtype, name=tensor.name)


PROGRESS_MIN_BYTES = 2**30
# Initializers at least this large are streamed into a single-file model (see _write_streamed).
STREAM_MIN_BYTES = 4096
_STREAMABLE = frozenset(
    ir.DataType[n]
    for n in "FLOAT DOUBLE FLOAT16 BFLOAT16 INT8 INT16 INT32 INT64 UINT8 UINT16 UINT32 UINT64 BOOL".split()
)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _write_streamed(model: ir.Model, path: Path) -> None:
    """Write ``model`` as one protobuf file without building the weights into a message.

    The model is serialised without its large initializers, then a second ``graph`` field
    holding only those initializers is appended, each ``raw_data`` written straight from
    its array. Protobuf merges repeated occurrences of an embedded message field (the
    initializers are appended to the graph), so readers see one ordinary model; the
    weights are never copied into a protobuf message or a ``bytes`` object.
    """
    graph = model.graph
    order = list(graph.initializers.items())
    big = [
        (name, value)
        for name, value in order
        if type(value.const_value) in (ir.Tensor, _StridedTensor)
        and isinstance(value.const_value.raw, np.ndarray)
        and value.const_value.dtype in _STREAMABLE
        and value.const_value.nbytes >= STREAM_MIN_BYTES
        and not value.is_graph_input()
        and not value.is_graph_output()
    ]
    for name, _ in big:
        graph.initializers.pop(name)
    try:
        head = ir.serde.serialize_model(model)
    finally:
        for name, _ in order:
            graph.initializers.pop(name, None)
        for name, value in order:
            graph.initializers[name] = value
    parts, total = [], 0
    for name, value in big:
        tensor = value.const_value
        header = onnx.TensorProto(name=name, data_type=int(tensor.dtype), dims=[int(d) for d in tensor.shape])
        header = header.SerializeToString() + b"\x4a" + _varint(tensor.nbytes)  # field 9: raw_data
        length = len(header) + tensor.nbytes
        parts.append((b"\x2a" + _varint(length) + header, tensor))  # GraphProto field 5: initializer
        total += len(parts[-1][0]) + tensor.nbytes
    with open(path, "wb") as f:
        f.write(head.SerializeToString())
        del head
        if parts:
            f.write(b"\x3a" + _varint(total))  # ModelProto field 7: graph (merged into the first)
            for prefix, tensor in parts:
                f.write(prefix)
                start = f.tell()
                tensor.tofile(f)
                if f.tell() - start != tensor.nbytes:
                    raise RuntimeError(f"wrote {f.tell() - start} bytes for a {tensor.nbytes}-byte tensor")


def _progress(model: ir.Model):
    """A one-line stderr progress report while a large model's weights are written (only
    when stderr is a terminal, or MLX2ONNX_PROGRESS=1)."""
    total = initializer_bytes(model)
    wanted = os.environ.get("MLX2ONNX_PROGRESS")
    if wanted == "0" or total < PROGRESS_MIN_BYTES or not (wanted == "1" or sys.stderr.isatty()):
        return None
    done = [0, 0]  # bytes, tensors

    def report(tensor, info) -> None:  # called as each tensor is written
        done[0] += tensor.nbytes
        done[1] += 1
        last = done[1] >= info.total
        percent = 100 if last else min(99, int(100 * done[0] / total))
        sys.stderr.write(
            f"\rmlx2onnx: writing weights {done[0] / 2**30:.2f} / {total / 2**30:.2f} GiB "
            f"({percent}%)" + ("\n" if last else "")
        )
        sys.stderr.flush()

    return report


def check_output_path(path: str | os.PathLike, overwrite: bool = False, data_name: str | None = None) -> Path:
    """Validate an output path before any work is done; raise a clear error if unusable.
    An existing model (and its weights file ``data_name``, default ``<name>.data``) is
    replaced only with ``overwrite`` and only when mlx2onnx wrote it (:mod:`.ownership`)."""
    path = Path(path)
    if path.suffix.lower() != ".onnx":
        raise ExportOptionError(f"output path {str(path)!r} should end in .onnx")
    if path.is_dir():
        raise ExportOptionError(f"output path {str(path)!r} is a directory; give a file name ending in .onnx")
    if path.name.startswith(".."):  # onnx reads the weights file "..name.onnx.data" as outside the folder
        raise ExportOptionError(f"output file name {path.name!r} starts with '..'; choose a name without it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise ExportOptionError(f"the directory {str(parent)!r} for {path.name!r} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise ExportOptionError(f"the directory {str(parent)!r} is not writable; choose another output path")
    try:  # os.access says yes to root even on read-only or pseudo file systems: try it
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise ExportOptionError(
            f"the directory {str(parent)!r} is not writable ({exc.strerror}); choose another output path"
        ) from exc
    refuse_taken(path, overwrite, data_name)
    return path


def refuse_taken(path: Path, overwrite: bool, data_name: str | None = None) -> None:
    """ExportOptionError when ``path`` or its weights file ``data_name`` exists and may not
    be replaced: without ``overwrite``, or not written by mlx2onnx (:mod:`.ownership`)."""
    data = path.with_name(data_name or path.name + ".data")
    if not overwrite:
        for taken in (path, data):
            if taken.exists():
                raise ExportOptionError(
                    f"{str(taken)!r} already exists; pass overwrite=True (CLI: --overwrite) to replace it"
                )
    reason = file_refusal(path, [data])
    if reason:
        raise ExportOptionError(reason)


@contextlib.contextmanager
def staging_folder(directory: Path, prefix: str):
    """A temporary folder beside the final files, removed whatever happens: writers fill
    and check it, then publish with ``os.replace`` (atomic on one file system).

    Removed on an exception, on Ctrl-C (SIGINT) and on SIGTERM: while it is open, a SIGTERM
    that would end the process with Python's default action is turned into an exception,
    the folder is removed, and the process then ends by the same signal. The signal is
    remembered as well as raised: C code that was running (numpy writing a tensor) may
    replace the exception by its own, and the process must still end by SIGTERM. SIGKILL
    cannot be caught: what it leaves is a hidden ``.NAME.XXXXXXXX.tmp`` folder beside the
    output."""
    catch = threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    signalled = []

    def terminate(signum, frame):
        signalled.append(signum)
        raise StagingTerminated()

    if catch:  # before the folder exists: a SIGTERM between the two would leave it behind
        signal.signal(signal.SIGTERM, terminate)
    staging = None
    try:
        staging = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=directory or "."))
        yield staging
    except BaseException:
        if not signalled:
            raise
    finally:
        if catch:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    if signalled:  # end as SIGTERM would have, now that nothing is left behind
        os.kill(os.getpid(), signal.SIGTERM)


def save_model(
    model: ir.Model | onnx.ModelProto,
    path: str | os.PathLike,
    *,
    external_data: bool | None = None,
    check: bool = True,
    overwrite: bool = False,
    data_name: str | None = None,
) -> Path:
    """Write ``model`` to ``path`` atomically; return the path.

    The files are first written into a temporary folder beside ``path`` (and checked with
    ``onnx.checker`` when ``check``), then renamed into place, so a failure never leaves a
    partial model behind; an existing model is replaced only with ``overwrite`` and only
    when mlx2onnx wrote it (checked before the write and again before the move).
    ``external_data=None`` stores weights in ``<name>.onnx.data``
    beside the model only when the model would exceed protobuf's 2 GB limit
    (``data_name`` names that file otherwise).
    """
    path = check_output_path(path, overwrite, data_name)
    proto = None
    if isinstance(model, onnx.ModelProto):
        if external_data is False:  # write the message as it is: no second serialisation
            proto = model
        else:
            model = ir.serde.deserialize_model(model)
    use_external = (
        False if proto is not None else needs_external_data(model) if external_data is None else external_data
    )
    data_name = data_name or path.name + ".data"
    with staging_folder(path.parent, f".{path.stem}.") as staging:
        staged = staging / path.name
        if proto is not None:
            onnx.save_model(proto, str(staged))
        elif use_external:
            stream_strided(model)
            ir.save(model, staged, external_data=data_name, callback=_progress(model))
        else:
            stream_strided(model)
            _write_streamed(model, staged)
        if check:
            onnx.checker.check_model(str(staged), full_check=True)
        refuse_taken(path, overwrite, data_name)  # nothing else took the path meanwhile
        # without external data, a weights file left by the model replaced is stale: removed with it
        data = (staging / data_name) if use_external else None
        publish(staging, [(data, path.parent / data_name), (staged, path)])
    return path
