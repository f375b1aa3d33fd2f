"""Nothing a user has is lost: every command that writes is tried on the folders and files
a user may point it at (a folder of their own, the model folder itself, the current
directory, a file, a package they added files to), and on the hostile inputs a user may
hand it (cut-short or corrupt weights, a config of another kind, a missing tokenizer, a hub
id, an ONNX file where a target goes, a path that does not exist). Each refusal is one
line with the documented exit code, and every file under the test's folder is byte for
byte what it was, with nothing added."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import onnx
import pytest

from tests.support import zoo
from tests.support.commands import inprocess

USAGE = 2


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (hidden ones too) with its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A user's folder: an mlx-lm model folder ``src/``, a note of theirs, a package mlx2onnx
    wrote (``pkg/``) and a model it wrote (``m.onnx``)."""
    root = tmp_path_factory.mktemp("home")
    zoo.write_model_folder(root / "src", "llama")
    (root / "mine.txt").write_text("the user's own notes")
    return root


def refused(home, capsys, *args, match: str, rc: int = USAGE, cwd: Path | None = None) -> str:
    """Run the command in ``home`` (or ``cwd``): it is refused with ``rc`` in one line that
    matches ``match``, and no file under ``home`` changed or appeared."""
    before = snapshot(home)
    code, _, err = inprocess(*args, "-q", cwd=cwd or home, capsys=capsys)
    assert code == rc, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlx2onnx: error: "), err
    assert match in lines[0], lines[0]
    assert snapshot(home) == before
    return lines[0]


# -- --overwrite replaces only what mlx2onnx wrote -----------------------------------------------
def test_overwrite_refuses_a_folder_of_the_users(home, capsys):
    (home / "foreign").mkdir(exist_ok=True)
    (home / "foreign" / "notes.txt").write_text("hi")
    refused(home, capsys, "export", "src", "-o", "foreign/", "--overwrite", match="mlx2onnx did not write")


def test_overwrite_refuses_the_model_folder_itself(home, capsys):
    line = refused(home, capsys, "export", "src", "-o", "src/", "--overwrite", match="is the model folder 'src'")
    assert "e.g. src_onnx/" in line


@pytest.mark.parametrize("out, where", [(".", "is the current directory"), ("..", "holds the current directory")])
def test_overwrite_refuses_the_current_directory_and_its_ancestors(home, capsys, out, where):
    refused(home, capsys, "export", "../src", "-o", out, "--overwrite", match=where, cwd=home / "src")
    refused(home, capsys, "export", "src", "-o", out, "--overwrite", match=where)


def test_overwrite_refuses_a_plain_file(home, capsys):
    (home / "afile").write_text("data")
    refused(home, capsys, "export", "src", "-o", "afile", "--overwrite", match="'afile' is a file, not a folder")
    (home / "m.onnx").write_text("not a model")
    refused(home, capsys, "export", "mlp", "-o", "m.onnx", "--overwrite", match="is not an ONNX model")
    foreign = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []), producer_name="pytorch")
    onnx.save(foreign, str(home / "m.onnx"))
    refused(home, capsys, "export", "mlp", "-o", "m.onnx", "--overwrite", match="written by 'pytorch'")
    (home / "m.onnx").unlink()
    (home / "m.onnx.data").write_text("someone's weights")
    refused(home, capsys, "export", "mlp", "-o", "m.onnx", "--overwrite", match="exists without the model 'm.onnx'")
    (home / "m.onnx.data").unlink()


@pytest.mark.slow
def test_overwrite_replaces_a_package_mlx2onnx_wrote_and_nothing_else(home, capsys):
    code, out, err = inprocess("export", "src", "-o", "pkg/", "-q", cwd=home, capsys=capsys)
    assert code == 0, err
    assert ".mlx2onnx.json" not in out  # the marker is not the user's business
    first = snapshot(home / "pkg")
    refused(
        home, capsys, "export", "src", "-o", "pkg/", match="pass overwrite=True (--overwrite) to replace the package"
    )
    code, _, err = inprocess("export", "src", "-o", "pkg/", "--overwrite", "-q", cwd=home, capsys=capsys)
    assert code == 0, err
    assert snapshot(home / "pkg").keys() == first.keys()
    assert not [p for p in home.iterdir() if p.name.startswith(".")]  # no staging folder left
    (home / "pkg" / "my_notes.md").write_text("mine")
    refused(
        home,
        capsys,
        "export",
        "src",
        "-o",
        "pkg/",
        "--overwrite",
        match="holds files mlx2onnx did not write there (my_notes.md)",
    )
    (home / "pkg" / "my_notes.md").unlink()
    marker = json.loads((home / "pkg" / ".mlx2onnx.json").read_text())
    assert marker["files"] == sorted(first)[1:]  # every file but the marker itself


