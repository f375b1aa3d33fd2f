"""Every folder kind mlx2onnx exports as a task package, through every runtime that runs it,
as a user runs them; writes docs/packages.md.

For each MLX package's folder (tiny random models written by the MLX packages' own save
functions, tokenizers trained locally, nothing downloaded): ``mlx2onnx export FOLDER -o
PACKAGE``, ``mlx2onnx check PACKAGE FOLDER``, then the runtimes' own pipelines on an input
this script makes (texts, a generated image, a synthesised clip), compared with the MLX
package's result on the same input:

- feature-extraction: transformers.js ``pipeline("feature-extraction")`` with the pooling
  and normalisation the package records (or ``AutoModel``'s ``sentence_embedding`` where
  it records none) against mlx-embeddings' ``text_embeds`` (largest difference);
- zero-shot-image-classification (SigLIP): transformers.js's zero-shot and
  image-feature-extraction pipelines and ``SiglipTextModel`` against mlx-embeddings'
  sigmoid of logits_per_image, image and text features;
- image-feature-extraction (DINOv2): transformers.js's pipeline, pooled and not, against
  mlx-vlm's token sequence and class token;
- image-classification: transformers.js ``pipeline("image-classification")`` on a PNG (its
  own resize, crop and normalisation) against mlx-image's class probabilities;
- automatic-speech-recognition: transformers.js ``pipeline("automatic-speech-recognition")``
  (its own log-mel frontend for Whisper) and onnxruntime-genai's whisper type (its own
  processor, on a WAV file) against mlx-whisper's / mlx-audio's greedy tokens (mlx-audio's
  4-bit Whisper with its float16 quantized products summed in float32, as MLX's GPUs sum
  them: zoo.with_float32_sums);
- image-text-to-text: transformers.js's processors and ``AutoModelForImageTextToText``, and
  onnxruntime-genai's gemma3 and qwen2_5_vl types (their own processors), on a PNG and a
  prompt against mlx-vlm's generation.

    python -m scripts.task_packages            # every row, writes docs/packages.md
    python -m scripts.task_packages --print    # prints the table only
    python -m scripts.task_packages --resize   # images of other sizes: transformers.js against mlxim's
                                               # own resize (needs opencv-python-headless)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mlx2onnx.io.notes import read_notes

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

ROWS = [  # (task, MLX package, architecture, variant)
    ("feature-extraction", "mlx-embeddings", "bert", "float32"),
    ("feature-extraction", "mlx-embeddings", "xlm_roberta", "float32"),
    ("feature-extraction", "mlx-embeddings", "modernbert", "float32"),
    ("feature-extraction", "mlx-embeddings", "qwen3", "float32"),
    ("feature-extraction", "mlx-embeddings", "gemma3_text", "float32"),
    ("feature-extraction", "mlx-embeddings", "llama_bidirec", "float32"),
    ("feature-extraction", "mlx-embeddings", "lfm2", "float32"),
    ("feature-extraction", "mlx-embeddings", "bert", "4-bit"),
    ("feature-extraction", "mlx-embeddings", "qwen3", "4-bit"),
    ("feature-extraction", "mlx-embeddings", "gemma3_text", "bfloat16"),
    ("feature-extraction", "mlx-embeddings", "bert", "bfloat16"),
    ("zero-shot-image-classification", "mlx-embeddings", "siglip", "float32"),
    ("zero-shot-image-classification", "mlx-embeddings", "siglip", "4-bit"),
    ("image-feature-extraction", "mlx-vlm", "dinov2", "float32"),
    ("image-feature-extraction", "mlx-vlm", "dinov2", "4-bit"),
    ("image-feature-extraction", "mlx-vlm", "dinov2", "bfloat16"),
    ("image-feature-extraction", "mlx-vlm", "dinov2", "registers"),  # dinov2_with_registers
    ("image-classification", "mlx-image", "resnet18", "float32"),
    ("image-classification", "mlx-image", "mobilenet_v2", "float32"),
    ("image-classification", "mlx-image", "resnet18", "bfloat16"),
    ("automatic-speech-recognition", "mlx-whisper", "whisper", "float32"),
    ("automatic-speech-recognition", "mlx-whisper", "whisper", "4-bit"),
    ("automatic-speech-recognition", "mlx-whisper", "whisper", "bfloat16"),
    ("automatic-speech-recognition", "mlx-whisper", "whisper", "english-only"),
    ("automatic-speech-recognition", "mlx-audio", "whisper", "float16"),
    ("automatic-speech-recognition", "mlx-audio", "whisper", "4-bit"),
    ("automatic-speech-recognition", "mlx-audio", "whisper", "bfloat16"),
    ("automatic-speech-recognition", "mlx-audio", "whisper", "english-only"),
    ("automatic-speech-recognition", "mlx-audio", "moonshine", "float32"),
    ("automatic-speech-recognition", "mlx-audio", "moonshine", "4-bit"),
    ("automatic-speech-recognition", "mlx-audio", "moonshine", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "gemma3", "float32"),
    ("image-text-to-text", "mlx-vlm", "gemma3", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "gemma3", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "smolvlm", "float32"),
    ("image-text-to-text", "mlx-vlm", "idefics3", "float32"),
    ("image-text-to-text", "mlx-vlm", "idefics3", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "idefics3", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "idefics3 (tiles)", "float32"),
    ("image-text-to-text", "mlx-vlm", "qwen2_vl", "float32"),
    ("image-text-to-text", "mlx-vlm", "qwen2_vl", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "qwen2_vl", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "qwen2_5_vl", "float32"),
    ("image-text-to-text", "mlx-vlm", "qwen2_5_vl", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "qwen2_5_vl", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "qwen3_vl", "float32"),
    ("image-text-to-text", "mlx-vlm", "qwen3_vl", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "qwen3_vl", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "qwen3_vl_moe", "float32"),
    ("image-text-to-text", "mlx-vlm", "qwen3_vl_moe", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "glm_ocr", "float32"),
    ("image-text-to-text", "mlx-vlm", "glm_ocr", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "glm_ocr", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "llava", "float32"),
    ("image-text-to-text", "mlx-vlm", "llava", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "llava", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "llava_next", "float32"),
    ("image-text-to-text", "mlx-vlm", "llava_next", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "llava_bunny", "float32"),
    ("image-text-to-text", "mlx-vlm", "llava_bunny", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "llava_bunny", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "mistral3", "float32"),
    ("image-text-to-text", "mlx-vlm", "mistral3", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "mistral3", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "pixtral", "float32"),
    ("image-text-to-text", "mlx-vlm", "pixtral", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "pixtral", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "paligemma", "float32"),
    ("image-text-to-text", "mlx-vlm", "paligemma", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "paligemma", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "internvl_chat", "float32"),
    ("image-text-to-text", "mlx-vlm", "internvl_chat", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "internvl_chat", "bfloat16"),
    ("image-text-to-text", "mlx-vlm", "aya_vision", "float32"),
    ("image-text-to-text", "mlx-vlm", "aya_vision", "4-bit"),
    ("image-text-to-text", "mlx-vlm", "aya_vision", "bfloat16"),
]


def write_folder(where: Path, source: str, architecture: str, variant: str) -> Path:
    import mlx.core as mx

    from tests.support import zoo

    options = {
        "4-bit": {"bits": 4},
        "bfloat16": {"dtype": mx.bfloat16},
        "english-only": {"dims": zoo.ENGLISH_WHISPER_DIMS},
        "registers": {"registers": 4},
    }.get(variant, {})
    if (source, architecture) == ("mlx-audio", "whisper"):
        return zoo.write_mlx_audio_whisper_folder(where / "folder", **options)
    if architecture == "whisper":
        return zoo.write_whisper_folder(where / "folder", **options)
    if architecture == "moonshine":
        return zoo.write_moonshine_folder(where / "folder", **options)
    if architecture == "idefics3 (tiles)":
        return zoo.write_vlm_folder(where / "folder", "idefics3", split=True, **options)
    if architecture in zoo.VLM_SPECIALS:
        return zoo.write_vlm_folder(where / "folder", architecture, **options)
    if architecture == "dinov2":
        return zoo.write_dinov2_folder(where / "folder", **options)
    if architecture == "siglip":
        return zoo.write_siglip_folder(where / "folder", bits=options.get("bits"))
    if architecture in ("resnet18", "mobilenet_v2"):
        return zoo.write_image_folder(where / f"{architecture}-mlxim", architecture, dtype=options.get("dtype"))
    if variant == "float32":
        return zoo.write_embedding_folder(where / "folder", architecture)
    saved = zoo.EMBEDDING_CONFIGS[architecture]
    zoo.EMBEDDING_CONFIGS[architecture] = dict(saved, hidden_size=64, intermediate_size=128)  # 4-bit blocks of 32
    try:
        return zoo.write_embedding_folder(where / "folder", architecture, **options)
    finally:
        zoo.EMBEDDING_CONFIGS[architecture] = saved


def transformers_js(
    task: str, source: str, architecture: str, variant: str, folder: Path, package: Path, where: Path
) -> str:
    import numpy as np

    from tests.support import zoo

    if task == "feature-extraction":
        got = zoo.transformers_js_embeddings(package, zoo.EMBEDDING_TEXTS)
        error = np.abs(got - zoo.mlx_embeddings(folder, zoo.EMBEDDING_TEXTS)).max()
        pooling = read_notes(package).pooling
        read = "AutoModel's sentence_embedding" if pooling is None else f"pooling {pooling}"
        return f"{'PASS' if error <= 2e-5 else 'FAIL'}: embeddings of 4 texts ({read}), max abs {error:.2g}"
    if task in ("zero-shot-image-classification", "image-feature-extraction"):
        found = (zoo.siglip_in_transformers_js if architecture == "siglip" else zoo.dinov2_in_transformers_js)(
            package, folder, where
        )
        error = max(float(np.abs(got - want).max()) for got, want in found.values())
        return f"{'PASS' if error <= 2e-5 else 'FAIL'}: {', '.join(found)}, max abs {error:.2g}"
    if task == "image-classification":
        from PIL import Image

        processor = json.loads((package / "preprocessor_config.json").read_text())
        image = zoo.generated_image(processor["size"]["height"], seed=3)
        Image.fromarray(image).save(where / "image.png")
        got = zoo.transformers_js_pipeline(task, package, {"top_k": 10}, [where / "image.png"])[0]
        want = zoo.mlx_class_probabilities(folder, architecture, image, processor["crop_size"]["height"])
        error = max(abs(row["score"] - want[int(row["label"].split("_")[1])]) for row in got)
        return f"{'PASS' if error <= 1e-5 else 'FAIL'}: 10 class probabilities, max abs {error:.2g}"
    if task == "image-text-to-text":
        return vision_language(architecture, folder, package, where)
    audio = zoo.speech_clip(seconds=2.7, seed=5)
    want, limit, start = speech_reference(source, architecture, folder, audio, variant)
    audio.tofile(where / "clip.f32")
    heard = json.loads(zoo._node("transformers_asr.mjs", str(package), str(where / "clip.f32"), str(limit))[-1])
    config = json.loads((package / "config.json").read_text())
    got = [t for t in heard["tokens"] if t != config["eos_token_id"]][len(start) :]
    return f"{'PASS' if got == want else 'FAIL'}: {len(want)} greedy tokens {'equal' if got == want else 'differ'}"


def vision_language(architecture: str, folder: Path, package: Path, where: Path) -> str:
    """transformers.js's processor and model on a PNG and a prompt, against mlx-vlm's
    generation on the processor's ids and the same pixels (for split images: the
    processor's tiles and global image; the global image is also compared with
    transformers' Python processor, mlx-vlm's own, and mlx-vlm's tokens on its pixels)."""
    import mlx.core as mx
    import numpy as np
    from mlx_vlm.utils import load_model
    from PIL import Image

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens
    from tests.support import zoo

    model, arch = load_model(folder), architecture_of(folder)
    if architecture == "idefics3 (tiles)":
        tile = model.config.vision_config.image_size
        image = zoo.generated_image(tile, seed=4, width=2 * tile)
        Image.fromarray(image).save(where / "image.png")
        heard, inputs = zoo.transformers_vlm_tiles(package, where / "image.png", zoo.VLM_PROMPTS["idefics3"], where)
        pixels = inputs["pixel_values"]
        want = mlx_vlm_tokens(model, arch, mx.array([heard["ids"]]), inputs, 12)[0]
        python = transformers_idefics3_pixels(folder, where / "image.png")
        same = heard["tokens"] == want
        own = mlx_vlm_tokens(model, arch, mx.array([heard["ids"]]), python, 12)[0] == want
        return (
            f"{'PASS' if same else 'FAIL'}: {len(want)} greedy tokens {'equal' if same else 'differ'} "
            f"({pixels.shape[1] - 1} tiles and a global image; the global image {np.abs(python['pixel_values'] - pixels).max():.2g} "
            f"off transformers' Python processor's, whose pixels give mlx-vlm {'the same' if own else 'other'} tokens)"
        )
    image = zoo.generated_image(zoo.VLM_IMAGE_SIZES.get(architecture) or model.config.vision_config.image_size, seed=4)
    Image.fromarray(image).save(where / "image.png")
    heard = json.loads(
        zoo._node("transformers_vlm.mjs", str(package), str(where / "image.png"), "12", zoo.VLM_PROMPTS[architecture])[
            -1
        ]
    )
    want = mlx_vlm_tokens(model, arch, mx.array([heard["ids"]]), zoo.vlm_pixels(architecture, image), 12)[0]
    same = heard["tokens"] == want
    return f"{'PASS' if same else 'FAIL'}: {len(want)} greedy tokens {'equal' if same else 'differ'}"


