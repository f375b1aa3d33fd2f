"""Image classification: an mlx-image (mlxim) weights folder -> a transformers.js
``image-classification`` package, and its check.

mlx-image publishes a model as a folder holding only its weights (``model.safetensors``,
as ``mlx-vision/<name>-mlxim`` on the Hugging Face hub); the architecture is the mlxim
model whose parameter names and shapes the weights match (a folder named
``<name>-mlxim`` settles a tie). The package holds ``onnx/model.onnx`` (input
``pixel_values`` float32 [batch_size, 3, height, width], channels first as the runtimes'
image processors give them; output ``logits`` [batch_size, classes]), ``config.json``
(the transformers.js model type of the family, ``LABEL_<i>`` labels) and
``preprocessor_config.json``: mlxim's evaluation transform (resize to ``img_size /
crop_pct`` square, centre crop ``img_size``, ImageNet mean and std) as transformers.js's
image processor options."""

from __future__ import annotations

import math
from pathlib import Path

import mlx.core as mx
import numpy as np

from ..errors import MissingPackageError, NotAModelFolderError, UsageError, UserFunctionError
from ..io.notes import PackageNotes, noted
from .image_processors import IMAGENET_MEAN, IMAGENET_STD, RESAMPLE, centre_crop_settings


def weights_file(folder: Path) -> Path | None:
    found = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.npz"))
    return found[0] if len(found) == 1 else None


def identify(folder: Path) -> tuple[str, int]:
    """(mlxim model name, number of classes) of the weights in ``folder``."""
    from mlx.utils import tree_flatten

    try:
        from mlxim.model._registry import MODEL_ENTRYPOINT
    except ImportError as exc:
        raise MissingPackageError(
            f"{folder} holds weights without a config.json, as mlx-image publishes them ({exc})", "mlx-image"
        ) from None
    path = weights_file(folder)
    if path is None:
        raise NotAModelFolderError(
            f"{folder} has no config.json and not one weights file (*.safetensors or *.npz): an "
            "mlx-image folder holds one, an mlx-lm or mlx-embeddings folder a config.json"
        )
    weights = {k: tuple(v.shape) for k, v in mx.load(str(path)).items()}
    matches = []
    for name, build in MODEL_ENTRYPOINT.items():
        shapes = {k: tuple(v.shape) for k, v in tree_flatten(build(num_classes=1000).parameters())}
        if set(shapes) != set(weights):
            continue
        # the classifier's parameters lead with 1000 at 1000 classes: their size in the weights is the class count
        heads = [k for k, shape in shapes.items() if shape[:1] == (1000,)]
        classes = weights[heads[0]][0] if heads and weights[heads[0]] else 1000
        if {k: tuple(v.shape) for k, v in tree_flatten(build(num_classes=classes).parameters())} == weights:
            matches.append((name, classes))
    if not matches:
        quantized = any(k.endswith(".scales") for k in weights)  # mlx-image builds and loads no quantized layer
        raise NotAModelFolderError(
            f"{folder} has no config.json, which an mlx-lm or mlx-embeddings model folder holds, and "
            f"the weights in {path.name} match no mlx-image model (their parameter names and shapes are "
            "those of none of mlxim.model.list_models())"
            + (
                "; they hold quantized layers (.scales), which mlx-image neither writes nor loads: export "
                "the float weights"
                if quantized
                else ""
            )
        )
    named = [m for m in matches if f"{m[0]}-mlxim" in str(folder.resolve())]
    if len(matches) > 1 and len(named) != 1 and len({_transform(m) for m, _ in matches}) > 1:
        raise UsageError(
            f"the weights in {path} fit the mlx-image models {', '.join(m for m, _ in matches)}, which "
            "preprocess images differently: name the folder <model>-mlxim, as mlx-vision's repositories "
            "are named"
        )
    return (named or matches)[0]


def _transform(name: str):
    from mlxim.model._registry import MODEL_CONFIG

    t = MODEL_CONFIG[name].transform
    return (t.img_size, t.crop_pct, t.interpolation)


def load_image_folder(folder: Path):
    """(model, mlxim name, classes) as ``mlxim.model.create_model`` loads the weights."""
    from mlxim.model import create_model

    name, classes = identify(folder)
    try:
        model = create_model(name, weights=str(weights_file(folder)), num_classes=classes, strict=True)
    except Exception as exc:
        raise UserFunctionError(f"loading the mlx-image weights in {folder} as {name}", exc) from exc
    model.eval()
    return model, name, classes


