"""Packages in a real browser, opened as a web page's user opens them: transformers.js's
browser build with its defaults (no dtype, no device: wasm, whose default dtype would be q8
without the package's config) and with WebGPU (SwiftShader), through the runtime's own
pipelines and models, against the MLX packages' results (tests/support/browser.py); and a plain
export in onnxruntime-web. Each kind is measured by a ``measure_*`` function, which
scripts/generate_docs.py also runs for docs/runtimes.md's browser table."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from mlx2onnx.targets import load_model_folder
from tests.support import zoo
from tests.support.browser import run_page

pytestmark = pytest.mark.browser

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


@dataclass
class Measured:
    """One kind of package on one device: ``summary`` (what the docs' table says), ``ok``
    (it gave the MLX package's result), ``detail`` (the numbers, for a failing test)."""

    summary: str
    ok: bool
    detail: str = ""


def _options(device: str) -> dict:
    return {} if device == "defaults" else {"device": "webgpu"}


def _close(name: str, got: np.ndarray, want: np.ndarray, atol: float) -> Measured:
    error = float(np.abs(np.asarray(got, np.float64) - want).max())
    return Measured(f"{name}, max abs {error:.1e}", error <= atol, f"max abs {error} > {atol}")


def _pipeline(task, package, device, inputs, call_options, extra=None):
    script = PIPELINE % (json.dumps(task), json.dumps(_options(device)), json.dumps(inputs), json.dumps(call_options))
    return run_page(script, {"pkg": package, **(extra or {})}, webgpu=device == "webgpu")


def measure_text_generation(root: Path, device: str, bits: int | None) -> Measured:
    """A tiny mlx-lm llama (float32 or ``bits``-bit, group 32): AutoModelForCausalLM's greedy
    tokens for two prompts and the text-generation pipeline's text, against mlx-lm's."""
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_model_folder(root / "folder", "llama", bits=bits, group_size=32)
    package = export_folder(folder, root / "package")
    named = json.loads((package / "config.json").read_text())["transformers.js_config"]["dtype"]
    texts = zoo.PACKAGE_TEXTS[:2]
    found = run_page(
        GENERATE % (json.dumps(texts), json.dumps(_options(device)), NEW_TOKENS),
        {"pkg": package},
        webgpu=device == "webgpu",
    )
    model = load_model_folder(str(folder)).fun
    wrong = [
        f"{row['text']!r}: tokens {row['tokens']}, mlx-lm {want}"
        for row in found["rows"]
        if row["tokens"] != (want := zoo.mlx_tokens(model, folder, row["ids"], NEW_TOKENS))
    ]
    ok = not wrong and found["pipeline"] == found["rows"][0]["text"] and named == {"model": "q4" if bits else "fp32"}
    return Measured("mlx-lm's tokens" if ok else "other tokens", ok, "; ".join(wrong) + f" (dtype {named})")


def measure_feature_extraction(root: Path, device: str, name: str = "bert") -> Measured:
    """A tiny mlx-embeddings ``name`` (bert; qwen3, a Qwen3-Embedding: last-token pooling
    over the package's left-padding tokenizer): the feature-extraction pipeline with the
    pooling the package records, normalised, against mlx-embeddings' text_embeds."""
    from mlx2onnx.io.notes import read_notes
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_embedding_folder(root / "folder", name)
    package = export_folder(folder, root / "package")
    options = {"pooling": read_notes(package).pooling, "normalize": True}
    got = _pipeline("feature-extraction", package, device, zoo.EMBEDDING_TEXTS, options)
    got = np.array(got["data"], np.float32).reshape(got["dims"])
    return _close("mlx-embeddings' text_embeds", got, zoo.mlx_embeddings(folder, zoo.EMBEDDING_TEXTS), 2e-5)


def measure_zero_shot(root: Path, device: str) -> Measured:
    """A tiny mlx-embeddings SigLIP: the zero-shot-image-classification pipeline's scores
    of a PNG for SIGLIP_LABELS against the sigmoid of mlx-embeddings' logits_per_image."""
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_siglip_folder(root / "folder")
    package = export_folder(folder, root / "package")
    (root / "images").mkdir()
    want = zoo.siglip_reference(package, folder, root / "images" / "image.png")[-1]
    got = _pipeline(
        "zero-shot-image-classification",
        package,
        device,
        "/models/images/image.png",
        zoo.SIGLIP_LABELS,  # the pipeline's second argument: the candidate labels
        {"images": root / "images"},
    )
    scores = {row["label"]: row["score"] for row in got}
    return _close("mlx-embeddings' sigmoid scores", [scores[label] for label in zoo.SIGLIP_LABELS], want, 1e-5)


def measure_image_features(root: Path, device: str) -> Measured:
    """A tiny mlx-vlm DINOv2: the image-feature-extraction pipeline's token states of a PNG
    against mlx-vlm's last_hidden_state of the processed image."""
    from mlx2onnx.tasks import export_folder

    folder = zoo.write_dinov2_folder(root / "folder")
    package = export_folder(folder, root / "package")
    (root / "images").mkdir()
    want = zoo.dinov2_states(package, folder, root / "images" / "image.png")
    got = _pipeline(
        "image-feature-extraction", package, device, "/models/images/image.png", {}, {"images": root / "images"}
    )
    return _close("mlx-vlm's token states", np.array(got["data"], np.float32).reshape(got["dims"]), want, 2e-5)


def measure_image_classification(root: Path, device: str) -> Measured:
    """mlx-image's resnet18 (10 classes): the image-classification pipeline's top 10 of a
    PNG against mlxim's probabilities."""
    from PIL import Image

    from mlx2onnx.tasks import export_folder

    folder = zoo.write_image_folder(root / "resnet18-mlxim", "resnet18")
    package = export_folder(folder, root / "package")
    processor = json.loads((package / "preprocessor_config.json").read_text())
    image = zoo.generated_image(processor["size"]["height"], seed=3)
    (root / "images").mkdir()
    Image.fromarray(image).save(root / "images" / "image.png")
    got = _pipeline(
        "image-classification", package, device, "/models/images/image.png", {"top_k": 10}, {"images": root / "images"}
    )
    want = zoo.mlx_class_probabilities(folder, "resnet18", image, processor["crop_size"]["height"])
    scores = {row["label"]: row["score"] for row in got}
    return _close("mlxim's probabilities", [scores[f"LABEL_{i}"] for i in range(10)], want, 1e-5)


def measure_speech_recognition(root: Path, device: str) -> Measured:
    """A tiny mlx-whisper model: the speech-recognition pipeline's text of a 2 s clip
    against mlx-whisper's greedy decode."""
    from mlx2onnx.tasks import export_folder
    from mlx2onnx.tasks.whisper import MLX_WHISPER as source

    folder = zoo.write_whisper_folder(root / "folder")
    package = export_folder(folder, root / "package")
    audio = zoo.speech_clip(seed=7)
    (root / "audio").mkdir()
    audio.astype("float32").tofile(root / "audio" / "clip.f32")
    model = source.load(folder)
    tokens = source.transcription(model, source.features(audio, model.dims.n_mels))[:SPOKEN]
    assert len(set(tokens)) > 2  # a transcription that tells a wrong token from a right one
    heard = _pipeline(
        "automatic-speech-recognition",
        package,
        device,
        "/models/audio/clip.f32",
        {"max_new_tokens": SPOKEN},
        {"audio": root / "audio"},
    )
    want = source.tokenizer(model).decode(tokens).strip()
    ok = heard["text"].strip() == want
    return Measured("mlx-whisper's text" if ok else "other text", ok, f"{heard['text']!r}, mlx-whisper {want!r}")


VLM = """
const { AutoProcessor, AutoModelForImageTextToText, RawImage } = transformers;
const processor = await AutoProcessor.from_pretrained("pkg");
const model = await AutoModelForImageTextToText.from_pretrained("pkg", %s);
const prompt = %s, image = await RawImage.fromURL("/models/images/image.png");
const inputs = await (%s ? processor(image, prompt) : processor(prompt, image));
const ids = Array.from(inputs.input_ids.data, Number);
const out = await model.generate({ ...inputs, max_new_tokens: %d, do_sample: false });
return { ids, tokens: Array.from(out.data, Number).slice(ids.length) };
"""


def measure_image_text_to_text(root: Path, device: str, architecture: str = "gemma3") -> Measured:
    """A tiny mlx-vlm ``architecture``: AutoProcessor (its images first where the package's
    processor takes them first, as its model card writes the call) +
    AutoModelForImageTextToText's greedy tokens for a PNG and a prompt against mlx-vlm's."""
    import mlx.core as mx
    from mlx_vlm.utils import load_model
    from PIL import Image

    from mlx2onnx.io.card import IMAGES_FIRST
    from mlx2onnx.tasks import architecture_of, export_folder
    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens

    folder = zoo.write_vlm_folder(root / "folder", architecture)
    package = export_folder(folder, root / "package")
    size = zoo.VLM_IMAGE_SIZES.get(architecture)
    image = zoo.generated_image(
        size or json.loads((folder / "config.json").read_text())["vision_config"]["image_size"], seed=4
    )
    (root / "images").mkdir()
    Image.fromarray(image).save(root / "images" / "image.png")
    processor = package / "processor_config.json"
    first = processor.is_file() and json.loads(processor.read_text()).get("processor_class") in IMAGES_FIRST
    heard = run_page(
        VLM % (json.dumps(_options(device)), json.dumps(zoo.VLM_PROMPTS[architecture]), json.dumps(first), NEW_TOKENS),
        {"pkg": package, "images": root / "images"},
        webgpu=device == "webgpu",
    )
    want = mlx_vlm_tokens(
        load_model(folder),
        architecture_of(folder),
        mx.array([heard["ids"]]),
        zoo.vlm_pixels(architecture, image),
        NEW_TOKENS,
    )[0]
    ok = len(set(want)) > 1 and heard["tokens"] == want
    return Measured("mlx-vlm's tokens" if ok else "other tokens", ok, f"{heard['tokens']}, mlx-vlm {want}")


# -- a plain export in onnxruntime-web, as a page imports it -----------------------------------
ORT_RUN = """
const session = await ort.InferenceSession.create("/models/plain/model.onnx", %s);
const feeds = {};
const arrays = { float32: Float32Array, int32: Int32Array };
for (const [name, { type, dims, data }] of Object.entries(%s)) feeds[name] = new ort.Tensor(type, arrays[type].from(data), dims);
const out = await session.run(feeds);
return Object.fromEntries(Object.entries(out).map(([name, t]) => [name, { dims: t.dims, data: Array.from(t.data) }]));
"""


def measure_onnxruntime_web(root: Path, device: str) -> Measured:
    """The bundled llama reference model exported with default options, run by
    onnxruntime-web in the page (no options but the execution provider: ``wasm`` for the
    defaults) on fresh random inputs, against MLX's outputs."""
    import mlx.core as mx

    import mlx2onnx
    from mlx2onnx.models import REFERENCE_MODELS
    from tests.support.browser import ORT_PRELUDE

    model, args, kwargs = REFERENCE_MODELS["llama"](seed=0)
    (root / "plain").mkdir()
    exported = mlx2onnx.Exporter(path=root / "plain" / "model.onnx").export(model, *args, **kwargs)
    ids = np.random.default_rng(5).integers(0, 128, args[0].shape).astype(np.int32)
    want = np.array(model(mx.array(ids)))
    options = {"executionProviders": ["wasm" if device == "defaults" else device]}
    feeds = {exported.graph.input[0].name: {"type": "int32", "dims": list(ids.shape), "data": ids.ravel().tolist()}}
    got = run_page(
        ORT_RUN % (json.dumps(options), json.dumps(feeds)),
        {"plain": root / "plain"},
        webgpu=device == "webgpu",
        prelude=ORT_PRELUDE,
    )["output_0"]
    return _close(
        "MLX's logits", np.array(got["data"], np.float32).reshape(got["dims"]), want, 1e-4 + 1e-4 * np.abs(want).max()
    )


# the browser table of docs/runtimes.md: (package, how it is run, the MLX package it needs, measure(root, device))
KINDS = [
    (
        "mlx-lm llama, float32",
        '`AutoModelForCausalLM.generate`, 2 prompts x 12 greedy tokens; `pipeline("text-generation")`',
        "mlx_lm",
        lambda root, device: measure_text_generation(root, device, None),
    ),
    (
        "mlx-lm llama, 4-bit (`model_q4.onnx`)",
        "the same",
        "mlx_lm",
        lambda root, device: measure_text_generation(root, device, 4),
    ),
    (
        "mlx-embeddings bert",
        '`pipeline("feature-extraction")`, mean pooling, normalised, 4 texts',
        "mlx_embeddings.utils",
        measure_feature_extraction,
    ),
    (
        "mlx-image resnet18",
        '`pipeline("image-classification")`, top 10 of a PNG',
        "mlxim.model",
        measure_image_classification,
    ),
    (
        "mlx-whisper",
        '`pipeline("automatic-speech-recognition")`, a 2 s clip, 24 tokens',
        "mlx_whisper.decoding",
        measure_speech_recognition,
    ),
    (
        "mlx-embeddings qwen3 (Qwen3-Embedding)",
        '`pipeline("feature-extraction")`, last-token pooling, normalised, 4 texts (left-padded)',
        "mlx_embeddings.utils",
        lambda root, device: measure_feature_extraction(root, device, "qwen3"),
    ),
    (
        "mlx-embeddings siglip",
        '`pipeline("zero-shot-image-classification")`, a PNG, 4 labels',
        "mlx_embeddings.utils",
        measure_zero_shot,
    ),
    (
        "mlx-vlm dinov2",
        '`pipeline("image-feature-extraction")`, a PNG',
        "mlx_vlm.utils",
        measure_image_features,
    ),
    (
        "mlx-vlm gemma3",
        "`AutoProcessor` + `AutoModelForImageTextToText.generate`, a PNG, 12 greedy tokens",
        "mlx_vlm.utils",
        measure_image_text_to_text,
    ),
    *(
        (
            f"mlx-vlm {architecture}",
            "the same" + (" (the processor takes the image first)" if first else ""),
            "mlx_vlm.utils",
            lambda root, device, architecture=architecture: measure_image_text_to_text(root, device, architecture),
        )
        for architecture, first in (("qwen2_5_vl", False), ("llava", True), ("pixtral", True))
    ),
    (
        "a plain export (`mlx2onnx export llama -o model.onnx`)",
        "onnxruntime-web's `InferenceSession`, `wasm` / `webgpu`",
        "mlx",
        measure_onnxruntime_web,
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", [name for name, *_ in KINDS])
def test_package_in_chromium_gives_the_mlx_packages_result(tmp_path, kind, device):
    _, _, needs, measure = next(entry for entry in KINDS if entry[0] == kind)
    pytest.importorskip(needs)
    found = measure(tmp_path, device)
    assert found.ok, found.detail