def transformers_idefics3_pixels(folder: Path, png: Path) -> dict:
    """transformers' Idefics3ImageProcessor (mlx-vlm's processor) with the folder's options."""
    from PIL import Image
    from transformers import Idefics3ImageProcessor

    options = json.loads((folder / "preprocessor_config.json").read_text())
    for key in ("image_processor_type", "processor_class"):
        options.pop(key, None)
    out = Idefics3ImageProcessor(**options)(Image.open(png), return_tensors="np")
    return {"pixel_values": out["pixel_values"], "pixel_attention_mask": out["pixel_attention_mask"]}


def genai_vision_language(architecture: str, folder: Path, package: Path, where: Path) -> str:
    """onnxruntime-genai's multimodal type (its processor on the PNG) against mlx-vlm."""
    import mlx.core as mx
    from mlx_vlm.utils import load_model
    from PIL import Image

    from mlx2onnx.tasks import architecture_of
    from mlx2onnx.tasks.vision_language import mlx_vlm_tokens
    from tests.support import zoo

    model, arch = load_model(folder), architecture_of(folder)
    image = zoo.generated_image(zoo.VLM_IMAGE_SIZES.get(architecture) or model.config.vision_config.image_size, seed=4)
    Image.fromarray(image).save(where / "genai.png")
    ids, got = zoo.genai_vlm_tokens(package, where / "genai.png", zoo.VLM_PROMPTS[architecture], 12)
    want = mlx_vlm_tokens(model, arch, mx.array([ids]), zoo.vlm_pixels(architecture, image), 12)[0]
    return f"{'PASS' if got == want else 'FAIL'}: {len(want)} greedy tokens {'equal' if got == want else 'differ'}"


