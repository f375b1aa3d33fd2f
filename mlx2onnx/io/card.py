"""A package's ``README.md``: the model card a hub shows when the folder is uploaded as a
repository, read from the package as written (its task, graphs, runtimes' files) and the
folder it came from."""

from __future__ import annotations

import json
from pathlib import Path

from .graph_files import DTYPE_SUFFIXES, dtype_file
from .notes import PackageNotes, notes_in

_TRANSFORMERS_JS = {  # task -> how a transformers.js user calls the package
    "text-generation": 'const generator = await pipeline("text-generation", "{name}");\n'
    'const out = await generator("Hello", {{ max_new_tokens: 32 }});',
    "feature-extraction": 'const extractor = await pipeline("feature-extraction", "{name}");\n'
    'const embeddings = await extractor(["Hello"], {{ pooling: "{pooling}", normalize: {normalize} }});',
    # an embedding no pipeline pooling gives (dense layers after the mean): the graph's own output
    "sentence-embedding": 'const tokenizer = await AutoTokenizer.from_pretrained("{name}");\n'
    'const model = await AutoModel.from_pretrained("{name}");\n'
    'const {{ sentence_embedding }} = await model(tokenizer(["Hello"], {{ padding: true }}));',
    "image-classification": 'const classifier = await pipeline("image-classification", "{name}");\n'
    'const labels = await classifier("image.png");',
    "zero-shot-image-classification": 'const classifier = await pipeline("zero-shot-image-classification", "{name}");\n'
    'const scores = await classifier("image.png", ["a cat", "a dog"]);\n'
    'const images = await pipeline("image-feature-extraction", "{name}");  // SiglipVisionModel\n'
    'const image_embeds = await images("image.png", {{ pool: true }});',
    "image-feature-extraction": 'const extractor = await pipeline("image-feature-extraction", "{name}");\n'
    'const features = await extractor("image.png");  // {{ pool: true }}: the class token\'s',
    "automatic-speech-recognition": 'const transcriber = await pipeline("automatic-speech-recognition", "{name}");\n'
    "const {{ text }} = await transcriber(samples);  // Float32Array, 16 kHz",
    "image-text-to-text": 'const processor = await AutoProcessor.from_pretrained("{name}");\n'
    'const model = await AutoModelForImageTextToText.from_pretrained("{name}");\n'
    "const inputs = await processor({processor_arguments});\n"
    "const out = await model.generate({{ ...inputs, max_new_tokens: 32 }});",
}
_IMPORTS = {
    "image-text-to-text": "AutoProcessor, AutoModelForImageTextToText, RawImage",
    "sentence-embedding": "AutoTokenizer, AutoModel",
}


def base_model(source: Path) -> str:
    """The hub id of ``source`` when it lies in huggingface_hub's cache
    (``models--ORG--NAME/snapshots/REV``), else the folder's name."""
    parts = source.resolve().parts
    for i, part in enumerate(parts[:-2]):
        if part.startswith("models--") and parts[i + 1] == "snapshots":
            return "/".join(part[len("models--") :].split("--", 1))
    return source.resolve().name


def _usage(task: str, notes: PackageNotes) -> str:
    """The usage line's key: the task's, or an embedding read from its own output."""
    return "sentence-embedding" if task == "feature-extraction" and notes.pooling is None else task


IMAGES_FIRST = (
    "LlavaProcessor",
    "PixtralProcessor",
    "PaliGemmaProcessor",
)  # transformers.js's processors that take the images first


def _processor_arguments(package: Path) -> str:
    """An image-text-to-text processor's call: transformers.js's Llava, Pixtral and
    PaliGemma processors take the images first, the others the text."""
    processor = package / "processor_config.json"
    first = processor.is_file() and json.loads(processor.read_text()).get("processor_class") in IMAGES_FIRST
    image = 'await RawImage.read("image.png")'
    return f"{image}, prompt" if first else f"prompt, {image}"


def write_card(package: Path, source: Path) -> None:
    """Write ``package/README.md`` for the package written from the folder ``source``."""
    from .._version import __version__

    config = json.loads((package / "config.json").read_text()) if (package / "config.json").is_file() else {}
    notes = notes_in(config)
    task = notes.task
    dtypes = config.get("transformers.js_config", {}).get("dtype", {})
    base, name = base_model(source), "PACKAGE"
    genai = (package / "genai_config.json").is_file()
    extra = {entry["file"]: (dtype, entry) for dtype, entry in (notes.dtype_files or {}).items()}
    own = {dtype_file(f"onnx/{stem}.onnx", dtype): dtype for stem, dtype in dtypes.items() if dtype in DTYPE_SUFFIXES}

    def row(path: Path) -> str:
        dtype, entry = extra.get(f"onnx/{path.name}", (own.get(f"onnx/{path.name}", "-"), None))
        found = (
            "the MLX folder's own computation"
            if entry is None
            else (
                f"{entry['token_agreement']:.0%} of {entry['tokens']} teacher-forced greedy tokens equal MLX's, "
                f"largest logit gap {entry['max_logit_gap']:.3g}"
            )
        )
        return f"| `onnx/{path.name}` | {dtype} | {path.stat().st_size / 2**20:.1f} MiB | {found} |"

    rows = [row(p) for p in sorted((package / "onnx").glob("*.onnx"))]
    usage = _TRANSFORMERS_JS[_usage(task, notes)].format(
        name=name,
        pooling=notes.pooling,
        normalize="false" if notes.normalize is False else "true",
        processor_arguments=_processor_arguments(package),
    )
    lines = [
        "---",
        "library_name: transformers.js",
        f"base_model: {base}",
        f"pipeline_tag: {task}",
        "tags:",
        "- onnx",
        "- mlx2onnx",
        *(["- onnxruntime-genai"] if genai else []),
        "---",
        "",
        f"# {base} (ONNX)",
        "",
        f"`{base}` exported from its MLX folder by mlx2onnx {__version__}, for transformers.js"
        + (" and onnxruntime-genai" if genai else "")
        + f": {task}.",
        "",
        "## Files",
        "",
        "| graph | transformers.js dtype | size | measured |",
        "|---|---|---|---|",
        *rows,
        "",
        "The graphs `transformers.js_config` in config.json names compute what the MLX package "
        "computes on the folder's weights (quantized weights stay quantized), each named by what it "
        "holds (a 4-bit graph is `q4`), so the runtime's defaults find them; a file measured "
        'against MLX is the model made over to that dtype in MLX, loaded with `{ dtype: "q4" }` '
        "and the like.",
        "",
        "## Use",
        "",
        "transformers.js (a browser or Node), with this folder uploaded as `PACKAGE`:",
        "",
        "```js",
        f'import {{ {_IMPORTS.get(_usage(task, notes), "pipeline")} }} from "@huggingface/transformers";',
        usage,
        "```",
        "",
    ]
    if genai:
        lines += [
            "onnxruntime-genai (Python), on the folder:",
            "",
            "```python",
            "import onnxruntime_genai as og",
            "",
            'model = og.Model("PACKAGE")',
            "```",
            "",
        ]
    lines += [
        "## Check",
        "",
        "Run the package against the MLX folder it came from (plain onnxruntime sessions, "
        "the MLX package's own code as the reference):",
        "",
        "```bash",
        f"mlx2onnx check PACKAGE/ {base}",
        "```",
        "",
    ]
    for runtime, note in notes.runtime_notes().items():
        lines.append(f"- {runtime.replace('_', ' ')}: {note}")
    (package / "README.md").write_text("\n".join(lines).rstrip() + "\n")
