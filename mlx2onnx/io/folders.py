"""A model folder's files read before any loader runs: weights files cut short or
corrupt, shards an index names but the folder lacks, a package given where its model
folder is wanted, and the tokenizer a package's runtimes read. Each problem is one
:class:`~mlx2onnx.errors.UsageError` naming the file and what would work."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ..errors import UsageError
from .ownership import FOLDER_MARKER

# bytes per element of each safetensors dtype
_WIDTHS = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
           "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_AGAIN = "an incomplete download or a corrupt file: download or convert the model again"


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with the safetensors file ``path`` (its header against its size and
    its tensors' shapes), or None."""
    size = path.stat().st_size
    if size < 8:
        return f"is {size} bytes long, shorter than a safetensors header"
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        if length > size - 8:
            return f"is cut short: its header alone should be {length} bytes, the file has {size - 8} after its size"
        try:
            header = json.loads(f.read(length))
        except ValueError:
            return "does not start with a safetensors header (JSON)"
    if not isinstance(header, dict):
        return "does not start with a safetensors header (a JSON object)"
    end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(v) for v in entry["data_offsets"])
            count = 1
            for dim in entry["shape"]:
                count *= int(dim)
            width = _WIDTHS.get(entry["dtype"])
        except (KeyError, TypeError, ValueError):
            return f"has a header entry for {name!r} that is not a tensor's"
        if width is not None and stop - start != count * width:
            return f"holds {stop - start} bytes for the tensor {name!r} of shape {entry['shape']} ({entry['dtype']})"
        end = max(end, stop)
    if 8 + length + end > size:
        return f"is cut short: {size} bytes where its header describes {8 + length + end}"
    return None


def check_weights_files(folder: Path) -> None:
    """UsageError for a weights file of ``folder`` that is cut short or corrupt, or a shard
    its ``model.safetensors.index.json`` names that the folder lacks."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, AttributeError, TypeError):
            raise UsageError(f"{index} is not a safetensors index (JSON with a weight_map): {_AGAIN}") from None
        missing = [s for s in shards if not (folder / s).is_file()]
        if missing:
            raise UsageError(f"{folder} lacks weights files its index names: {', '.join(missing)}: {_AGAIN}")
    for path in sorted(folder.glob("*.safetensors")):
        problem = safetensors_problem(path)
        if problem:
            raise UsageError(f"{path} {problem}: {_AGAIN}")


def check_model_folder(folder: Path) -> None:
    """UsageError when ``folder`` cannot be a model folder: a package mlx2onnx wrote,
    PyTorch weights without safetensors, or weights files that are cut short or corrupt."""
    if (folder / FOLDER_MARKER).is_file() or (folder / "onnx").is_dir() and not any(folder.glob("*.safetensors")):
        raise UsageError(f"{folder} is an ONNX package, not an MLX model folder: give the MLX folder it was exported "
                         f"from (to run the package against it: mlx2onnx check {folder} MODEL_FOLDER)")
    torch = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt*")]
    if torch and not any(folder.glob("*.safetensors")) and not any(folder.glob("*.npz")):
        raise UsageError(f"{folder} holds PyTorch weights ({', '.join(sorted(torch)[:3])}), not an MLX model: "
                         "convert it first (e.g. mlx_lm.convert --hf-path FOLDER --mlx-path MLX_FOLDER)")
    check_weights_files(folder)


def check_tokenizer(folder: Path, runtimes: str, graph_alone: bool = False) -> None:
    """UsageError when ``folder`` has no tokenizer that ``runtimes`` (the package's) can
    read: tokenizer_config.json beside tokenizer.json or tokenizer.model. ``graph_alone``:
    the error names the export of the bare graph (``-o model.onnx``) as the way out."""
    has_model = (folder / "tokenizer.json").is_file() or (folder / "tokenizer.model").is_file()
    if has_model and (folder / "tokenizer_config.json").is_file():
        return
    lacking = [n for n in ("tokenizer.json", "tokenizer_config.json") if not (folder / n).is_file()]
    alone = f", or export the graph alone: mlx2onnx export {folder} -o model.onnx" if graph_alone else ""
    raise UsageError(f"{folder} has no {' or '.join(lacking)}: {runtimes} read the tokenizer from the package, "
                     "so the package would not run. Copy the model's tokenizer files into the folder (the MLX "
                     f"packages' converters write them){alone}")