def speech_reference(source: str, architecture: str, folder: Path, audio, variant: str):
    """(the MLX package's greedy tokens of ``audio``, the token limit, the prompt they
    follow); mlx-audio's 4-bit Whisper with its quantized products summed in float32, as
    MLX's GPUs and the runtimes sum them (zoo.with_float32_sums)."""
    from tests.support import zoo

    if architecture == "moonshine":
        from mlx_audio.stt.utils import load

        from mlx2onnx.tasks.moonshine import mlx_moonshine_tokens

        start = json.loads((folder / "config.json").read_text())["decoder_start_token_id"]
        return mlx_moonshine_tokens(load(str(folder)), audio, 12), 12, [start]
    from mlx2onnx.tasks.whisper import MLX_WHISPER, whisper_prompt
    from mlx2onnx.tasks.whisper_audio import MLX_AUDIO

    whisper = MLX_AUDIO if source == "mlx-audio" else MLX_WHISPER
    model = whisper.load(folder)
    if source == "mlx-audio" and variant == "4-bit":
        model = zoo.with_float32_sums(model)
    tokens = whisper.transcription(model, whisper.features(audio, model.dims.n_mels))
    return tokens, model.dims.n_text_ctx // 2, list(whisper_prompt(whisper.tokenizer(model)))


