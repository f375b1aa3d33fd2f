"""The ONNX runtimes a parity check runs a model in.

Each runtime opens a model file (or serialised bytes) and runs it on numpy feeds:

- ``onnxruntime``: the Python package (the default; providers and optimisation level apply);
- ``onnxruntime-web``: the browser engine (WebAssembly), run under Node;
- ``onnxruntime-node``: the Node binding (its bundled native CPU library);
- ``openvino``: Intel's runtime on the CPU, with float32 inference precision (on CPUs with
  AMX its default hint is bfloat16);
- ``tract``: Sonos' Rust runtime, through its Python binding.

The Node packages are found in a ``node_modules`` folder of the working directory or one
of its parents, of this package's checkout, or in ``$MLX2ONNX_NODE_MODULES``.
"""

from __future__ import annotations

from .base import Runner, declared_feeds
from .registry import RUNTIMES, available, install_hint, open_runtime, runtime_version

__all__ = ["RUNTIMES", "Runner", "available", "declared_feeds", "install_hint", "open_runtime", "runtime_version"]
