"""Every architecture of the MLX model packages that is not plain text generation and that
a runtime has a model type for, and what mlx2onnx serves of them; writes the census
section of docs/packages.md.

The architectures are read from the installed packages: mlx-vlm's model modules with a
vision or audio tower or that mlx-lm does not have (mlx-lm's are text generation, the
fallback kind's), mlx-embeddings' models, mlx-audio's speech-to-text, text-to-speech,
speech-to-speech and codec models, mlx-image's model families and mlx-whisper. The runtimes'
types: every model type in transformers.js's model registry
(``node_modules/@huggingface/transformers/src/models/registry.js``) and onnxruntime-genai's
multimodal and speech types (:data:`GENAI_TYPES`, each checked against the strings of the
installed ``libonnxruntime-genai.so``). An architecture matches a type by its module's name
(``-`` and ``_`` alike) or by :data:`RUNTIME_NAMES` where the runtime names it otherwise.

What mlx2onnx serves is the registry of folder kinds (mlx2onnx/tasks): the kind whose
architectures hold the module's model type; the measured result per runtime is read from
the measured table of docs/packages.md (``python -m scripts.task_packages``).

    python -m scripts.census            # writes the census section of docs/packages.md
    python -m scripts.census --print    # prints it
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "packages.md"
BEGIN, END = "<!-- census: scripts/census.py -->", "<!-- end of census -->"
MEASURED = ("<!-- table: scripts/task_packages.py -->", "<!-- end of table -->")

# the MLX packages' model modules: (package name, import path of the models folder)
PACKAGES = (
    ("mlx-vlm", "mlx_vlm.models"),
    ("mlx-embeddings", "mlx_embeddings.models"),
    ("mlx-audio", "mlx_audio.stt.models"),
    ("mlx-audio", "mlx_audio.tts.models"),
    ("mlx-audio", "mlx_audio.sts.models"),
    ("mlx-audio", "mlx_audio.codec.models"),
    ("mlx-image", "mlxim.model"),
)
# onnxruntime-genai 0.18's types for other models than text generation (its model_type.h:
# vision-language, audio-language, multimodal and speech types)
GENAI_TYPES = (
    "fara",
    "gemma3",
    "gemma4",
    "gemma4_unified",
    "lfm2_vl",
    "mistral3",
    "phi3v",
    "phi4mm",
    "qwen2_5_vl",
    "qwen3_5",
    "qwen3_5_moe",
    "qwen3_vl",
    "videochat_flash_qwen",
    "whisper",
    "nemotron_speech",
    "parakeet_tdt",
    "streaming_enc_dec_asr",
)
# module -> the types a runtime gives the architecture where their names differ from the module's
RUNTIME_NAMES = {
    "phi3_v": ("phi3v",),
    "fastvlm": ("llava_qwen2",),
    "moondream2": ("moondream1",),
    "kokoro": ("style_text_to_speech_2",),
    "parakeet": ("parakeet_ctc", "parakeet_tdt"),
    "wav2vec": ("wav2vec2",),
    "swin_transformer": ("swin",),
    "mobilenet": ("mobilenet_v2", "mobilenet_v3"),
    "qwen2_vl": ("qwen2_5_vl",),  # genai's qwen2_5_vl type runs Qwen2-VL's package
    "pixtral": ("mistral3", "llava"),  # genai's mistral3 type; transformers.js's llava
    "qwen3_vl_moe": ("qwen3_vl",),  # genai's qwen3_vl type
    "llava_next": ("llava",),
    "llava_bunny": ("llava",),
    "internvl_chat": ("llava",),
    "aya_vision": ("llava",),
    "llama_bidirec": ("llama",),
}
# why an architecture a runtime has a type for is not served (measured or read, not guessed)
UNSERVED = {
    "fastvlm": "FastViTHD's sizes are class constants of mlx-vlm's module (a tiny test folder cannot be written)",
    "lfm2_vl": "its LFM2 language model carries convolution states, which the vision-language package does not",
    "gemma3n": "image and audio towers: not built yet",
    "llava_onevision": "mlx-vlm packs AnyRes tiles (unpadded, a newline a row) from the processor's tiles and "
    "image sizes; transformers.js's LlavaOnevision image processor is a plain resize (no tiles), so the runtime "
    "cannot give the model its inputs",
}


def _models(path: str) -> Path | None:
    top = importlib.util.find_spec(path.split(".")[0])
    if top is None or top.origin is None:
        return None
    return Path(top.origin).parent.joinpath(*path.split(".")[1:])


def _modules(folder: Path) -> list[str]:
    return sorted(
        p.name if p.is_dir() else p.stem
        for p in folder.iterdir()
        if not p.name.startswith("_")
        and ((p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem not in ("base",)))
    )


def _has_tower(folder: Path) -> bool:
    text = "".join(p.read_text(errors="ignore") for p in folder.glob("*.py"))
    return any(word in text for word in ("VisionConfig", "vision_config", "AudioConfig", "audio_config"))


def architectures() -> list[tuple[str, str]]:
    """(MLX package, module) of every architecture that is not plain text generation."""
    found = [("mlx-whisper", "whisper")] if importlib.util.find_spec("mlx_whisper") else []
    text = set(_modules(_models("mlx_lm.models"))) if _models("mlx_lm.models") else set()
    for package, path in PACKAGES:
        folder = _models(path)
        if folder is None:
            continue
        for module in _modules(folder):
            if path != "mlx_vlm.models" or module not in text or _has_tower(folder / module):
                if path == "mlx_vlm.models" and not (folder / module).is_dir():
                    continue  # mlx-vlm's shared helpers
                found.append((package, module))
    return found


TEXT_MAPS = ("MODEL_MAPPING_NAMES_DECODER_ONLY", "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES")


def transformers_js_types() -> dict[str, set[str]]:
    """transformers.js's model types -> the registry's mappings that hold each."""
    registry = ROOT / "node_modules" / "@huggingface" / "transformers" / "src" / "models" / "registry.js"
    found: dict[str, set[str]] = {}
    for name, body in re.findall(r"const (\w+) = new Map\(\[(.*?)\]\);", registry.read_text(), re.S):
        for model_type in re.findall(r"\['([A-Za-z0-9_\-]+)',\s*'[A-Za-z0-9_]+'\]", body):
            found.setdefault(model_type.replace("-", "_"), set()).add(name)
    return found


def genai_types() -> set[str]:
    """GENAI_TYPES, each one found in the installed library's strings (else the list is stale)."""
    folder = _models("onnxruntime_genai")
    library = next(folder.glob("libonnxruntime-genai.so*"), None) if folder else None
    if library is None:
        return set(GENAI_TYPES)
    strings = set(re.findall(rb"[a-z0-9_]{4,}", library.read_bytes()))
    stale = [t for t in GENAI_TYPES if t.encode() not in strings]
    if stale:
        raise SystemExit(f"onnxruntime-genai's library has no type {stale}: update GENAI_TYPES")
    return set(GENAI_TYPES)


