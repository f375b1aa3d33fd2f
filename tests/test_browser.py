"""Text-generation packages in a real browser, opened as a web page's user opens them:
transformers.js's browser build with its defaults (no dtype, no device: wasm, whose default
dtype would be q8 without the package's config) and with WebGPU (SwiftShader), through
``AutoModelForCausalLM`` and ``pipeline("text-generation")``, against mlx-lm's greedy
tokens (tests/browser.py)."""

from __future__ import annotations

import json

import pytest

import zoo
from browser import run_page
from mlx2onnx.targets import load_model_folder

NEW_TOKENS = 12

GENERATE = """
const { AutoTokenizer, AutoModelForCausalLM, pipeline } = transformers;
const texts = %s, options = %s, count = %d;
const tokenizer = await AutoTokenizer.from_pretrained("pkg");
const model = await AutoModelForCausalLM.from_pretrained("pkg", options);
const rows = [];
for (const text of texts) {
  const inputs = tokenizer(text);
  const ids = Array.from(inputs.input_ids.data, Number);
  const out = await model.generate({ ...inputs, max_new_tokens: count, do_sample: false });
  const tokens = Array.from(out.data, Number).slice(ids.length);
  rows.push({ ids, tokens, text: tokenizer.decode([...ids, ...tokens], { skip_special_tokens: true }) });
}
const generator = await pipeline("text-generation", "pkg", options);
const piped = await generator(texts[0], { max_new_tokens: count, do_sample: false });
return { rows, pipeline: piped[0].generated_text };
"""


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    from mlx2onnx.tasks import export_folder

    root = tmp_path_factory.mktemp("browser")
    made = {}
    for name, bits in (("float32", None), ("4-bit", 4)):
        folder = zoo.write_model_folder(root / f"{name}-folder", "llama", bits=bits, group_size=32)
        made[name] = (folder, export_folder(folder, root / f"{name}-package"))
    return made


@pytest.mark.parametrize("device", ["defaults", "webgpu"])
@pytest.mark.parametrize("weights", ["float32", "4-bit"])
def test_text_generation_in_chromium_gives_mlx_tokens(packages, weights, device):
    folder, package = packages[weights]
    config = json.loads((package / "config.json").read_text())
    named = {"float32": "fp32", "4-bit": "q4"}[weights]  # what lets the defaults find model.onnx, model_q4.onnx
    assert config["transformers.js_config"]["dtype"] == {"model": named}
    options = {} if device == "defaults" else {"device": "webgpu"}
    texts = zoo.PACKAGE_TEXTS[:2]
    found = run_page(GENERATE % (json.dumps(texts), json.dumps(options), NEW_TOKENS), {"pkg": package},
                     webgpu=device == "webgpu")
    model = load_model_folder(str(folder)).fun
    for row in found["rows"]:
        expected = zoo.mlx_tokens(model, folder, row["ids"], NEW_TOKENS)
        assert row["tokens"] == expected, f"{row['text']!r}: tokens {row['tokens']}, mlx-lm {expected}"
    assert found["pipeline"] == found["rows"][0]["text"]


# -- the other tasks' packages, through their pipelines with no options ------------------------
PIPELINE = """
const { pipeline, Tensor } = transformers;
const run = await pipeline(%s, "pkg", %s);
let input = %s;
if (typeof input === "string" && input.endsWith(".f32")) input = new Float32Array(await (await fetch(input)).arrayBuffer());
const out = await run(input, %s);
return out instanceof Tensor ? { dims: out.dims, data: Array.from(out.data) } : out;
"""

DEVICES = ["defaults", "webgpu"]
SPOKEN = 24  # tokens of the transcription compared (SwiftShader's WebGPU takes about 0.5 s a token)


def _pipeline(task, package, device, inputs, call_options, extra=None):
    options = {} if device == "defaults" else {"device": "webgpu"}
    script = PIPELINE % (json.dumps(task), json.dumps(options), json.dumps(inputs), json.dumps(call_options))
    return run_page(script, {"pkg": package, **(extra or {})}, webgpu=device == "webgpu")


