"""The names of a package's graph files: transformers.js loads graph ``NAME`` at a dtype
from ``onnx/NAME<suffix>.onnx``; mlx2onnx names each graph by what it holds, and config.json's
``transformers.js_config`` names the dtype of each, so the runtime's defaults find them."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from ..translate.markers import WEIGHT_BITS

# transformers.js's dtypes -> the suffix of the graph file each loads (``{dtype: "q4"}``: model_q4.onnx)
DTYPE_SUFFIXES = {
    "fp32": "",
    "fp16": "_fp16",
    "int8": "_int8",
    "uint8": "_uint8",
    "q8": "_quantized",
    "q4": "_q4",
    "q4f16": "_q4f16",
    "bnb4": "_bnb4",
}


def graph_dtype(graph) -> str:
    """transformers.js's name for what the onnx-ir ``graph`` holds: ``q4`` / ``q8`` where
    most of its quantized matrix products (low-bit blocks of MLX's weights, marked with
    their width, or ``DequantizeLinear`` of 4- or 8-bit codes) have 4 / 8 bits, ``fp32``
    where none is quantized; with ``f16``
    (``fp16``, ``q4f16``) where its outputs are float16 or most of its float weights are
    (an encoder that returns float32 states from float16 weights). A graph no name fits (3-bit
    weights, 8-bit weights with float16 activations) is ``fp32``: the file without a
    suffix, which transformers.js loads when told nothing."""
    import onnx_ir as ir

    codes = {ir.DataType.INT4: 4, ir.DataType.UINT4: 4, ir.DataType.INT8: 8, ir.DataType.UINT8: 8}
    bits = Counter()
    for node in ir.traversal.RecursiveGraphIterator(graph.graph):
        if WEIGHT_BITS in node.metadata_props:
            bits[int(node.metadata_props[WEIGHT_BITS])] += 1
        elif node.op_type == "DequantizeLinear" and node.inputs[0].dtype in codes:
            bits[codes[node.inputs[0].dtype]] += 1
    floats = Counter()
    for value in graph.graph.initializers.values():
        if value.dtype in (ir.DataType.FLOAT16, ir.DataType.FLOAT):
            floats[value.dtype] += math.prod(value.shape.numpy()) if value.shape is not None else 0
    half = (
        any(out.dtype == ir.DataType.FLOAT16 for out in graph.graph.outputs)
        or floats[ir.DataType.FLOAT16] > floats[ir.DataType.FLOAT]
    )
    width = bits.most_common(1)[0][0] if bits else None
    name = {(None, False): "fp32", (None, True): "fp16", (4, False): "q4", (4, True): "q4f16", (8, False): "q8"}
    return name.get((width, half), "fp32")


def dtype_file(name: str, dtype: str) -> str:
    """The file transformers.js loads for graph ``name`` (``onnx/model.onnx``) at ``dtype``."""
    path = Path(name)
    return str(path.with_name(f"{path.stem}{DTYPE_SUFFIXES[dtype]}{path.suffix}"))


def graph_path(package: Path, name: str) -> Path:
    """Where ``package`` holds its graph ``name`` (``onnx/model.onnx``): the file of the
    dtype its config.json gives transformers.js for it (fp32: ``name`` itself)."""
    config = package / "config.json"
    dtypes = {}
    if config.is_file():
        dtypes = json.loads(config.read_text()).get("transformers.js_config", {}).get("dtype", {})
    dtype = dtypes.get(Path(name).stem, "fp32") if isinstance(dtypes, dict) else dtypes
    return package / dtype_file(name, dtype if dtype in DTYPE_SUFFIXES else "fp32")
