"""The wheel a user installs holds every file of the source tree: the package is built
the way pip builds it for ``pip install .`` and its contents compared with the folders."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# source folder -> its place in the wheel (setup.py maps the three folders to one package)
FOLDERS = {"mlx2onnx": "mlx2onnx", "op_mappings": "mlx2onnx/op_mappings", "models": "mlx2onnx/models"}


def source_files() -> dict[str, Path]:
    """Every file git tracks under the package folders, by its path inside the wheel."""
    out = {}
    for line in tracked(*FOLDERS):
        folder, _, rest = line.partition("/")
        out[f"{FOLDERS[folder]}/{rest}"] = ROOT / line
    return out


def tracked(*paths: str) -> list[str]:
    listed = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return listed.stdout.splitlines()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """The wheel built from a copy of the tracked files (a checkout's own build/ folder
    would lend the build files that discovery no longer finds)."""
    source, target = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for line in tracked():
        (source / line).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / line, source / line)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w", str(target)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (path,) = target.glob("mlx2onnx-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.slow
def test_the_wheel_holds_every_source_file(wheel):
    names = set(wheel.namelist())
    expected = source_files()
    assert [p for p in expected if p.endswith(".py")], "no Python modules found: the folder map is stale"
    missing = sorted(p for p in expected if p not in names)
    assert not missing, f"the wheel lacks {missing}: setup.py's discovery or package-data misses them"
    for inside, source in expected.items():
        assert wheel.read(inside) == source.read_bytes(), inside


def test_the_wheel_holds_nothing_outside_the_package(wheel):
    stray = sorted(n for n in wheel.namelist() if not n.startswith(("mlx2onnx/", "mlx2onnx-")))
    assert not stray, f"the wheel installs files outside the mlx2onnx package: {stray}"


def test_the_wheel_declares_the_command_and_the_pytest_plugin(wheel):
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "mlx2onnx = mlx2onnx.cli:main" in text
    assert "mlx2onnx = mlx2onnx.testing.pytest_plugin" in text


def test_ci_runs_the_readmes_two_commands():
    """.ci/run runs README command 1 (the user's non-editable install and main job) and
    command 2 (the test install and suite) verbatim, in that order, then ruff."""
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start") :]
    commands = [block.split("\n", 1)[1].strip() for block in quick.split("```bash")[1:3]]
    commands = [c[: c.index("```")].strip() for c in commands]
    assert "pip install . " in commands[0] and "-e" not in commands[0].split("&&")[1], commands[0]
    ci = [line for line in (ROOT / ".ci/run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-3:-1] == commands, "the README's commands and .ci/run differ"
    assert ci[-1] == ".venv/bin/ruff check . && .venv/bin/ruff format --check .", "ruff is not the last step of .ci/run"


def test_the_readme_is_a_front_door():
    """README.md stays a front page (the reference lives in docs/): at most 220 lines, and
    every docs/ page it points to exists."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 220, f"README.md has {len(readme.splitlines())} lines"
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)", readme))
    assert linked and all((ROOT / page).is_file() for page in linked), linked
    assert {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")} <= linked, "a docs/ page the README does not list"
