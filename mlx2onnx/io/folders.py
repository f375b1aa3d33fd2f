"""A model folder's files read before any loader runs: weights files cut short or
corrupt, shards an index names but the folder lacks, a package given where its model
folder is wanted, and the tokenizer a package's runtimes read. Each problem is one
:class:`~mlx2onnx.errors.UsageError` naming the file and what would work."""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path

from ..errors import MissingPackageError, NotAModelFolderError, UsageError
from .ownership import FOLDER_MARKER

# bytes per element of each safetensors dtype
_WIDTHS = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
_AGAIN = "an incomplete download or a corrupt file: download or convert the model again"

# a Hugging Face hub id, ORG/NAME; and what of a model repository its export reads (as mlx-lm's
# load() fetches: no *.py, no other formats' weights)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
HUB_FILES = ["*.json", "*.safetensors", "*.npz", "tokenizer.model", "*.tiktoken", "*.txt", "*.jinja", "*.jsonl"]


def is_hub_id(spec: str | os.PathLike) -> bool:
    """Whether ``spec`` names a hub model (ORG/NAME) rather than a path here: no file or
    folder of that name, nor of its first part, exists."""
    spec = str(spec)
    return bool(_HUB_ID.fullmatch(spec)) and not os.path.lexists(spec) and not os.path.lexists(spec.split("/")[0])


def hub_folder(repo_id: str, revision: str | None = None) -> Path:
    """The folder of the hub model ``repo_id`` (at ``revision``) in huggingface_hub's
    cache, fetched into it when missing, as mlx-lm's ``load`` does (``HF_HUB_OFFLINE=1``:
    the cache alone; ``HF_HUB_CACHE`` / ``HF_HOME`` say where it is)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise MissingPackageError(
            f"{repo_id!r} is not a folder here (give the path of the downloaded folder); to fetch it as a hub id",
            "huggingface_hub",
        ) from None
    try:
        folder = Path(snapshot_download(repo_id, revision=revision, allow_patterns=HUB_FILES))
    except Exception as exc:  # not cached while offline, no such repository or revision, no network
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(
            f"{repo_id!r} is not a folder here, and the Hugging Face hub did not give it "
            f"({type(exc).__name__}: {reason}); check the id and revision, or download the folder "
            "and give its path"
        ) from None
    if not (folder / "config.json").is_file() and not any(folder.glob("*.safetensors")):
        raise UsageError(
            f"the hub's {repo_id!r} holds no MLX model files (config.json, *.safetensors): is it an "
            "MLX model (e.g. one of mlx-community's)?"
        )
    return folder


def safetensors_header(path: Path) -> tuple[dict, int]:
    """The header of the safetensors file ``path`` (tensor name -> dtype, shape and data
    offsets) and its length in bytes; ValueError saying what is wrong when it has none."""
    size = path.stat().st_size
    if size < 8:
        raise ValueError(f"is {size} bytes long, shorter than a safetensors header")
    with open(path, "rb") as f:
        length = struct.unpack("<Q", f.read(8))[0]
        if length > size - 8:
            raise ValueError(
                f"is cut short: its header alone should be {length} bytes, the file has {size - 8} after its size"
            )
        try:
            header = json.loads(f.read(length))
        except ValueError:
            raise ValueError("does not start with a safetensors header (JSON)") from None
    if not isinstance(header, dict):
        raise ValueError("does not start with a safetensors header (a JSON object)")
    return header, length


def safetensors_problem(path: Path) -> str | None:
    """What is wrong with the safetensors file ``path`` (its header against its size and
    its tensors' shapes), or None."""
    try:
        header, length = safetensors_header(path)
    except ValueError as exc:
        return str(exc)
    size = path.stat().st_size
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
        raise NotAModelFolderError(
            f"{folder} is an ONNX package, not an MLX model folder: give the MLX folder it was exported "
            f"from (to run the package against it: mlx2onnx check {folder} MODEL_FOLDER)"
        )
    torch = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt*")]
    if torch and not any(folder.glob("*.safetensors")) and not any(folder.glob("*.npz")):
        raise NotAModelFolderError(
            f"{folder} holds PyTorch weights ({', '.join(sorted(torch)[:3])}), not an MLX model: "
            "convert it first (e.g. mlx_lm.convert --hf-path FOLDER --mlx-path MLX_FOLDER)"
        )
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
    raise UsageError(
        f"{folder} has no {' or '.join(lacking)}: {runtimes} read the tokenizer from the package, "
        "so the package would not run. Copy the model's tokenizer files into the folder (the MLX "
        f"packages' converters write them){alone}"
    )