def _spelled(name: str) -> str:
    return name.replace("-", "_")


def served() -> dict[tuple[str, str], tuple[str, str]]:
    """(MLX package, module name as it names it) -> (folder kind, model type) of the registry."""
    import mlx2onnx.tasks  # noqa: F401  (registers the kinds)
    from mlx2onnx.tasks import kinds

    remapping = {}
    if importlib.util.find_spec("mlx_vlm"):
        from mlx_vlm.utils import MODEL_REMAPPING

        remapping = MODEL_REMAPPING
    out = {}
    for kind in kinds.kinds():
        for model_type in kind.architectures:
            module = _spelled(remapping.get(model_type, model_type)) if kind.name.startswith("mlx-vlm") else model_type
            out.setdefault((kind.name.split()[0], _spelled(module)), (kind.name, model_type))
    # mlx-image's families are its model modules (mlxim names its models by them)
    for prefix, module in (("swin_tiny", "swin_transformer"), ("mobilenet_v2", "mobilenet")):
        if ("mlx-image", prefix) in out:
            out.setdefault(("mlx-image", module), out["mlx-image", prefix])
    return out


def measured() -> dict[tuple[str, str], dict[str, str]]:
    """(MLX package, architecture) -> {runtime: the measured table's results, by weights}."""
    page = PAGE.read_text()
    rows = page.split(MEASURED[0])[1].split(MEASURED[1])[0].strip().splitlines()[2:]
    out: dict[str, dict[str, list[str]]] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        _, package, architecture, weights, _, _, js, genai = cells
        for runtime, result in (("transformers.js", js), ("onnxruntime-genai", genai)):
            found = out.setdefault((package, architecture), {}).setdefault(runtime, [])
            found.append(f"{weights}: {result.split(':')[0]}")
    return {a: {r: ", ".join(v) for r, v in runtimes.items()} for a, runtimes in out.items()}


