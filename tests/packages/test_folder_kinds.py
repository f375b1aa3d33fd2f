"""The registry of folder kinds (mlx2onnx/tasks/kinds.py): every folder the tests write as
an MLX package writes it is recognised by exactly the kind of that package, and by no
other; the registry refuses a second kind of a name and a second fallback."""

from __future__ import annotations

import pytest

from mlx2onnx.tasks import kinds
from tests.support import zoo

WRITERS = {
    "mlx-lm": lambda where: zoo.write_model_folder(where, "llama"),
    "mlx-embeddings": lambda where: zoo.write_embedding_folder(where, "bert"),
    "mlx-embeddings siglip": lambda where: zoo.write_siglip_folder(where),
    "mlx-vlm dinov2": lambda where: zoo.write_dinov2_folder(where),
    "mlx-image": lambda where: zoo.write_image_folder(where, "resnet18"),
    "mlx-whisper": lambda where: zoo.write_whisper_folder(where),
    "mlx-audio whisper": lambda where: zoo.write_mlx_audio_whisper_folder(where),
    "mlx-audio moonshine": lambda where: zoo.write_moonshine_folder(where),
    "mlx-vlm": lambda where: zoo.write_vlm_folder(where, "gemma3"),
}


@pytest.mark.slow
@pytest.mark.third_party
@pytest.mark.parametrize("name", sorted(WRITERS))
def test_each_packages_folder_is_recognised_by_its_kind_alone(tmp_path, name):
    pytest.importorskip(
        {
            "mlx-image": "mlxim.model",
            "mlx-whisper": "mlx_whisper",
            "mlx-audio whisper": "mlx_audio",
            "mlx-audio moonshine": "mlx_audio",
            "mlx-vlm": "mlx_vlm",
            "mlx-embeddings": "mlx_embeddings",
            "mlx-embeddings siglip": "mlx_embeddings",
            "mlx-vlm dinov2": "mlx_vlm",
            "mlx-lm": "mlx_lm",
        }[name]
    )
    folder = WRITERS[name](tmp_path / "folder")
    found = [k.name for k in kinds.recognising(folder)]
    assert found == ([] if name == "mlx-lm" else [name])  # mlx-lm's folders are the fallback's
    assert kinds.recognise(folder).name == name and kinds.is_model_folder(folder)


def test_every_kind_has_a_folder_in_this_test():
    assert {k.name for k in kinds.kinds()} == set(WRITERS)


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
