"""The ``mlx2onnx`` command as the tests run it: the console script in a subprocess
(:func:`cli`), or ``mlx2onnx.cli.main`` in this process (:func:`inprocess`, the same code
behind the script, for the variations of a path a subprocess already exercised)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from mlx2onnx.cli import app as cli_module

_SCRIPT = shutil.which("mlx2onnx", path=os.path.dirname(sys.executable))
COMMAND = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "mlx2onnx"]


def cli(*args, cwd, check_rc=None):
    """The console script run from ``cwd``; ``check_rc``: the exit status it must give."""
    proc = subprocess.run([*COMMAND, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, f"rc={proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def inprocess(*args, cwd, capsys):
    """``mlx2onnx.cli.main`` in this process, run from ``cwd``: (rc, stdout, stderr)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        rc = cli_module.main([str(a) for a in args])
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return rc, out.out, out.err
