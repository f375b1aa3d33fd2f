"""A text-generation package's extra dtype files (``--dtype``), by transformers.js's names:
each is traced from the model made over in MLX (it computes what MLX computes for that
dtype), measured against the folder's model (recorded in config.json and the model card),
checked again by ``mlx2onnx check`` against a share the user sets, and loaded by its name
in a browser."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support import zoo
from tests.support.browser import run_page
from tests.support.commands import inprocess

pytestmark = pytest.mark.third_party  # the MLX packages of tests/third_party.txt and mlx-lm write the folders

EXTRA = ["fp16", "q8", "q4", "q4f16"]
FILES = {"fp16": "model_fp16.onnx", "q8": "model_quantized.onnx", "q4": "model_q4.onnx", "q4f16": "model_q4f16.onnx"}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from mlx2onnx.tasks import export_folder

    root = tmp_path_factory.mktemp("dtypes")
    folder = zoo.write_model_folder(root / "folder", "llama")
    return root, folder, export_folder(folder, root / "package", dtypes=["fp32", *EXTRA])


@pytest.mark.slow
def test_each_dtype_file_is_the_model_made_over_in_mlx(made):
    _, _, package = made
    assert sorted(p.name for p in (package / "onnx").glob("*.onnx")) == sorted(["model.onnx", *FILES.values()])
    config = json.loads((package / "config.json").read_text())
    assert config["transformers.js_config"]["dtype"] == {"model": "fp32"}  # the default stays the folder's own graph
    found = config["mlx2onnx"]["dtype_files"]
    assert {d: e["file"] for d, e in found.items()} == {d: f"onnx/{f}" for d, f in FILES.items()}
    # against the MLX model each was traced from: float32 arithmetic exact, float16 within half precision
    assert found["q8"]["max_logit_error_vs_mlx_same_dtype"] < 1e-3
    assert found["q4"]["max_logit_error_vs_mlx_same_dtype"] < 1e-3
    assert found["fp16"]["max_logit_error_vs_mlx_same_dtype"] < 0.2
    assert found["q4f16"]["max_logit_error_vs_mlx_same_dtype"] < 1.0
    # against the folder's model: what the dtype changes (4 bits of random weights change a lot)
    assert found["q4"]["max_logit_gap"] > 1.0 and found["fp16"]["token_agreement"] > found["q4"]["token_agreement"]
    card = (package / "README.md").read_text()
    for dtype, entry in found.items():
        assert f"| `{entry['file']}` | {dtype} |" in card and f"{entry['token_agreement']:.0%} of" in card


def test_check_measures_each_dtype_file_against_a_share_the_user_sets(made, tmp_path, capsys):
    root, folder, package = made
    code, out, err = inprocess("check", package, folder, "--min-agreement", "0.3", "-q", cwd=root, capsys=capsys)
    assert code == 0 and out.count("teacher-forced tokens equal MLX's") == 4, out + err
    code, out, _ = inprocess("check", package, folder, "--min-agreement", "1", "-q", cwd=root, capsys=capsys)
    assert code == 1 and "onnx/model_q4.onnx (q4): " in out and "FAIL" in out
    broken = tmp_path / "broken"  # a wrong graph under the fp16 name: its agreement drops, the check fails it
    shutil.copytree(package, broken)
    shutil.copy(package / "onnx" / "model_q4.onnx", broken / "onnx" / "model_fp16.onnx")
    code, out, _ = inprocess("check", broken, folder, "-q", "--json", cwd=root, capsys=capsys)
    rows = {row["dtype"]: row for row in json.loads(out)["dtype_files"]}
    assert code == 1 and not rows["fp16"]["passed"] and rows["fp16"]["token_agreement"] < 0.9


def test_dtypes_other_packages_do_not_serve_are_refused(made, tmp_path, capsys):
    root, folder, _ = made
    code, _, err = inprocess("export", folder, "-o", tmp_path / "p", "--dtype", "int3", cwd=root, capsys=capsys)
    assert code == 2 and "'int3' is not one of transformers.js's file dtypes" in err
    quantized = zoo.write_model_folder(tmp_path / "q", "llama", bits=4)
    for dtype in ("q8", "fp16"):  # other weights than the folder's
        code, _, err = inprocess("export", quantized, "-o", tmp_path / "p", "--dtype", dtype, cwd=root, capsys=capsys)
        assert code == 2 and "quantized already (4 bits)" in err and "q4 and q4f16 keep them" in err, err
        assert not (tmp_path / "p").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "bits, dtype, named", [(4, None, "q4"), (8, None, "q8"), (None, "float16", "fp16"), (4, "float16", "q4f16")]
)
def test_the_folders_own_graph_is_named_by_what_it_holds(tmp_path, capsys, bits, dtype, named):
    """A 4-bit folder's package holds model_q4.onnx, an 8-bit one's model_quantized.onnx, a
    float16 one's model_fp16.onnx: the files transformers.js users ask for by those names;
    config.json's dtype and genai's filename name it, and the check opens it."""
    import mlx.core as mx

    folder = zoo.write_model_folder(
        tmp_path / "folder", "llama", bits=bits, group_size=32, dtype=dtype and getattr(mx, dtype)
    )
    more = ["--dtype", "q4f16"] if named == "q4" else []  # a file of the same weights at float16 beside it
    check = [] if named == "q4f16" else ["--check"]  # half-precision 4-bit random weights: test_trained_models
    code, out, err = inprocess("export", folder, "-o", tmp_path / "p", *check, *more, cwd=tmp_path, capsys=capsys)
    assert code == 0 and ("package parity PASSED" in out or not check), out + err
    file = FILES[named]
    assert sorted(p.name for p in (tmp_path / "p" / "onnx").glob("*.onnx")) == sorted(
        [file, *(FILES[d] for d in more[1:])]
    )
    config = json.loads((tmp_path / "p" / "config.json").read_text())
    assert config["transformers.js_config"]["dtype"] == {"model": named}
    assert (
        json.loads((tmp_path / "p" / "genai_config.json").read_text())["model"]["decoder"]["filename"] == f"onnx/{file}"
    )
    assert f"| `onnx/{file}` | {named} |" in (tmp_path / "p" / "README.md").read_text()
    if more:
        assert config["mlx2onnx"]["dtype_files"]["q4f16"]["token_agreement"] > 0.5


GENERATE = """
const { AutoTokenizer, AutoModelForCausalLM } = transformers;
const out = {};
const tokenizer = await AutoTokenizer.from_pretrained("pkg");
const inputs = tokenizer(%s);
for (const dtype of %s) {
  try {
    const model = await AutoModelForCausalLM.from_pretrained("pkg", { dtype, ...%s });
    const ids = await model.generate({ ...inputs, max_new_tokens: 12, do_sample: false });
    out[dtype] = { ids: Array.from(inputs.input_ids.data, Number), tokens: Array.from(ids.data, Number) };
  } catch (error) { out[dtype] = { error: String(error) }; }
}
return out;
"""


@pytest.mark.node
@pytest.mark.browser
@pytest.mark.parametrize("device", ["wasm", "webgpu"])
def test_each_dtype_file_loads_by_its_name_in_chromium(made, device):
    """transformers.js in a page loads each file by its dtype name and generates the greedy
    tokens plain onnxruntime generates with that file. SwiftShader's WebGPU has no
    shader-f16: there transformers.js refuses the fp16 file and onnxruntime-web's kernels
    the q4f16 file's float16 activations, each saying so."""
    from mlx2onnx.llm.check import package_generate
    from mlx2onnx.verify.session import open_session

    _, _, package = made
    options = {} if device == "wasm" else {"device": "webgpu"}
    heard = run_page(
        GENERATE % (json.dumps(zoo.PACKAGE_TEXTS[0]), json.dumps(["fp32", *EXTRA]), json.dumps(options)),
        {"pkg": package},
        webgpu=device == "webgpu",
    )
    for dtype, found in heard.items():
        if device == "webgpu" and dtype in ("fp16", "q4f16"):
            assert "does not support fp16" in found.get(
                "error", ""
            ) or "requires f16 but the device does not support it" in found.get("error", ""), found
            continue
        assert "error" not in found, (dtype, found)
        session = open_session(str(package / "onnx" / FILES.get(dtype, "model.onnx")), "all")
        want = package_generate(session, [found["ids"]], 12)[0][0].tolist()
        eos = json.loads((package / "generation_config.json").read_text())["eos_token_id"]
        want = want[: want.index(eos) + 1] if eos in want else want  # where transformers.js stops
        assert found["tokens"][len(found["ids"]) :] == want, dtype
