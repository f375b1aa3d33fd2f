"""mlx-lm model folders -> packages that onnxruntime-genai and transformers.js run.

Each folder is written by the test (random weights, a byte-level BPE tokenizer trained
with `tokenizers`), exported with `mlx2onnx export FOLDER -o PACKAGE`, and run in
onnxruntime-genai (PyPI) and transformers.js (npm, under Node with onnxruntime-node):
their greedy tokens must equal MLX's own (mlx-lm's loader and forward), and their
tokenizers, loaded from the package, must encode like the source tokenizer.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlx.core as mx
import numpy as np
import onnx
import pytest

from mlx2onnx.targets import load_model_folder
from tests.support import zoo
from tests.support.commands import cli

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

HERE = Path(__file__).resolve().parents[1] / "support"
NEW_TOKENS = 12
FOLDERS = {
    "llama": ("llama", None),
    "qwen3": ("qwen3", None),
    "phi3": ("phi3", None),
    "llama 4-bit": ("llama", 4),
    "llama, external data": ("llama", None),
}
PROMPTS = ("the quick brown fox", "hello world")


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    root = tmp_path_factory.mktemp("packages")
    made = {}

    def get(name):
        if name not in made:
            arch, bits = FOLDERS[name]
            folder = zoo.write_model_folder(root / f"{arch}{bits or ''}-{len(made)}-folder", arch, bits=bits)
            package = root / f"{arch}{bits or ''}-{len(made)}-package"
            if "external" in name:  # as a model above 2 GB is written
                from mlx2onnx.llm.package import export_package

                export_package(folder, package, external_data=True)
                assert (package / "onnx" / "model.onnx_data").is_file()
            else:
                cli("export", folder, "-o", package, cwd=root, check_rc=0)
            made[name] = (folder, package)
        return made[name]

    return get


def source_ids(folder: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids


def mlx_tokens(folder: Path, ids: list[int]) -> list[int]:
    return zoo.mlx_tokens(load_model_folder(str(folder)).fun, folder, ids, NEW_TOKENS)


@pytest.mark.slow
def test_package_layout(packages):
    folder, package = packages("llama")
    files = sorted(str(p.relative_to(package)) for p in package.rglob("*") if p.is_file())
    assert files == [
        ".mlx2onnx.json",
        "README.md",
        "config.json",
        "genai_config.json",
        "generation_config.json",
        "onnx/model.onnx",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert json.loads((package / ".mlx2onnx.json").read_text())["files"] == files[1:]
    model = onnx.load(str(package / "onnx" / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    dims = {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(model.graph.input) + list(model.graph.output)
    }
    assert dims["input_ids"] == ["batch_size", "sequence"] and dims["position_ids"] == ["batch_size", "sequence"]
    assert dims["attention_mask"] == ["batch_size", "total_sequence"]
    assert dims["past_key_values.0.key"][:3] == ["batch_size", 2, "past_sequence"]
    assert dims["logits"][:2] == ["batch_size", "sequence"] and dims["present.1.value"][0] == "batch_size"
    genai = json.loads((package / "genai_config.json").read_text())["model"]
    assert genai["decoder"]["filename"] == "onnx/model.onnx" and genai["decoder"]["num_hidden_layers"] == 2
    assert genai["decoder"]["session_options"]["intra_op_num_threads"] == 0  # onnxruntime's thread count


@pytest.mark.genai
@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_onnxruntime_genai_generates_mlx_tokens(packages, name):
    og = pytest.importorskip("onnxruntime_genai")
    folder, package = packages(name)
    model = og.Model(str(package))
    tokenizer = og.Tokenizer(model)
    for text in PROMPTS:
        ids = [int(i) for i in tokenizer.encode(text)]
        assert ids == source_ids(folder, text)
        assert zoo.genai_tokens(model, ids, NEW_TOKENS) == mlx_tokens(folder, ids), text


@pytest.mark.node
@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_transformers_js_generates_mlx_tokens(packages, name):
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm install --ignore-scripts @huggingface/transformers")
    folder, package = packages(name)
    results = zoo.transformers_js_tokens(package, NEW_TOKENS, PROMPTS)
    assert len(results) == len(PROMPTS)
    for text, result in zip(PROMPTS, results):
        assert result["ids"] == source_ids(folder, text)
        assert result["tokens"] == mlx_tokens(folder, result["ids"]), text


def test_left_padded_batch_rows_get_their_own_tokens(packages):
    """Prompts of different lengths in one left-padded batch through the package graph
    (onnxruntime): each row's greedy tokens and first logits equal MLX's for it alone."""
    from mlx2onnx.llm.check import check_package

    folder, package = packages("qwen3")
    rng = np.random.default_rng(9)
    prompts = [rng.integers(3, 200, n).tolist() for n in (9, 2, 5)]
    result = check_package(package, folder, prompts)
    assert result["passed"], json.dumps(result, indent=1)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemma3_text", "llama bfloat16"])
def test_sliding_window_and_bfloat16_packages_match_mlx(tmp_path, name):
    """gemma3's sliding-window layers (mlx-lm RotatingKVCache: the window is in the mask)
    and a bfloat16 folder (computed as MLX computes bfloat16, so the tokens and logits
    are MLX's): one left-padded batch in onnxruntime against mlx-lm."""
    from mlx2onnx.llm.check import check_package

    arch = name.split()[0]
    folder = zoo.write_model_folder(tmp_path / "folder", arch, dtype=mx.bfloat16 if "bfloat16" in name else None)
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    result = check_package(tmp_path / "package", folder, [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22]])
    assert result["passed"], json.dumps(result, indent=1)


