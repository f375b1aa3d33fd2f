"""mlx-lm folders whose layers carry recurrent states -> packages, run in both runtimes.

A recurrent layer's ``ArraysCache`` (a convolution window, a scan state) is carried as
graph inputs ``past_conv.<i>`` (``past_ssm.<i>``, ...) and outputs ``present_conv.<i>``;
a ``CacheList`` carries its members'. Each package is checked with ``check_package``
(onnxruntime) and run by onnxruntime-genai and transformers.js with their own tokenizers
against mlx-lm's greedy tokens; where the package's config.json says a runtime cannot run
it, the test holds the export to that reason instead (and that list is part of what is
tested: a runtime that could run it must not be declared unable).
"""

from __future__ import annotations

import json
import re

import mlx.core as mx
import numpy as np
import pytest

from mlx2onnx.targets import load_model_folder
from tests.packages.test_packages import NEW_TOKENS, PROMPTS, mlx_tokens, source_ids
from tests.support import zoo
from tests.support.commands import cli
from tests.support.harness import ort_session

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

# architecture -> (what its caches carry, what the export says a runtime cannot do: None where it runs)
ARCHITECTURES = {
    "lfm2": ("a convolution state beside attention: lfm2 in both runtimes", {}),
    "granitemoehybrid": ("a convolution and an SSM state beside attention", {}),
    "falcon_h1": ("a CacheList per layer: mamba states and attention keys in one layer", {}),
    "jamba": (
        "a scan that reads padding: rows of a batch one at a time",
        {"left_padded_batches": "read the padding of a left-padded row"},
    ),
    "qwen3_next": (
        "a gated-delta scan whose mask the loop recovery cannot carry: run unmasked, prompts one at a time",
        {"left_padded_batches": "could not be exported with its loop"},
    ),
    "mamba": (
        "no attention at all: transformers.js counts tokens from an attention cache",
        {"transformers.js": "no attention layer", "left_padded_batches": "read the padding"},
    ),
    "bailing_moe_linear": (
        "a rank-4 linear-attention state beside attention: not genai's rank-3 lfm2 window",
        {"onnxruntime-genai": "state is of rank 4", "left_padded_batches": "read the padding"},
    ),
    "rwkv7": (
        "three states per layer, a count genai does not carry, and no attention",
        {
            "transformers.js": "no attention layer",
            "onnxruntime-genai": "carry 3 states",
            "left_padded_batches": "read the padding",
        },
    ),
}


# configs other than the sweep's tiny one: bailing_moe_linear's layer_group_size 2 makes every other
# layer a linear-attention one (the sweep's 1 makes every layer attention)
CONFIGS = {"bailing_moe_linear": zoo.RECURRENT_CONFIGS["bailing_moe_linear"]}


@pytest.mark.node
@pytest.mark.genai
@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_recurrent_architectures_run_as_packages(tmp_path, arch):
    from mlx2onnx.llm.check import check_package
    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", arch, config=CONFIGS.get(arch) or config_for(arch))
    package = tmp_path / "package"
    out = cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    notes = json.loads((package / "config.json").read_text()).get("mlx2onnx", {})
    expected = ARCHITECTURES[arch][1]
    said = {k: v for k, v in notes.items() if k in ("transformers.js", "onnxruntime-genai", "left_padded_batches")}
    assert set(said) == set(expected), notes
    for key, words in expected.items():
        assert words in said[key], said[key]
        assert words in out.stdout  # the export reports it
    assert (package / "genai_config.json").is_file() == ("onnxruntime-genai" not in said)
    result = check_package(package, folder, [[5, 6, 7, 8, 9, 10, 11], [20, 21, 22]])
    assert result["passed"], json.dumps(result, indent=1)
    assert result["batch"].startswith("one prompt at a time") == ("left_padded_batches" in said)
    if "onnxruntime-genai" not in said:
        og = pytest.importorskip("onnxruntime_genai")
        model = og.Model(str(package))
        for text in PROMPTS:
            ids = source_ids(folder, text)
            assert zoo.genai_tokens(model, ids, NEW_TOKENS) == mlx_tokens(folder, ids), (arch, text)
    if "transformers.js" not in said and zoo.node_available():
        for text, got in zip(PROMPTS, zoo.transformers_js_tokens(package, NEW_TOKENS, PROMPTS)):
            assert got["tokens"] == mlx_tokens(folder, got["ids"]), (arch, text)


