"""mlx-vlm folders -> transformers.js image-text-to-text packages.

A gemma3 folder is written by mlx-vlm's own save functions (tiny text and SigLIP vision
configs, a tokenizer trained here with Gemma 3's image tokens, a chat template), exported
with ``mlx2onnx export``, checked with ``mlx2onnx check`` and run by transformers.js under
Node (its Gemma3 processor expands the image tokens and preprocesses the PNG; its model
runs the three graphs and merges the image features), and by onnxruntime-genai's gemma3
type (its own processor on the PNG, its embedding model merging inside the graph): the
greedy tokens of both are mlx-vlm's generation on the same ids and pixels (float32, 4-bit
and bfloat16 folders).
"""

from __future__ import annotations

import json

import mlx.core as mx
import numpy as np
import onnx
import pytest

import zoo
from test_cli import cli
from test_packages import _node_available

VARIANTS = {"float32": {}, "4-bit": {"bits": 4}, "bfloat16": {"dtype": mx.bfloat16}}
GRAPHS = ("vision_encoder", "embed_tokens", "decoder_model_merged")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gemma3_folder_generates_mlx_vlm_tokens_in_transformers_js(tmp_path, variant):
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens

    folder = zoo.write_vlm_folder(tmp_path / "folder", **VARIANTS[variant])
    package = tmp_path / "package"
    cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    for graph in GRAPHS:
        onnx.checker.check_model(onnx.load(str(package / "onnx" / f"{graph}.onnx")), full_check=True)
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    result = json.loads(checked.stdout)
    assert checked.returncode == 0 and result["passed"], checked.stdout + checked.stderr
    if variant == "4-bit":
        ops = {n.op_type for n in onnx.load(str(package / "onnx" / "decoder_model_merged.onnx")).graph.node}
        assert "MatMulNBits" in ops, ops
    if not _node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")
    image = zoo.generated_image(64, seed=4)
    Image.fromarray(image).save(tmp_path / "image.png")
    heard = json.loads(zoo._node("transformers_vlm.mjs", str(package), str(tmp_path / "image.png"), "12",
                                 "<start_of_image> a small tokenizer")[-1])
    model = load_model(folder)
    assert heard["ids"].count(model.config.image_token_index) == model.config.text_config.mm_tokens_per_image
    pixels = (image.astype(np.float32) / 255 - 0.5) / 0.5  # the SigLIP input the package's processor config asks for
    want = mlx_vlm_tokens(model, mx.array([heard["ids"]]), mx.array(pixels.transpose(2, 0, 1)[None]), 12)
    assert len(set(want)) > 1  # greedy tokens that tell a wrong logit from a right one
    assert heard["tokens"] == want


def test_vlm_folder_kinds(tmp_path):
    """A gemma3 folder without its vision tower's weights (as mlx-lm writes a VLM's text
    model) stays a text-generation folder; one without a chat template is exported with
    transformers.js declared unable (its Gemma3 processor loads the template)."""
    pytest.importorskip("mlx_vlm.utils")
    from mlx2onnx.tasks import folder_task

    folder = zoo.write_vlm_folder(tmp_path / "folder")
    assert folder_task(folder) == "image-text-to-text"
    (folder / "chat_template.jinja").unlink()
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    notes = json.loads((tmp_path / "package" / "config.json").read_text())["mlx2onnx"]
    assert "chat_template.jinja" in notes["transformers.js"]
    weights = mx.load(str(folder / "model.safetensors"))
    mx.save_safetensors(str(folder / "model.safetensors"),
                        {k: v for k, v in weights.items() if not k.startswith("vision_tower.")})
    assert folder_task(folder) == "text-generation"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_gemma3_folder_generates_mlx_vlm_tokens_in_onnxruntime_genai(tmp_path, variant):
    from PIL import Image

    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("mlx_vlm.utils")
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens

    folder = zoo.write_vlm_folder(tmp_path / "folder", **VARIANTS[variant])
    package = tmp_path / "package"
    cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    onnx.checker.check_model(onnx.load(str(package / "onnx" / "embedding.onnx")), full_check=True)
    assert "onnxruntime-genai" not in json.loads((package / "config.json").read_text())["mlx2onnx"]
    image = zoo.generated_image(64, seed=4)
    Image.fromarray(image).save(tmp_path / "image.png")
    ids, got = zoo.genai_vlm_tokens(package, tmp_path / "image.png", "<start_of_image> a small tokenizer", 12)
    pixels = (image.astype(np.float32) / 255 - 0.5) / 0.5
    want = mlx_vlm_tokens(load_model(folder), mx.array([ids]), mx.array(pixels.transpose(2, 0, 1)[None]), 12)
    assert len(set(want)) > 1
    assert got == want