def genai(source: str, architecture: str, variant: str, folder: Path, package: Path, where: Path) -> str:
    from tests.support import zoo

    notes = read_notes(package).runtime_notes()
    if "onnxruntime-genai" in notes:
        return f"declared: {notes['onnxruntime-genai']}"
    samples = zoo.write_wav(where / "clip.wav", zoo.speech_clip(seconds=2.7, seed=5))
    want, limit, start = speech_reference(source, architecture, folder, samples, variant)
    got = zoo.genai_transcription(package, where / "clip.wav", len(start) + limit)[len(start) :]
    eos = json.loads((package / "generation_config.json").read_text())["eos_token_id"]
    got = [t for t in got if t != eos]
    return f"{'PASS' if got == want else 'FAIL'}: {len(want)} greedy tokens {'equal' if got == want else 'differ'}"


def run_row(task: str, source: str, architecture: str, variant: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        folder = write_folder(where, source, architecture, variant)
        package = where / "package"
        cli = [sys.executable, "-m", "mlx2onnx"]
        start = time.perf_counter()
        done = subprocess.run([*cli, "export", str(folder), "-o", str(package)], capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode:
            return {"row": (task, source, architecture, variant), "export": f"FAIL: {done.stderr.strip()[-200:]}"}
        checked = subprocess.run([*cli, "check", str(package), str(folder), "--json"], capture_output=True, text=True)
        result = json.loads(checked.stdout)
        errors = max(r["max_abs_error"] for r in result["rows"])
        check = f"{'PASS' if result['passed'] else 'FAIL'}: max abs {errors:.2g}"
        js = transformers_js(task, source, architecture, variant, folder, package, where)
        notes = read_notes(package).runtime_notes()
        if task == "automatic-speech-recognition":
            ga = genai(source, architecture, variant, folder, package, where)
        elif task == "image-text-to-text" and "onnxruntime-genai" not in notes:
            ga = genai_vision_language(architecture, folder, package, where)
        else:
            ga = f"declared: {notes['onnxruntime-genai']}" if "onnxruntime-genai" in notes else "no task type"
        return {
            "row": (task, source, architecture, variant),
            "export": f"{seconds:.1f} s",
            "check": check,
            "transformers.js": js,
            "onnxruntime-genai": ga,
        }


def resize_rows() -> list[str]:
    """transformers.js's probabilities for images of other sizes than the resize size (its
    sharp resize) against mlxim's evaluation transform as albumentations runs it: mlxim
    hands albumentations PIL's filter codes, which OpenCV reads as its own (PIL's bilinear,
    2, is OpenCV's INTER_CUBIC)."""
    import cv2
    import numpy as np
    from PIL import Image

    from tests.support import zoo

    rows = []
    for name in ("resnet18", "mobilenet_v2"):
        with tempfile.TemporaryDirectory() as tmp:
            where = Path(tmp)
            folder = write_folder(where, "mlx-image", name, "float32")
            subprocess.run(
                [sys.executable, "-m", "mlx2onnx", "export", str(folder), "-o", str(where / "package")],
                check=True,
                capture_output=True,
            )
            processor = json.loads((where / "package" / "preprocessor_config.json").read_text())
            size, crop = processor["size"]["height"], processor["crop_size"]["height"]
            for shape in ((200, 300), (480, 640), (150, 150)):
                image = zoo.generated_image(max(shape), seed=1)[: shape[0], : shape[1]]
                Image.fromarray(image).save(where / "image.png")
                got = zoo.transformers_js_pipeline(
                    "image-classification", where / "package", {"top_k": 10}, [where / "image.png"]
                )[0]
                got = np.array([next(r["score"] for r in got if r["label"] == f"LABEL_{i}") for i in range(10)])
                resized = cv2.resize(image, (size, size), interpolation=processor["resample"])
                want = zoo.mlx_class_probabilities(folder, name, resized, crop)
                rows.append(
                    f"| {name} | {shape[1]} x {shape[0]} | {np.abs(got - want).max():.2g} | "
                    f"{'same' if got.argmax() == want.argmax() else 'differs'} |"
                )
    return ["| model | image | max abs probability difference | top-1 |", "|---|---|---|---|", *rows]


def table(results: list[dict]) -> str:
    lines = [
        "| task | folder | architecture | weights | export | `mlx2onnx check` | transformers.js 4.3 (Node) "
        "| onnxruntime-genai 0.18 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        task, source, architecture, variant = r["row"]
        cells = [r.get(k, "") for k in ("export", "check", "transformers.js", "onnxruntime-genai")]
        lines.append(f"| {task} | {source} | {architecture} | {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the table, do not write docs/packages.md")
    parser.add_argument("--resize", action="store_true", help="only measure images of other sizes (prints)")
    parser.add_argument(
        "--only", metavar="ARCHITECTURE", help="run this architecture's rows, replacing them in the table"
    )
    args = parser.parse_args()
    if args.resize:
        print("\n".join(resize_rows()))
        return 0
    results = []
    for row in ROWS:
        if args.only is None or row[2] == args.only:
            results.append(run_row(*row))
            print(table(results[-1:]).splitlines()[-1], flush=True)
    if not args.print:
        page = (ROOT / "docs" / "packages.md").read_text()
        begin, end = "<!-- table: scripts/task_packages.py -->", "<!-- end of table -->"
        head, rest = page.split(begin)
        lines = table(results).splitlines()
        if args.only is not None:  # the table's other rows as they were measured, in ROWS' order
            kept = {
                tuple(c.strip() for c in line.strip("|").split("|")[:4]): line
                for line in rest.split(end)[0].strip().splitlines()[2:]
            }
            kept.update({tuple(c.strip() for c in line.strip("|").split("|")[:4]): line for line in lines[2:]})
            lines = lines[:2] + [kept[row] for row in ROWS if row in kept]
        (ROOT / "docs" / "packages.md").write_text(
            head + begin + "\n" + "\n".join(lines) + "\n" + end + rest.split(end, 1)[1]
        )
    return 0 if all("FAIL" not in json.dumps(r) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