@pytest.mark.parametrize("device", DEVICES)
def test_feature_extraction_in_chromium_gives_mlx_embeddings(tmp_path, device):
    import numpy as np

    pytest.importorskip("mlx_embeddings.utils")
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_embedding_folder(tmp_path / "folder", "bert")
    package = export_folder(folder, tmp_path / "package")
    got = _pipeline("feature-extraction", package, device, zoo.EMBEDDING_TEXTS, {"pooling": "mean", "normalize": True})
    got = np.array(got["data"], np.float32).reshape(got["dims"])
    np.testing.assert_allclose(got, zoo.mlx_embeddings(folder, zoo.EMBEDDING_TEXTS), atol=2e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_image_classification_in_chromium_gives_mlx_probabilities(tmp_path, device):
    import numpy as np
    from PIL import Image

    pytest.importorskip("mlxim.model")
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_image_folder(tmp_path / "resnet18-mlxim", "resnet18")
    package = export_folder(folder, tmp_path / "package")
    processor = json.loads((package / "preprocessor_config.json").read_text())
    image = zoo.generated_image(processor["size"]["height"], seed=3)
    (tmp_path / "images").mkdir()
    Image.fromarray(image).save(tmp_path / "images" / "image.png")
    got = _pipeline("image-classification", package, device, "/models/images/image.png", {"top_k": 10},
                    {"images": tmp_path / "images"})
    want = zoo.mlx_class_probabilities(folder, "resnet18", image, processor["crop_size"]["height"])
    scores = {row["label"]: row["score"] for row in got}
    np.testing.assert_allclose([scores[f"LABEL_{i}"] for i in range(10)], want, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_speech_recognition_in_chromium_gives_mlx_whispers_text(tmp_path, device):
    pytest.importorskip("mlx_whisper.decoding")
    from mlx2onnx.tasks import export_folder
    from mlx2onnx.tasks.whisper import MLX_WHISPER as source

    folder = zoo.write_whisper_folder(tmp_path / "folder")
    package = export_folder(folder, tmp_path / "package")
    audio = zoo.speech_clip(seed=7)
    (tmp_path / "audio").mkdir()
    audio.astype("float32").tofile(tmp_path / "audio" / "clip.f32")
    model = source.load(folder)
    tokens = source.transcription(model, source.features(audio, model.dims.n_mels))[:SPOKEN]
    assert len(set(tokens)) > 2  # a transcription that tells a wrong token from a right one
    heard = _pipeline("automatic-speech-recognition", package, device, "/models/audio/clip.f32",
                      {"max_new_tokens": SPOKEN}, {"audio": tmp_path / "audio"})
    assert heard["text"].strip() == source.tokenizer(model).decode(tokens).strip()


VLM = """
const { AutoProcessor, AutoModelForImageTextToText, RawImage } = transformers;
const processor = await AutoProcessor.from_pretrained("pkg");
const model = await AutoModelForImageTextToText.from_pretrained("pkg", %s);
const inputs = await processor(%s, await RawImage.fromURL("/models/images/image.png"));
const ids = Array.from(inputs.input_ids.data, Number);
const out = await model.generate({ ...inputs, max_new_tokens: %d, do_sample: false });
return { ids, tokens: Array.from(out.data, Number).slice(ids.length) };
"""


@pytest.mark.parametrize("device", DEVICES)
def test_image_text_to_text_in_chromium_gives_mlx_vlm_tokens(tmp_path, device):
    import mlx.core as mx
    from PIL import Image

    pytest.importorskip("mlx_vlm.utils")
    from mlx_vlm.utils import load_model

    from mlx2onnx.tasks import export_folder
    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens

    folder = zoo.write_vlm_folder(tmp_path / "folder", "gemma3")
    package = export_folder(folder, tmp_path / "package")
    image = zoo.generated_image(json.loads((folder / "config.json").read_text())["vision_config"]["image_size"], seed=4)
    (tmp_path / "images").mkdir()
    Image.fromarray(image).save(tmp_path / "images" / "image.png")
    options = {} if device == "defaults" else {"device": "webgpu"}
    heard = run_page(VLM % (json.dumps(options), json.dumps(zoo.VLM_PROMPTS["gemma3"]), NEW_TOKENS),
                     {"pkg": package, "images": tmp_path / "images"}, webgpu=device == "webgpu")
    want = mlx_vlm_tokens(load_model(folder), mx.array([heard["ids"]]), zoo.vlm_pixels("gemma3", image), NEW_TOKENS)[0]
    assert len(set(want)) > 1 and heard["tokens"] == want


# -- a plain export in onnxruntime-web, as a page imports it -----------------------------------
ORT_RUN = """
const session = await ort.InferenceSession.create("/models/plain/model.onnx", %s);
const feeds = {};
const arrays = { float32: Float32Array, int32: Int32Array };
for (const [name, { type, dims, data }] of Object.entries(%s)) feeds[name] = new ort.Tensor(type, arrays[type].from(data), dims);
const out = await session.run(feeds);
return Object.fromEntries(Object.entries(out).map(([name, t]) => [name, { dims: t.dims, data: Array.from(t.data) }]));
"""


@pytest.mark.parametrize("device", ["wasm", "webgpu"])
def test_a_plain_export_runs_in_onnxruntime_web_in_chromium(tmp_path, device):
    """The bundled llama reference model exported with default options, run by
    onnxruntime-web in the page (no options but the execution provider) on fresh random
    inputs: MLX's outputs at the default float32 tolerance."""
    import mlx.core as mx
    import numpy as np

    import mlx2onnx
    from browser import ORT_PRELUDE
    from mlx2onnx.models import REFERENCE_MODELS

    model, args, kwargs = REFERENCE_MODELS["llama"](seed=0)
    (tmp_path / "plain").mkdir()
    exported = mlx2onnx.Exporter(path=tmp_path / "plain" / "model.onnx").export(model, *args, **kwargs)
    ids = np.random.default_rng(5).integers(0, 128, args[0].shape).astype(np.int32)
    want = np.array(model(mx.array(ids)))
    options = {"executionProviders": [device]}
    feeds = {exported.graph.input[0].name: {"type": "int32", "dims": list(ids.shape), "data": ids.ravel().tolist()}}
    got = run_page(ORT_RUN % (json.dumps(options), json.dumps(feeds)), {"plain": tmp_path / "plain"},
                   webgpu=device == "webgpu", prelude=ORT_PRELUDE)["output_0"]
    np.testing.assert_allclose(np.array(got["data"], np.float32).reshape(got["dims"]), want, atol=1e-4, rtol=1e-4)