@pytest.mark.slow
def test_a_scan_that_reads_padding_is_found_and_the_package_says_so(tmp_path):
    """mamba's scan does not mask padding: in a left-padded batch the short row's logits
    are not its logits alone (measured in onnxruntime, as the note claims), while lfm2's
    masked convolution gives the same logits either way (no note)."""

    from mlx2onnx.llm.check import package_generate
    from tests.support.mlx_lm_configs import config_for

    for arch, noted in (("mamba", True), ("lfm2", False)):
        folder = zoo.write_model_folder(tmp_path / arch, arch, config=config_for(arch))
        package = tmp_path / f"{arch}-package"
        cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
        notes = json.loads((package / "config.json").read_text()).get("mlx2onnx", {})
        assert ("left_padded_batches" in notes) == noted
        session = ort_session(str(package / "onnx" / "model.onnx"))
        rng = np.random.default_rng()
        long, short = rng.integers(3, 200, 7).tolist(), rng.integers(3, 200, 3).tolist()
        _, padded = package_generate(session, [long, short], 1)
        _, alone = package_generate(session, [short], 1)
        differs = not np.allclose(padded[1], alone[0], rtol=1e-4, atol=1e-4 * np.abs(alone).max())
        assert differs == noted, arch
        want = np.array(load_model_folder(str(folder)).fun(mx.array([short]))[0, -1])
        np.testing.assert_allclose(alone[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_a_config_with_infinities_is_strict_json(tmp_path):
    """mamba2's time_step_limit is [0, inf]: JavaScript's JSON.parse rejects Python's
    ``Infinity``, so the package's config.json writes the largest float64."""
    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", "mamba2", config=config_for("mamba2"))
    assert "Infinity" in (folder / "config.json").read_text()
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    text = (tmp_path / "package" / "config.json").read_text()
    written = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in config.json"))
    assert written["time_step_limit"][1] == np.finfo(np.float64).max


@pytest.mark.slow
def test_state_inputs_are_named_for_the_runtimes(tmp_path):
    """States: past_conv.<i> / past_ssm.<i> -> present_conv.<i> / present_ssm.<i>, fixed
    sizes after a batch axis named batch_size (transformers.js sizes its first, empty
    cache from the names it knows); keys and values keep past_key_values.<i>.key."""
    import onnx

    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", "granitemoehybrid", config=config_for("granitemoehybrid"))
    cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path, check_rc=0)
    graph = onnx.load(str(tmp_path / "package" / "onnx" / "model.onnx")).graph
    dims = {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*graph.input, *graph.output]
    }
    states = [n for n in dims if re.match(r"(past|present)_(conv|ssm)\.\d+$", n)]
    assert sorted(states) == ["past_conv.0", "past_ssm.0", "present_conv.0", "present_ssm.0"], list(dims)
    for name in states:
        assert dims[name][0] == "batch_size" and all(isinstance(d, int) and d > 0 for d in dims[name][1:]), dims[name]
    assert dims["past_key_values.1.key"][:3] == ["batch_size", 2, "past_sequence"]
    config = json.loads((tmp_path / "package" / "config.json").read_text())
    assert config["model_type"] == "granitemoehybrid" and config["layer_types"] == ["mamba", "attention"]
    genai = json.loads((tmp_path / "package" / "genai_config.json").read_text())["model"]["decoder"]
    assert (
        genai["inputs"]["past_conv_names"] == "past_conv.%d"
        and genai["inputs"]["past_recurrent_names"] == "past_ssm.%d"
    )


@pytest.mark.slow
def test_a_model_that_starts_otherwise_than_from_zero_states_is_refused(tmp_path):
    """recurrent_gemma's RG-LRU does not scale its first input when its cache is empty: a
    package's zero initial states would give other logits for the first tokens (10.9 off
    at a 3-token prompt), so the export refuses it, naming why, and writes nothing."""
    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", "recurrent_gemma", config=config_for("recurrent_gemma"))
    out = cli("export", folder, "-o", tmp_path / "package", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    assert re.search(r"start without a state otherwise than from zero states.*logits \S+ off", out.stderr), out.stderr
    assert not (tmp_path / "package").exists()


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mamba", "lfm2"])
def test_llm_generate_drives_any_package(tmp_path, arch):
    """mlx2onnx.llm.generate on a package folder: mlx-lm's greedy tokens for prompts of
    different lengths (one padded batch for lfm2, one at a time for mamba, as each package
    records), and a clear error for a folder that is no package."""
    import mlx2onnx.llm as llm
    from mlx2onnx.errors import ExportOptionError
    from tests.support.mlx_lm_configs import config_for

    folder = zoo.write_model_folder(tmp_path / "folder", arch, config=config_for(arch))
    package = tmp_path / "package"
    cli("export", folder, "-o", package, cwd=tmp_path, check_rc=0)
    model = load_model_folder(str(folder)).fun
    rng = np.random.default_rng()
    prompts = [rng.integers(3, 200, 6).tolist(), rng.integers(3, 200, 2).tolist()]
    got = llm.generate(package, prompts, 5)
    for row, prompt in zip(got, prompts):
        np.testing.assert_array_equal(row, llm.mlx_generate(model, mx.array([prompt]), 5)[0])
    with pytest.raises(ExportOptionError, match="neither a DecoderExport nor a package folder"):
        llm.generate(folder, prompts, 2)
