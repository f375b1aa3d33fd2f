"""An export killed by SIGTERM while it writes leaves nothing behind (no hidden staging
folder, no partial model), as Ctrl-C does; run in a subprocess that is really signalled."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

WRITER = """
import mlx.core as mx, mlx2onnx, sys
w = mx.random.normal((4096, 16384))  # 256 MiB of weights: the write takes a while
mx.eval(w)
print("ready", flush=True)
mlx2onnx.Exporter(path=sys.argv[1], external_data=True).export(lambda x: x @ w, mx.ones((2, 4096)))
print("finished", flush=True)
"""


def _script_and_out(tmp_path, source: str):
    """The program written to a file, and the empty folder it writes into."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(source))
    out = tmp_path / "out"
    out.mkdir()
    return script, out


@pytest.mark.slow
def test_sigterm_while_writing_removes_the_staging_folder(tmp_path):
    script, out = _script_and_out(tmp_path, WRITER)
    proc = subprocess.Popen([sys.executable, str(script), str(out / "big.onnx")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 120
    while not any(p.name.endswith(".tmp") for p in out.iterdir()):  # the staging folder exists: writing
        assert proc.poll() is None and time.monotonic() < deadline, "the export ended before it was signalled"
        time.sleep(0.005)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    assert proc.returncode == -signal.SIGTERM
    assert list(out.iterdir()) == []


SWALLOWED = """
import os, signal, sys, time
from pathlib import Path
from mlx2onnx.io.saving import staging_folder
with staging_folder(Path(sys.argv[1]), ".big.") as staging:
    (staging / "big.onnx").write_bytes(b"partial")
    try:  # C code running when the signal lands (numpy's tofile) may replace its exception
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except BaseException as exc:
        raise TypeError("expected str, bytes or os.PathLike object, not BufferedWriter") from None
print("finished", flush=True)
"""


@pytest.mark.slow
def test_sigterm_whose_exception_is_replaced_still_ends_the_process_by_sigterm(tmp_path):
    script, out = _script_and_out(tmp_path, SWALLOWED)
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert "finished" not in proc.stdout
    assert list(out.iterdir()) == []
