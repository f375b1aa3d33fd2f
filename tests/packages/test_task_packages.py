"""Model folders of other tasks -> the packages transformers.js's pipelines load.

Each folder is written as its MLX package writes it (mlx-embeddings' save functions and a
locally trained tokenizer; mlx-image's save_weights), exported with ``mlx2onnx export
FOLDER -o PACKAGE``, checked with ``mlx2onnx check PACKAGE FOLDER`` and run through
transformers.js's own ``pipeline(...)`` under Node (onnxruntime-node, default settings),
whose result is compared with the MLX package's on the same input: mlx-embeddings'
pooled, normalised ``text_embeds`` of the same texts, and mlx-image's class
probabilities of the same image (preprocessed as mlxim's evaluation transform does).
"""

from __future__ import annotations

import json

import mlx.core as mx
import mlx.nn as nn
import numpy as np
import onnx
import pytest
from mlx.utils import tree_flatten

from mlx2onnx.io.graph_files import graph_path
from tests.support import zoo
from tests.support.commands import cli

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

EMBEDDINGS = ["bert", "xlm_roberta", "modernbert"]
CLASSIFIERS = ["resnet18", "mobilenet_v2", "resnet18-bfloat16"]  # the last: weights saved in bfloat16


def _needs_node():
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm ci --ignore-scripts")


def _exported(tmp_path, folder, *more):
    """The package of ``folder`` (its graph onnx/model.onnx and the files ``more``), checked
    as users meet it: full onnx check, transformers.js_config naming each file, the card,
    and ``mlx2onnx check``'s result."""
    package = tmp_path / "package"
    out = cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    dtypes = json.loads((package / "config.json").read_text())["transformers.js_config"]["dtype"]
    graphs = []
    for name in ("onnx/model.onnx", *more):
        graph, stem = graph_path(package, name), name[len("onnx/") : -len(".onnx")]
        onnx.checker.check_model(onnx.load(str(graph)), full_check=True)
        named = graph.stem[len(stem) + 1 :] or "fp32"
        assert dtypes[stem] == {"quantized": "q8"}.get(named, named)  # transformers.js's defaults find the file
        graphs.append(graph)
    assert dtypes.keys() == {name[len("onnx/") : -len(".onnx")] for name in ("onnx/model.onnx", *more)}
    assert sorted(p.name for p in (package / "onnx").glob("*.onnx")) == sorted(g.name for g in graphs)
    graph = graphs[0]
    card = (package / "README.md").read_text()  # the model card a hub shows
    assert (
        f"base_model: {folder.name}" in card
        and f"pipeline_tag: {json.loads((package / 'config.json').read_text())['mlx2onnx']['task']}" in card
    )
    assert f"`onnx/{graph.name}` | {dtypes['model']} |" in card
    checked = cli("check", package, folder, "--json", cwd=tmp_path)
    result = json.loads(checked.stdout)
    assert checked.returncode == 0 and result["passed"], checked.stdout + checked.stderr
    return package, out, result


@pytest.mark.node
@pytest.mark.parametrize("name", EMBEDDINGS)
def test_embeddings_folder_runs_in_transformers_js_feature_extraction(tmp_path, name):
    pytest.importorskip("mlx_embeddings.utils")
    folder = zoo.write_embedding_folder(tmp_path / "folder", name)
    package, out, result = _exported(tmp_path, folder)
    assert "onnx/model.onnx" in out.stdout and "tokenizer.json" in out.stdout
    assert result["pooling"] == "mean" and len(result["rows"]) == 3
    _needs_node()
    texts = zoo.EMBEDDING_TEXTS
    got = zoo.transformers_js_pipeline("feature-extraction", package, {"pooling": "mean", "normalize": True}, texts)
    got = np.array(got["data"], np.float32).reshape(got["dims"])
    want = zoo.mlx_embeddings(folder, texts)
    assert got.shape == want.shape == (len(texts), 32)
    np.testing.assert_allclose(got, want, atol=2e-5)
    # a wrong pooling is seen: the first token's vector is another embedding
    first = zoo.transformers_js_pipeline("feature-extraction", package, {"pooling": "cls", "normalize": True}, texts)
    assert np.abs(np.array(first["data"]).reshape(first["dims"]) - want).max() > 1e-2


