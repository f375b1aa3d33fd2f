"""The registry of folder kinds (mlx2onnx/tasks/kinds.py, registered in
mlx2onnx/tasks/__init__.py): a folder of every architecture it names, written as the MLX
package writes it, is recognised by exactly the kind of that package, and by no other; the
registration is the only place an architecture is named; the registry refuses a second kind
of a name and a second fallback."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mlx2onnx.tasks import kinds
from tests.support import zoo


def _vlm_module(model_type: str) -> str:
    """mlx-vlm's own module for a model_type (its MODEL_REMAPPING: Bunny's checkpoints)."""
    from mlx_vlm.utils import MODEL_REMAPPING

    return MODEL_REMAPPING.get(model_type, model_type)


# kind -> (where, model_type) -> a folder of that architecture as the kind's MLX package writes it
FIXTURES = {
    "mlx-lm": lambda where, model_type: zoo.write_model_folder(where, "llama"),
    "mlx-embeddings": lambda where, model_type: zoo.write_embedding_folder(where, model_type.replace("-", "_")),
    "mlx-embeddings siglip": lambda where, model_type: zoo.write_siglip_folder(where),
    "mlx-vlm dinov2": lambda where, model_type: zoo.write_dinov2_folder(
        where, registers={"dinov2": 0, "dinov2_with_registers": 4}[model_type]
    ),
    "mlx-image": lambda where, model_type: zoo.write_image_folder(where, "resnet18"),
    "mlx-whisper": lambda where, model_type: zoo.write_whisper_folder(where),
    "mlx-audio whisper": lambda where, model_type: zoo.write_mlx_audio_whisper_folder(where),
    "mlx-audio moonshine": lambda where, model_type: zoo.write_moonshine_folder(where),
    "mlx-vlm": lambda where, model_type: zoo.write_vlm_folder(where, _vlm_module(model_type), model_type=model_type),
}
PACKAGES = {  # kind -> the module its folders need
    "mlx-image": "mlxim.model",
    "mlx-whisper": "mlx_whisper",
    "mlx-audio whisper": "mlx_audio",
    "mlx-audio moonshine": "mlx_audio",
    "mlx-vlm": "mlx_vlm",
    "mlx-embeddings": "mlx_embeddings",
    "mlx-embeddings siglip": "mlx_embeddings",
    "mlx-vlm dinov2": "mlx_vlm",
    "mlx-lm": "mlx_lm",
}
# each keyed kind's every architecture (the registry's own list), an unkeyed kind's folder
CASES = [
    (k.name, model_type)
    for k in kinds.kinds()
    for model_type in (k.architectures if k.keyed else [next(iter(k.architectures), "")])
]


@pytest.mark.slow
@pytest.mark.third_party
@pytest.mark.parametrize("name,model_type", CASES)
def test_each_architecture_s_folder_is_recognised_by_its_kind_alone(tmp_path, name, model_type):
    """A folder of each architecture the registry names, written as its MLX package writes
    it, is recognised by its kind and no other, and the kind gives it that architecture's
    spec: an architecture without a fixture, or a fixture two kinds (or none) recognise,
    fails here."""
    pytest.importorskip(PACKAGES[name])
    folder = FIXTURES[name](tmp_path / "folder", model_type)
    found = [k.name for k in kinds.recognising(folder)]
    assert found == ([] if name == "mlx-lm" else [name])  # mlx-lm's folders are the fallback's
    kind = kinds.recognise(folder)
    assert kind.name == name and kinds.is_model_folder(folder)
    if kind.keyed:
        config = kinds.folder_config(folder)
        assert config["model_type"] == model_type and kind.architecture(config) is kind.architectures[model_type]


def test_every_kind_has_a_fixture():
    assert {k.name for k in kinds.kinds()} == set(FIXTURES) == set(PACKAGES)


def _named_in(path: Path, names: set[str]) -> list[str]:
    """Where ``path`` keeps a table of architectures (a literal holding two of ``names``)
    or compares a model_type with one."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            held = [
                e.value
                for e in (node.keys if isinstance(node, ast.Dict) else node.elts)
                if isinstance(e, ast.Constant) and str(e.value).replace("-", "_") in names
            ]
            if len(held) > 1:
                found.append(f"{path}:{node.lineno}: a table of {held}")
        if isinstance(node, ast.Compare) and "model_type" in ast.unparse(node):
            for e in [node.left, *node.comparators]:
                if isinstance(e, ast.Constant) and str(e.value).replace("-", "_") in names:
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_registry_is_the_only_place_an_architecture_is_named(tmp_path):
    """The kinds' modules (mlx2onnx/tasks) keep no table of model types and compare no
    model_type with one: the registration (mlx2onnx/tasks/__init__.py) names them all.
    (mlx-lm's architectures, the fallback kind's, are mlx2onnx/llm's.)"""
    import mlx2onnx.tasks

    names = {name.replace("-", "_") for k in kinds.kinds() for name in k.architectures}
    assert {"qwen2_5_vl", "bert", "dinov2", "whisper", "resnet"} <= names
    here = Path(mlx2onnx.tasks.__file__).parent
    found = [f for path in sorted(here.glob("*.py")) if path.name != "__init__.py" for f in _named_in(path, names)]
    assert not found, found
    sample = tmp_path / "sample.py"  # the scan finds a table and a comparison where there is one
    sample.write_text('TYPES = {"qwen2_vl": 1, "qwen2-5-vl": 2}\nok = config["model_type"] == "bert"\n')
    assert len(_named_in(sample, names)) == 2


def test_the_registry_refuses_a_second_kind_of_a_name_and_a_second_fallback():
    first = kinds.kinds()[0]
    with pytest.raises(ValueError, match="registered already"):
        kinds.register(first)
    with pytest.raises(ValueError, match="is the fallback kind already"):
        kinds.register(
            kinds.FolderKind(
                "another", "text-generation", first.export, first.check, recognises=lambda folder, config: True
            ),
            fallback=True,
        )
    assert "another" not in {k.name for k in kinds.kinds()}
