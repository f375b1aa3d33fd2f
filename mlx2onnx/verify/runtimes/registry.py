"""Runtime names -> adapters, their installed versions, and how to install the missing."""

from __future__ import annotations

from typing import Mapping, Sequence

from ...errors import CheckOptionError, RuntimeUnavailableError
from . import onnxruntime_js, onnxruntime_py, openvino_cpu, tract_cpu
from .base import Runner

RUNTIMES = ("onnxruntime", "onnxruntime-web", "onnxruntime-node", "openvino", "tract")

_INSTALL = {
    "onnxruntime": "pip install onnxruntime",
    "onnxruntime-web": "install Node 20+ and run `npm install --ignore-scripts onnxruntime-web` in the working directory",
    "onnxruntime-node": "install Node 20+ and run `npm install --ignore-scripts onnxruntime-node` in the working directory",
    "openvino": "pip install openvino",
    "tract": "pip install tract",
}


def runtime_version(name: str) -> str | None:
    """The installed version of runtime ``name``, or None when it is not installed."""
    if name == "onnxruntime":
        return onnxruntime_py.version()
    if name in ("onnxruntime-web", "onnxruntime-node"):
        return onnxruntime_js.version(name)
    if name == "openvino":
        return openvino_cpu.version()
    if name == "tract":
        return tract_cpu.version()
    raise RuntimeUnavailableError(unknown(name))


def unknown(name: str) -> str:
    return f"runtime {name!r} is not one mlx2onnx runs: choose one of {', '.join(RUNTIMES)}"


def install_hint(name: str) -> str:
    return _INSTALL[name]


def available(name: str) -> bool:
    return runtime_version(name) is not None


def open_runtime(
    name: str,
    source,
    level: str = "all",
    providers: Sequence[str] = ("CPUExecutionProvider",),
    options: Mapping[str, str] | None = None,
) -> Runner:
    """Open ``source`` (a model path, or serialised bytes) in runtime ``name`` with the
    user's ``options`` (onnxruntime's session config entries, OpenVINO's compile
    properties; none: the runtime's defaults); a clear
    :class:`~mlx2onnx.errors.RuntimeUnavailableError` when that runtime is not installed."""
    if runtime_version(name) is None:
        raise RuntimeUnavailableError(f"runtime {name!r} is not installed here: {install_hint(name)}")
    if name == "onnxruntime":
        return onnxruntime_py.OnnxruntimeRunner(source, level, providers, options)
    if name == "openvino":
        return openvino_cpu.OpenvinoRunner(source, options)
    if name == "tract":
        if options:
            raise CheckOptionError(f"tract takes no runtime options (given {sorted(options)})")
        return tract_cpu.TractRunner(source)
    return onnxruntime_js.NodeRunner(name, source, level, options)