# the pipeline pooling each decoder embedding's package records (None: AutoModel's
# sentence_embedding, EmbeddingGemma's dense layers after the mean being no pooling of the pipeline)
DECODER_POOLING = {"qwen3": "last_token", "llama_bidirec": "mean", "lfm2": "none", "gemma3_text": None}
DECODER_VARIANTS = [*zoo.DECODER_EMBEDDINGS, "qwen3-4-bit", "gemma3_text-bfloat16"]


@pytest.mark.node
@pytest.mark.parametrize("variant", DECODER_VARIANTS)
def test_decoder_embedding_folders_run_in_transformers_js(tmp_path, variant):
    """Qwen3-Embedding (last token), EmbeddingGemma (mean and dense layers), Llama
    bidirectional (as transformers.js's llama) and LFM2's one vector a token: the
    embeddings transformers.js gives equal mlx-embeddings' of texts of several lengths."""
    pytest.importorskip("mlx_embeddings.utils")
    name, _, kind = variant.partition("-")
    options = {"4-bit": {"bits": 4}, "bfloat16": {"dtype": mx.bfloat16}}.get(kind, {})
    folder = zoo.write_embedding_folder(tmp_path / "folder", name, **options)
    package, out, result = _exported(tmp_path, folder)
    config = json.loads((package / "config.json").read_text())
    assert result["pooling"] == config["mlx2onnx"]["pooling"] == DECODER_POOLING[name]
    assert config["model_type"] == {"llama_bidirec": "llama"}.get(name, name)  # a type transformers.js has
    if name == "lfm2":  # read by transformers.js; derived from full_attn_idxs where the folder lacks it
        assert config["layer_types"] == ["conv", "full_attention", "conv"]
    outputs = [o.name for o in onnx.load(str(graph_path(package, "onnx/model.onnx"))).graph.output]
    assert outputs == (["token_embeddings"] if name == "lfm2" else ["last_hidden_state", "sentence_embedding"])
    _needs_node()
    texts = zoo.EMBEDDING_TEXTS
    want = zoo.mlx_embeddings(folder, texts)
    got = zoo.transformers_js_embeddings(package, texts)
    assert got.shape == want.shape and not np.isnan(want).any()
    np.testing.assert_allclose(got, want, atol=2e-5 if not kind else 1e-2)
    if "sentence_embedding" in outputs and DECODER_POOLING[name] is not None:
        got = zoo.transformers_js_model(package, "sentence_embedding", texts)
        np.testing.assert_allclose(np.array(got["data"]).reshape(got["dims"]), want, atol=2e-5 if not kind else 1e-2)
    if name == "qwen3":  # the package's tokenizer pads on the left: on the right, the last token is a pad
        tokenizer = json.loads((package / "tokenizer_config.json").read_text())
        assert tokenizer["padding_side"] == "left"
        (package / "tokenizer_config.json").write_text(json.dumps(dict(tokenizer, padding_side="right")))
        assert np.abs(zoo.transformers_js_embeddings(package, texts) - want).max() > 1e-2
    if name == "gemma3_text":  # the pipeline's mean of the states is not EmbeddingGemma's embedding
        mean = zoo.transformers_js_pipeline(
            "feature-extraction", package, {"pooling": "mean", "normalize": True}, texts
        )
        assert np.abs(np.array(mean["data"]).reshape(mean["dims"]) - want).max() > 1e-2


def test_a_decoder_embedding_folder_is_told_from_a_language_model_by_its_sentence_files(tmp_path):
    """qwen3, gemma3_text and lfm2 are also mlx-lm model types: without the
    sentence-transformers files a folder of one is a text-generation folder."""
    pytest.importorskip("mlx_embeddings.utils")
    from mlx2onnx.tasks import folder_task

    for name in zoo.DECODER_EMBEDDINGS:
        folder = zoo.write_embedding_folder(tmp_path / name, name)
        assert folder_task(folder) == "feature-extraction"
        for path in zoo.SENTENCE_FILES:
            (folder / path).unlink()
        assert folder_task(folder) == ("feature-extraction" if name == "llama_bidirec" else "text-generation")


def test_every_embedding_architecture_has_a_test_folder():
    from mlx2onnx.tasks import EMBEDDINGS

    assert {name.replace("-", "_") for name in EMBEDDINGS} == set(zoo.EMBEDDING_CONFIGS)