def classify(model):
    """The package's function: channels-first ``pixel_values`` -> logits (mlxim models
    take channels last)."""
    return lambda pixel_values: model(pixel_values.transpose(0, 2, 3, 1))


def preprocessor_config(name: str) -> dict:
    """mlxim's evaluation transform as transformers.js's image processor options (mlxim
    normalises with ImageNet's mean and std whatever its config says)."""
    img_size, crop_pct, interpolation = _transform(name)
    scaled = math.floor(img_size / crop_pct)
    return centre_crop_settings(
        "BitImageProcessor",
        {"height": scaled, "width": scaled},
        img_size,
        IMAGENET_MEAN,
        IMAGENET_STD,
        RESAMPLE.get(interpolation, 2),
    )


def model_config(name: str, classes: int, architectures: dict[str, str]) -> tuple[dict, str | None]:
    """config.json, and why transformers.js cannot run the package (None when it can);
    ``architectures``: mlxim model name prefix -> transformers.js model type (the registry's)."""
    family = next((t for prefix, t in architectures.items() if name.startswith(prefix)), None)
    labels = {str(i): f"LABEL_{i}" for i in range(classes)}
    config = {
        "model_type": family or name.split("_")[0],
        "num_labels": classes,
        "id2label": labels,
        "label2id": {v: int(k) for k, v in labels.items()},
    }
    reason = None if family else (f"transformers.js has no image-classification model type for mlx-image's {name}")
    notes = PackageNotes(
        task="image-classification", mlx_image_model=name, transformers_js=reason and f"cannot run: {reason}"
    )
    return noted(config, notes), reason


def export_classifier(folder: Path, out: Path, exporter, stage, architectures: dict[str, str]) -> Path:
    """Write the image-classification package of the mlx-image folder ``folder`` (see
    module; ``architectures``: the registry's, :func:`model_config`) to ``out`` (already
    checked), whole or not at all."""
    from ..io.packages import package_folder, save_graphs, write_json_files

    with stage(f"loading {folder} with mlx-image"):
        model, name, classes = load_image_folder(folder)
    size = _transform(name)[0]
    exporter = exporter.with_options(
        input_names=["pixel_values"], output_names=["logits"], path=None, dynamic={"pixel_values": {0: "batch_size"}}
    )
    example = mx.array(np.random.default_rng(0).standard_normal((2, 3, size, size)).astype(np.float32))
    with stage(f"tracing {name} and translating it"):
        graph = exporter.to_ir(classify(model), example)
    with stage(f"checking and writing {out}"), package_folder(out, folder) as package:
        dtypes = save_graphs(package, {"onnx/model.onnx": graph}, exporter.check)
        write_json_files(
            package,
            {
                "config.json": model_config(name, classes, architectures)[0],
                "preprocessor_config.json": preprocessor_config(name),
            },
            dtypes,
        )
    return out


def check_classifier(package: Path, folder: Path, seed: int = 0, atol=None, rtol=None) -> dict:
    """The package's logits for random ``pixel_values`` (a batch of 2, a plain onnxruntime
    session) against the mlx-image model's on the same values."""
    from ..io.graph_files import graph_path
    from ..verify.plain import plain_session, reference

    model, name, _ = load_image_folder(folder)
    plain = plain_session(graph_path(package, "onnx/model.onnx"), atol, rtol)
    size = _transform(name)[0]
    pixels = np.random.default_rng(seed).standard_normal((2, 3, size, size)).astype(np.float32)
    got = plain.session.run(["logits"], {"pixel_values": pixels})[0]
    want, held = reference(classify(model)(mx.array(pixels)))
    rows = []
    for row, (row_got, row_want) in enumerate(zip(got, want)):
        error, bound = plain.compare(row_got, row_want, held)
        rows.append(
            {
                "input": f"random pixel_values {row}",
                "max_abs_error": error,
                "tolerance": bound,
                "detail": f"top-1 {int(row_got.argmax())} (MLX {int(row_want.argmax())}), logits",
                "passed": error <= bound and int(row_got.argmax()) == int(row_want.argmax()),
            }
        )
    return plain.result("image-classification", package, folder, rows, model=name)
