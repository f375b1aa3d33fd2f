"""onnxruntime-web (WebAssembly, the browser engine) and onnxruntime-node, run under Node:
one Node process per open model (``ort_js.cjs``), fed raw tensors through files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ...errors import VerificationError
from . import arithmetic
from .base import ModelFile, Runner

SCRIPT = Path(__file__).with_name("ort_js.cjs")
_JS_TYPES = {
    np.dtype(t): t
    for t in ("float32", "float64", "float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
}
_JS_TYPES[np.dtype(bool)] = "bool"


def node_modules(package: str) -> Path | None:
    """The ``node_modules`` folder that holds ``package``: ``$MLX2ONNX_NODE_MODULES``, then
    the working directory and its parents, then this package's checkout and its parents."""
    candidates = []
    if os.environ.get("MLX2ONNX_NODE_MODULES"):
        candidates.append(Path(os.environ["MLX2ONNX_NODE_MODULES"]))
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        candidates += [folder / "node_modules" for folder in (start, *start.parents)]
    for folder in candidates:
        if (folder / package / "package.json").is_file():
            return folder
    return None


def version(package: str) -> str | None:
    folder = node_modules(package)
    if folder is None or shutil.which("node") is None:
        return None
    return json.loads((folder / package / "package.json").read_text())["version"]


class NodeRunner(Runner):
    """``options`` are session config entries, given to the session as its ``extra``."""

    def __init__(self, package: str, source, level: str = "all", options: Mapping[str, str] | None = None):
        self.name = package
        self.level, self.options = level, {str(k): str(v) for k, v in (options or {}).items()}
        folder = node_modules(package)
        node = shutil.which("node")
        if folder is None or node is None:  # the registry checks first; this guards direct use
            raise VerificationError(f"{package} is not installed (needs node and `npm install {package}`)")
        self._file = ModelFile(source)
        self._work = tempfile.TemporaryDirectory(prefix="mlx2onnx-node-")
        env = dict(os.environ, NODE_PATH=str(folder))
        settings = json.dumps({"level": level, "config": self.options})
        self._process = subprocess.Popen(
            [node, str(SCRIPT), package, self._file.path, settings],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        hello = self._answer()
        if "error" in hello:
            self.close()
            raise VerificationError(f"{package} could not load the model: {hello['error']}")
        self.version = hello["ready"]
        self.output_names = hello["outputs"]

    def arithmetic(self, proto) -> list[arithmetic.Arithmetic]:
        return arithmetic.onnxruntime(proto, self.options, self.level, wasm=self.name == "onnxruntime-web")

    def _answer(self) -> dict:
        line = self._process.stdout.readline()
        if not line:
            err = self._process.stderr.read() if self._process.poll() is not None else ""
            raise VerificationError(f"{self.name} under Node stopped: {err.strip()[-500:] or 'no output'}")
        return json.loads(line)

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> list[np.ndarray]:
        request = {"feeds": [], "fetch": list(names), "dir": self._work.name}
        for k, (name, array) in enumerate(feeds.items()):
            array = np.ascontiguousarray(array).reshape(np.shape(array))
            kind = _JS_TYPES.get(array.dtype)
            if kind is None:
                raise VerificationError(f"{self.name} takes no {array.dtype} tensors (input {name!r})")
            file = Path(self._work.name) / f"in_{k}.bin"
            file.write_bytes(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
            request["feeds"].append({"name": name, "type": kind, "dims": list(array.shape), "file": str(file)})
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        answer = self._answer()
        if "error" in answer:
            raise VerificationError(answer["error"])
        out = []
        for entry in answer["outputs"]:
            kind = "bool" if entry["type"] == "bool" else entry["type"]
            data = np.fromfile(entry["file"], dtype=np.dtype(kind).newbyteorder("<"))
            out.append(data.astype(np.dtype(kind)).reshape(entry["dims"]))
        return out

    def close(self) -> None:
        process = getattr(self, "_process", None)
        if process is not None and process.poll() is None:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        if process is not None:
            process.stdout.close()
            process.stderr.close()
        self._process = None
        self._work.cleanup()
        self._file.close()