def test_an_empty_folder_takes_a_package_without_overwrite(home, capsys):
    (home / "empty").mkdir()
    code, _, err = inprocess("export", "src", "-o", "empty/", "-q", cwd=home, capsys=capsys)
    assert code == 0, err
    assert (home / "empty" / "onnx" / "model.onnx").is_file()


def test_the_api_refuses_by_default_as_the_command_line_does(home):
    from mlx2onnx.errors import ExportOptionError
    from mlx2onnx.tasks import export_folder

    (home / "theirs").mkdir(exist_ok=True)
    (home / "theirs" / "notes.txt").write_text("hi")
    before = snapshot(home)
    with pytest.raises(ExportOptionError, match="is the model folder"):
        export_folder(home / "src", home / "src", overwrite=True)
    with pytest.raises(ExportOptionError, match="mlx2onnx did not write"):
        export_folder(home / "src", home / "theirs", overwrite=True)
    assert snapshot(home) == before


# -- hostile inputs: one line, the documented exit code, nothing written -----------------------
def _variant(home: Path, name: str) -> Path:
    """A copy of ``src`` as ``name`` (its files copied byte for byte)."""
    folder = home / name
    folder.mkdir()
    for path in (home / "src").iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    return folder


def _spoil(home: Path, case: str) -> Path:
    folder = _variant(home, case)
    weights = folder / "model.safetensors"
    if case == "truncated":
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    elif case == "corrupt":
        data = bytearray(weights.read_bytes())
        data[8:40] = b"\x00\xff" * 16
        weights.write_bytes(bytes(data))
    elif case == "mismatched":
        zoo.write_model_folder(home / "other", "llama", config=dict(zoo.LM_CONFIGS["llama"], hidden_size=32))
        weights.write_bytes((home / "other" / "model.safetensors").read_bytes())
    elif case == "no tokenizer":
        (folder / "tokenizer.json").unlink()
    elif case == "unknown model type":
        settings = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(dict(settings, model_type="no_such_model")))
    elif case == "pytorch folder":
        weights.rename(folder / "pytorch_model.bin")
    elif case == "config not an object":
        (folder / "config.json").write_text("[1, 2]")
    elif case == "header beyond the file":
        weights.write_bytes(struct.pack("<Q", 10**9) + b"{}")
    return folder


HOSTILE = {
    "truncated": "model.safetensors is cut short",
    "corrupt": "does not start with a safetensors header",
    "header beyond the file": "is cut short: its header alone should be",
    "mismatched": "mlx-lm cannot load",
    "no tokenizer": "has no tokenizer.json: onnxruntime-genai and transformers.js read the tokenizer",
    "unknown model type": "mlx-lm cannot load",
    "pytorch folder": "holds PyTorch weights (pytorch_model.bin)",
    "config not an object": "has no model_type",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_folder_gets_one_line_and_nothing_is_written(home, capsys, case):
    folder = _spoil(home, case)
    refused(home, capsys, "export", folder.name, "-o", f"{case}_pkg/", match=HOSTILE[case])
    if case != "no tokenizer":  # the graph alone needs no tokenizer
        refused(home, capsys, "export", folder.name, "-o", "graph.onnx", match=HOSTILE[case])


@pytest.mark.parametrize(
    "target, match",
    [
        ("./tiny-lama", "no such folder or file: './tiny-lama'"),
        ("model.onnx", "is an ONNX model, not something to export"),
        ("src/model.safetensors", "is a weights file: give the model folder"),
        ("mine.txt", "is a file, not a target"),
        ("pkg_made", "is an ONNX package, not an MLX model folder"),
    ],
)
def test_a_target_that_names_nothing_to_export(home, capsys, target, match):
    if target == "model.onnx" and not (home / "model.onnx").exists():
        assert inprocess("export", "mlp", "-o", "model.onnx", "-q", cwd=home, capsys=capsys)[0] == 0
    if target == "pkg_made" and not (home / "pkg_made").exists():
        assert inprocess("export", "src", "-o", "pkg_made/", "-q", cwd=home, capsys=capsys)[0] == 0
    refused(home, capsys, "export", target, "-o", "out_pkg/", match=match)
    refused(home, capsys, "inspect", target, match=match)


# -- answers that say what happened ---------------------------------------------------------
def test_export_of_a_folder_with_check_runs_the_package_check(home, capsys):
    code, out, err = inprocess("export", "src", "-o", "checked/", "--check", "-q", cwd=home, capsys=capsys)
    assert code == 0, err
    assert "wrote package checked" in out and "12 greedy tokens" in out and "package parity PASSED" in out


DROPOUT = """
import mlx.core as mx
import mlx.nn as nn


def build(seed=0):
    mx.random.seed(seed)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 4))  # left in training mode
    mx.eval(model.parameters())
    return model, (mx.random.normal((3, 8)),)
"""


def test_a_model_left_in_training_mode_fails_with_a_hint(tmp_path, capsys):
    (tmp_path / "dropping.py").write_text(DROPOUT)
    code, out, err = inprocess(
        "export", "dropping.py:build", "-o", "d.onnx", "--check", "-q", cwd=tmp_path, capsys=capsys
    )
    assert code == 1 and "parity FAILED" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("output ") and "dtype" in line)
    assert "an element passes when |onnxruntime - MLX| <= atol + rtol * |MLX|" in lines[header]
    assert lines[header + 1].split()[0] == "output_0"  # the header stands over the output rows
    assert "hint: the model draws random numbers" in out and "call model.eval() before exporting" in out
    assert "Skipping constant folding" not in err  # onnxscript's notice is not the user's business