@pytest.mark.node
@pytest.mark.parametrize("variant", ["float32", "4-bit"])
def test_siglip_folder_runs_in_transformers_js(tmp_path, variant):
    """A SigLIP folder: transformers.js's zero-shot-image-classification pipeline gives the
    sigmoid of mlx-embeddings' logits_per_image for its hypothesis texts, its
    image-feature-extraction pipeline (pooled) get_image_features, and SiglipTextModel's
    pooler_output get_text_features."""
    pytest.importorskip("mlx_embeddings.utils")
    folder = zoo.write_siglip_folder(tmp_path / "folder", bits=4 if variant == "4-bit" else None)
    package, out, result = _exported(tmp_path, folder, "onnx/text_model.onnx", "onnx/vision_model.onnx")
    assert result["task"] == "zero-shot-image-classification" and len(result["rows"]) == 8
    if variant == "4-bit":
        model_graph = onnx.load(str(graph_path(package, "onnx/model.onnx")))
        assert "MatMulNBits" in {n.op_type for n in model_graph.graph.node}
    _needs_node()
    found = zoo.siglip_in_transformers_js(package, folder, tmp_path)
    got, want = found["zero-shot scores"]
    assert np.ptp(want) > 1e-3  # the labels score apart, so a wrong text or image shows
    for what, (got, want) in found.items():
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=what)


def test_a_siglip_image_classifier_folder_is_refused_before_anything_is_written(tmp_path):
    pytest.importorskip("mlx_embeddings.utils")
    folder = zoo.write_siglip_folder(tmp_path / "folder")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(dict(config, num_labels=3)))
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode == 2 and "image classifier (num_labels 3)" in bad.stderr, bad.stderr
    assert "zero-shot image classification" in bad.stderr and not (tmp_path / "package").exists()


@pytest.mark.node
@pytest.mark.parametrize("variant", ["float32", "4-bit", "bfloat16", "registers"])
def test_dinov2_folder_runs_in_transformers_js_image_feature_extraction(tmp_path, variant):
    """A DINOv2 folder (position embeddings interpolated from 6 x 6 to the crop's 4 x 4
    patches), and one with register tokens (``dinov2_with_registers``): transformers.js's
    image-feature-extraction pipeline gives mlx-vlm's token sequence of the processed
    image, and with {pool: true} its class token."""
    pytest.importorskip("mlx_vlm.utils")
    options = {"4-bit": {"bits": 4}, "bfloat16": {"dtype": mx.bfloat16}, "registers": {"registers": 4}}.get(variant, {})
    folder = zoo.write_dinov2_folder(tmp_path / "folder", **options)
    package, out, result = _exported(tmp_path, folder)
    assert result["task"] == "image-feature-extraction" and [r["detail"] for r in result["rows"]] == [
        "last_hidden_state",
        "pooler_output",
    ]
    if variant == "4-bit":
        assert "MatMulNBits" in {n.op_type for n in onnx.load(str(graph_path(package, "onnx/model.onnx"))).graph.node}
    _needs_node()
    found = zoo.dinov2_in_transformers_js(package, folder, tmp_path)
    for what, (got, want) in found.items():
        np.testing.assert_allclose(got, want, atol=2e-5, err_msg=what)
    want = found["token sequence"][1]
    assert np.abs(want[:, 0] - want[:, 1]).max() > 1e-2  # the class token is not a patch's


@pytest.mark.node
@pytest.mark.parametrize("variant", ["4-bit", "bfloat16"])
def test_quantized_and_bfloat16_embedding_folders(tmp_path, variant):
    pytest.importorskip("mlx_embeddings.utils")
    options = {"bits": 4} if variant == "4-bit" else {"dtype": mx.bfloat16}
    config = dict(zoo.EMBEDDING_CONFIGS["bert"], hidden_size=64, intermediate_size=128)
    saved = zoo.EMBEDDING_CONFIGS["bert"]
    zoo.EMBEDDING_CONFIGS["bert"] = config
    try:
        folder = zoo.write_embedding_folder(tmp_path / "folder", "bert", **options)
    finally:
        zoo.EMBEDDING_CONFIGS["bert"] = saved
    package, _, result = _exported(tmp_path, folder)
    graph = onnx.load(str(graph_path(package, "onnx/model.onnx")))
    ops = {n.op_type for n in graph.graph.node}
    if variant == "4-bit":
        assert graph_path(package, "onnx/model.onnx").name == "model_q4.onnx"
        assert "MatMulNBits" in ops, ops  # the packed weights, not float copies
    _needs_node()
    texts = zoo.EMBEDDING_TEXTS
    got = zoo.transformers_js_pipeline("feature-extraction", package, {"pooling": "mean", "normalize": True}, texts)
    got = np.array(got["data"], np.float32).reshape(got["dims"])
    np.testing.assert_allclose(got, zoo.mlx_embeddings(folder, texts), atol=2e-5)