@pytest.mark.slow
def test_check_command_compares_a_package_with_its_folder(packages, tmp_path):
    folder, package = packages("llama 4-bit")
    out = cli("check", package, folder, cwd=tmp_path, check_rc=0)
    assert "package parity PASSED" in out.stdout
    other = zoo.write_model_folder(tmp_path / "other", "llama", bits=4, seed=1)  # other weights: must fail
    out = cli("check", package, other, cwd=tmp_path, check_rc=1)
    assert "package parity FAILED" in out.stdout


def _no_leftovers(where: Path):
    return [p.name for p in where.iterdir() if p.name.startswith(".")] == []


@pytest.mark.slow
@pytest.mark.parametrize("case", ["no config", "unknown model_type", "no weights", "chunked cache", "existing output"])
def test_bad_folders_are_refused_before_anything_is_written(tmp_path, case):
    folder = zoo.write_model_folder(tmp_path / "folder", "llama")
    expected = {
        "no config": "has no config.json",
        "unknown model_type": "mlx-lm cannot load",
        "no weights": "has no \\*.safetensors weights",
        "chunked cache": "model_type .llama4. uses an mlx-lm ChunkedKVCache .layer 0.*does not support",
        "existing output": "already exists",
    }[case]
    if case == "no config":
        (folder / "config.json").unlink()
    elif case == "unknown model_type":
        settings = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**settings, "model_type": "no_such_architecture"}))
    elif case == "no weights":
        (folder / "model.safetensors").unlink()
    elif case == "chunked cache":
        from tests.support.mlx_lm_configs import config_for

        shutil.rmtree(folder)
        folder = zoo.write_model_folder(tmp_path / "folder", "llama4", config=config_for("llama4"))
    elif case == "existing output":
        (tmp_path / "package").mkdir()
        (tmp_path / "package" / "notes.txt").write_text("mine")
    out = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert out.returncode == (3 if case == "chunked cache" else 2)  # cannot export; a usage error
    import re

    assert re.search(expected, out.stderr), out.stderr
    assert _no_leftovers(tmp_path)
    if case != "existing output":
        assert not (tmp_path / "package").exists()


# architectures whose packages needed more than the plain decoder, each with what it needed
ARCHITECTURES = {
    "ministral3": "positions of padding make NaN (log of 0): padded keys and values are stored as zeros",
    "deepseek_v2": "keys and values of different widths: both stored at the wider one (genai has one head size)",
    "qwen2_vl": "settings nested in text_config; a model type transformers.js runs with a vision tower",
    "gemma2": "grouped-query scores [batch, kv, group, N, total]: the mask gets a group axis",
    "gemma3n": "layers that share another layer's cache: one cache per make_cache() entry",
    "mixtral": "a model type transformers.js does not know: its plain decoder (llama) runs the package",
    "exaone": "greedy decoding that meets the end-of-sequence token: the runtimes stop there",
    "plamo3": "a sliding window asked one wider than its cache keeps: one-token steps see what mlx-lm keeps",
}