def test_a_failed_comparison_shows_digits_that_tell_the_values_apart():
    import numpy as np

    from mlx2onnx.verify.compare import compare

    got = np.array([-0.2630233], np.float32)
    want = np.nextafter(got, np.float32(0))
    report = compare("y", got, want, "float32", (0.0, 0.0))
    value_text = report.worst.split(": ", 1)[1]
    shown_got, shown_want = (part.split()[-1] for part in value_text.split(", "))
    assert shown_got != shown_want and np.float32(shown_got) == got[0] and np.float32(shown_want) == want[0]


def test_a_weights_mismatch_does_not_send_the_user_to_localize(tmp_path, capsys):
    assert inprocess("export", "mlp", "-o", "mlp.onnx", "-q", cwd=tmp_path, capsys=capsys)[0] == 0
    code, out, _ = inprocess("check", "mlp.onnx", "mlp", "--model-seed", "3", "-q", cwd=tmp_path, capsys=capsys)
    assert code == 1 and "weights differ from the callable's" in out and "--localize" not in out


@pytest.mark.slow
def test_a_hub_id_exports_from_huggingface_hubs_cache(home, tmp_path):
    """``export ORG/NAME`` reads the model from huggingface_hub's cache as mlx-lm's load()
    does (a cache built here, HF_HUB_OFFLINE=1: no network); an id the cache lacks, or a
    revision it lacks, is one line, exit 2, and nothing written."""
    import os
    import shutil
    import subprocess

    from tests.support.commands import COMMAND

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "cache" / "models--mlx-community--tiny-llama"
    shutil.copytree(home / "src", repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "cache"))

    def run(*args):
        return subprocess.run(
            [*COMMAND, *args, "-q"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )

    done = run("export", "mlx-community/tiny-llama", "-o", "pkg/")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "pkg" / "README.md").read_text()  # the model card names the hub model it came from
    assert "base_model: mlx-community/tiny-llama" in card and "mlx2onnx check PACKAGE/ mlx-community/tiny-llama" in card
    done = run("check", "pkg", "mlx-community/tiny-llama")
    assert done.returncode == 0 and "package parity PASSED" in done.stdout, done.stdout + done.stderr
    before = snapshot(tmp_path)
    for args in (["mlx-community/no-such-model"], ["mlx-community/tiny-llama", "--revision", "v2"]):
        done = run("export", *args, "-o", "other/")
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "the Hugging Face hub did not give it" in done.stderr
    assert snapshot(tmp_path) == before


def test_the_model_card_of_every_task(tmp_path):
    from mlx2onnx.io.card import _TRANSFORMERS_JS, write_card

    for task in _TRANSFORMERS_JS:
        package = tmp_path / task
        (package / "onnx").mkdir(parents=True)
        (package / "onnx" / "model.onnx").write_bytes(b"graph")
        (package / "config.json").write_text(json.dumps({"mlx2onnx": {"task": task}}))
        write_card(package, tmp_path / "models--org--name" / "snapshots" / "abc")
        card = (package / "README.md").read_text()
        assert f"pipeline_tag: {task}" in card and "base_model: org/name" in card and "`onnx/model.onnx`" in card