@pytest.mark.node
@pytest.mark.parametrize("variant", CLASSIFIERS)
def test_image_folder_runs_in_transformers_js_image_classification(tmp_path, variant):
    from PIL import Image

    pytest.importorskip("mlxim.model")
    name, _, dtype = variant.partition("-")
    folder = zoo.write_image_folder(tmp_path / f"{name}-mlxim", name, dtype=getattr(mx, dtype) if dtype else None)
    package, out, result = _exported(tmp_path, folder)
    assert result["model"] == name
    processor = json.loads((package / "preprocessor_config.json").read_text())
    assert processor["crop_size"] == {"height": 224, "width": 224}
    _needs_node()
    image = zoo.generated_image(processor["size"]["height"], seed=3)
    Image.fromarray(image).save(tmp_path / "image.png")
    got = zoo.transformers_js_pipeline("image-classification", package, {"top_k": 10}, [tmp_path / "image.png"])[0]
    want = zoo.mlx_class_probabilities(folder, name, image, processor["crop_size"]["height"])
    scores = {row["label"]: row["score"] for row in got}
    assert [row["label"] for row in got][:3] == [f"LABEL_{i}" for i in np.argsort(-want)[:3]]
    np.testing.assert_allclose([scores[f"LABEL_{i}"] for i in range(10)], want, atol=1e-5)


@pytest.mark.slow
def test_image_folder_identification(tmp_path):
    pytest.importorskip("mlxim.model")
    from mlx2onnx.tasks import IMAGE_CLASSIFIERS
    from mlx2onnx.tasks.images import identify, model_config

    folder = zoo.write_image_folder(tmp_path / "weights", "resnet18")
    assert identify(folder) == ("resnet18", 10)
    # regnet has no transformers.js class: exported, and the package says so
    config, reason = model_config("regnet_y_400mf", 10, IMAGE_CLASSIFIERS)
    assert "no image-classification model type" in reason and "cannot run" in config["mlx2onnx"]["transformers.js"]
    (folder / "model.safetensors").rename(folder / "other.safetensors")
    mx.save_safetensors(str(folder / "model.safetensors"), {"w": mx.zeros((3, 3))})
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode != 0 and "one weights file" in bad.stderr
    (folder / "other.safetensors").unlink()
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode != 0 and "match no mlx-image model" in bad.stderr
    assert not (tmp_path / "package").exists()
    # a quantized mlx-image model (mlx-image writes and loads none): refused, saying so
    model = zoo.mlxim_classifier("resnet18")
    nn.quantize(model, 32, 4, class_predicate=lambda p, m: isinstance(m, nn.Linear) and m.weight.shape[-1] % 32 == 0)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    bad = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert bad.returncode == 2 and "quantized layers" in bad.stderr and "float weights" in bad.stderr, bad.stderr
    assert not (tmp_path / "package").exists()


@pytest.mark.slow
def test_task_package_errors(tmp_path):
    pytest.importorskip("mlx_embeddings.utils")
    folder = zoo.write_embedding_folder(tmp_path / "folder", "bert")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    bad = cli("export", folder, "-o", tmp_path / "taken", cwd=tmp_path)
    assert bad.returncode != 0 and "already exists" in bad.stderr
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["notes.txt"]
    package, _, _ = _exported(tmp_path, folder)
    other = zoo.write_model_folder(tmp_path / "lm", "llama")
    bad = cli("check", package, other, cwd=tmp_path)
    assert bad.returncode != 0 and "feature-extraction package but" in bad.stderr
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(
        json.dumps(dict(config, architectures=["ModernBertForMaskedLM"], model_type="modernbert"))
    )
    bad = cli("export", folder, "-o", tmp_path / "p2", cwd=tmp_path)
    assert bad.returncode != 0 and "no pooled embedding" in bad.stderr and not (tmp_path / "p2").exists()


def test_python_entry_points_serve_every_task(tmp_path):
    """mlx2onnx.tasks.export_folder and check_folder_package: a text-generation folder
    through them as through the command line."""
    from mlx2onnx.tasks import check_folder_package, export_folder, package_task

    folder = zoo.write_model_folder(tmp_path / "folder", "llama")
    package = export_folder(folder, tmp_path / "package")
    assert package_task(package) == "text-generation"
    result = check_folder_package(package, folder)
    assert result["passed"] and len(result["rows"]) == 2
