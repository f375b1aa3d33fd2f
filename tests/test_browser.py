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
    assert config["transformers.js_config"]["dtype"] == {"model": "fp32"}  # what lets the defaults find model.onnx
    options = {} if device == "defaults" else {"device": "webgpu"}
    texts = zoo.PACKAGE_TEXTS[:2]
    found = run_page(GENERATE % (json.dumps(texts), json.dumps(options), NEW_TOKENS), {"pkg": package},
                     webgpu=device == "webgpu")
    model = load_model_folder(str(folder)).fun
    for row in found["rows"]:
        expected = zoo.mlx_tokens(model, folder, row["ids"], NEW_TOKENS)
        assert row["tokens"] == expected, f"{row['text']!r}: tokens {row['tokens']}, mlx-lm {expected}"
    assert found["pipeline"] == found["rows"][0]["text"]