def _results(results: dict, package: str, module: str, kind: tuple[str, str] | None) -> dict[str, str]:
    """The measured rows of an architecture: by its module's name or model type, mlx-image's
    by its family's prefix (the table names the model: resnet18)."""
    names = {module, *(kind[1:] if kind else ())}
    rows = [
        found
        for (source, architecture), found in results.items()
        if source == package
        and (architecture in names or (package == "mlx-image" and kind and architecture.startswith(kind[1])))
    ]
    return {
        runtime: ", ".join(r[runtime] for r in rows) for runtime in ("transformers.js", "onnxruntime-genai") if rows
    }


def census() -> tuple[str, int, int]:
    """(the census table, architectures with a runtime type, those served)."""
    js, genai = transformers_js_types(), genai_types()
    by_module, results = served(), measured()
    lines = [
        "| MLX package | architecture | transformers.js type | onnxruntime-genai type | mlx2onnx | "
        "transformers.js (measured) | onnxruntime-genai (measured) |",
        "|---|---|---|---|---|---|---|",
    ]
    typed = serving = 0
    for package, module in sorted(architectures()):
        names = (_spelled(module), *RUNTIME_NAMES.get(module, ()))
        js_type = next((n for n in names if _spelled(n) in js), None)
        genai_type = next((n for n in names if n in genai), None)
        if js_type is None and genai_type is None:
            continue
        if package == "mlx-vlm" and genai_type is None and js[_spelled(js_type)] <= set(TEXT_MAPS):
            continue  # a text-generation model of mlx-vlm that mlx-lm lacks
        typed += 1
        kind = by_module.get((package, _spelled(module)))
        if kind is not None:
            serving += 1
            where = f"served: {kind[0]} `{kind[1]}`"
        else:
            where = f"not served: {UNSERVED.get(module, 'not built yet')}"
        found = _results(results, package, module, kind)
        unmeasured = "not in the measured table" if kind else ""
        lines.append(
            f"| {package} | {module} | {js_type or ''} | {genai_type or ''} | {where} | "
            f"{found.get('transformers.js', unmeasured)} | {found.get('onnxruntime-genai', unmeasured)} |"
        )
    return "\n".join(lines), typed, serving


def section() -> str:
    table, typed, serving = census()
    return (
        f"{BEGIN}\n{typed} architectures of the installed MLX packages that are not plain text generation have a "
        f"model type in transformers.js or onnxruntime-genai; mlx2onnx serves {serving} of them.\n\n{table}\n{END}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the section, do not write docs/packages.md")
    args = parser.parse_args()
    text = section()
    if args.print:
        print(text)
        return 0
    head, rest = PAGE.read_text().split(BEGIN)
    PAGE.write_text(head + text + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
