"""The command examples in README.md and docs/*.md run as written, and print
what the docs show: each documented line of a `wrote`, input/output or record listing is
in the command's output (lines with measured errors or versions are not compared)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_COMPARED = re.compile(r"^(wrote |  input |  output |\s+\d+  [A-Z])")


def _blocks(path: Path) -> list[tuple[list[str], list[str]]]:
    """(commands, documented output lines) of each fenced block that starts with `$ `."""
    found, blocks, current = [], [], None
    for line in path.read_text().splitlines():
        if line.strip().startswith("```"):
            if current is None:
                current, indent = [], len(line) - len(line.lstrip())
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.append(line[indent:])
    for lines in blocks:
        if not lines or not lines[0].startswith("$ "):
            continue
        found.append(([x[2:] for x in lines if x.startswith("$ ")], [x for x in lines if not x.startswith("$ ")]))
    return found


DOCS = ["README.md", *(f"docs/{page.name}" for page in sorted((ROOT / "docs").glob("*.md")))]
EXAMPLES = [
    (doc, k, block)
    for doc in DOCS
    for k, block in enumerate(_blocks(ROOT / doc))
    if any(c.split()[0] in ("mlx2onnx", "python", "printf") for c in block[0])
    and not any("pip install" in c or "pytest" in c for c in block[0])
]


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    words = shlex.split(command)
    if words[0] == "mlx2onnx":
        words = [sys.executable, "-m", "mlx2onnx", *words[1:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
        if words[1:3] == ["-m", "scripts.generate_docs"]:
            words.append("--check")  # the docs test must not rewrite the committed pages
            return subprocess.run(words, capture_output=True, text=True, cwd=ROOT, timeout=600)
    if ">" in words:  # printf '...' > file
        target = cwd / words[words.index(">") + 1]
        out = subprocess.run(words[: words.index(">")], capture_output=True, text=True, cwd=cwd)
        target.write_text(out.stdout)
        return out
    return subprocess.run(words, capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("doc,k,block", EXAMPLES, ids=[f"{d}#{k}" for d, k, _ in EXAMPLES])
def test_documented_commands_print_what_the_docs_show(doc, k, block, tmp_path):
    commands, documented = block
    output = ""
    for command in commands:
        done = _run(command, tmp_path)
        assert done.returncode == 0, f"{doc}: `{command}` exited {done.returncode}:\n{done.stderr[-2000:]}"
        output += done.stdout
    for line in documented:
        if _COMPARED.match(line):
            assert line.rstrip() in output.replace(str(tmp_path) + "/", ""), (
                f"{doc}: `{commands[-1]}` no longer prints\n  {line}\nit printed:\n{output[-3000:]}"
            )