def _config(arch: str) -> dict:
    """The sweep's tiny config; gemma3n's with KV-shared layers (the sweep's has none): its
    last two of four layers read the caches of the layers before them (and Gemma 3n's own
    logit softcap, 30: the sweep's 2 saturates random logits into ties)."""
    from tests.support.mlx_lm_configs import config_for

    config = config_for(arch)
    if arch == "gemma3n":
        config["text_config"].update(
            num_hidden_layers=4,
            num_kv_shared_layers=2,
            layer_types=["sliding_attention", "full_attention"] * 2,
            activation_sparsity_pattern=[0.0] * 4,
            final_logit_softcapping=30.0,
        )
    return config


@pytest.mark.node
@pytest.mark.genai
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_architectures_run_as_packages_in_both_runtimes(tmp_path, arch):
    """Each architecture's package (tiny config, random weights): a left-padded batch in
    onnxruntime, onnxruntime-genai and transformers.js give mlx-lm's greedy tokens, and the
    check passes against mlx-lm's generation (gemma3n's KV-shared layers: mlx-lm's forward
    without a cache gives other logits, as those layers then project their own keys)."""
    from mlx2onnx.llm.check import check_package
    from mlx2onnx.llm.greedy import mlx_prompt_logits

    folder = zoo.write_model_folder(tmp_path / "folder", arch, config=_config(arch))
    package = tmp_path / "package"
    cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    result = check_package(package, folder, [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22]])
    assert result["passed"], json.dumps(result, indent=1)
    if arch == "gemma3n":
        model, prompt = load_model_folder(str(folder)).fun, mx.array([[5, 6, 7, 8, 9, 10, 11]])
        assert float(mx.abs(model(prompt)[0, -1] - mlx_prompt_logits(model, prompt)[0]).max()) > 0.1
    og = pytest.importorskip("onnxruntime_genai")
    model = og.Model(str(package))
    for text in PROMPTS:
        ids = source_ids(folder, text)
        assert zoo.genai_tokens(model, ids, NEW_TOKENS) == mlx_tokens(folder, ids), (arch, text)
    if not zoo.node_available():
        pytest.skip("transformers.js is not installed: npm install --ignore-scripts @huggingface/transformers")
    for text, result in zip(PROMPTS, zoo.transformers_js_tokens(package, NEW_TOKENS, PROMPTS)):
        assert result["tokens"] == mlx_tokens(folder, result["ids"]), (arch, text)


@pytest.mark.node
def test_a_config_transformers_js_does_not_know_is_given_as_its_plain_decoder(tmp_path):
    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", "mixtral", config=config_for("mixtral"))
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    written = json.loads((tmp_path / "package" / "config.json").read_text())
    assert written["model_type"] == "llama" and written["mlx2onnx"]["source_model_type"] == "mixtral"
    assert (
        written["num_hidden_layers"] == 2
        and written["vocab_size"] == json.loads((folder / "config.json").read_text())["vocab_size"]
    )
    kept = zoo.write_model_folder(tmp_path / "qwen3", "qwen3")
    cli("export", kept, "-o", tmp_path / "qwen3-package", cwd=tmp_path, check_rc=0)
    written = json.loads((tmp_path / "qwen3-package" / "config.json").read_text())
    assert written.pop("transformers.js_config") == {"dtype": {"model": "fp32"}}  # where its defaults find the graph
    assert written == json.loads(
        (kept / "config.json").read_text()
    )  # a type transformers.js runs as it is: the source's own config


def test_a_model_module_that_exits_is_the_users_code(tmp_path, monkeypatch):
    """mlx-lm's olmo module calls sys.exit(1) when ai2-olmo is missing: exit 4 (the user's
    code), not 1 (a parity mismatch)."""
    import mlx_lm.utils

    from mlx2onnx.cli import main
    from mlx2onnx.errors import UserFunctionError

    folder = zoo.write_model_folder(tmp_path / "folder", "llama")

    def exits(*args, **kwargs):
        raise SystemExit(1)

    monkeypatch.setattr(mlx_lm.utils, "load_model", exits)
    with pytest.raises(UserFunctionError, match="stopped the program"):
        load_model_folder(str(folder))
    assert main(["export", str(folder), "-o", str(tmp_path / "package"), "-q"]) == 4
