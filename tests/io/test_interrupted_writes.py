"""Every writing command, interrupted or failing at each of its writes, leaves its output as
it was before or complete, never partial, and exits with the code that says so (docs/cli.md):
an injected I/O error at each file-system call that writes (exit 5), Ctrl-C at each of them
(exit 130), a disk that fills up part-way (a small tmpfs; exit 5), and SIGTERM from outside
at points across the run (ended by SIGTERM)."""

from __future__ import annotations

import builtins
import errno
import io
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.io.test_user_files import snapshot
from tests.support import zoo
from tests.support.commands import COMMAND, inprocess

WRITE_ERROR, INTERRUPTED = 5, 130


class Injector:
    """Counts the calls that write to the file system and raises ``fault`` at call ``at``
    (None: only count). Patched: open for writing, os.replace / rename / mkdir,
    tempfile.mkdtemp, shutil.copy2 / copyfile, Path.write_text / write_bytes."""

    def __init__(self, monkeypatch, at: int | None, fault: type[BaseException]):
        self.calls, self.at, self.fault, self.where = 0, at, fault, []
        for owner, name in (
            (os, "replace"),
            (os, "rename"),
            (tempfile, "mkdtemp"),
            (shutil, "copy2"),
            (shutil, "copyfile"),
            (pathlib.Path, "write_text"),
            (pathlib.Path, "write_bytes"),
        ):
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), f"{owner.__name__}.{name}"))
        monkeypatch.setattr(
            os,
            "mkdir",
            self._wrap(
                os.mkdir,
                "os.mkdir",  # a folder made, not one that exists
                writes=lambda args, kwargs: not os.path.exists(args[0]),
            ),
        )
        opener = self._wrap(builtins.open, "open", writes=lambda args, kwargs: _writing(args, kwargs))
        monkeypatch.setattr(builtins, "open", opener)
        monkeypatch.setattr(io, "open", opener)

    def _wrap(self, real, name, writes=lambda args, kwargs: True):
        def call(*args, **kwargs):
            if writes(args, kwargs):
                self.calls += 1
                self.where.append(f"{name} {args[0] if args else kwargs}")
                if self.calls == self.at:
                    if self.fault is OSError:
                        raise OSError(errno.EIO, "injected I/O error", str(args[0]) if args else None)
                    raise self.fault()
            return real(*args, **kwargs)

        return call


def _writing(args, kwargs) -> bool:
    """Whether an open() call opens a file for writing (not tempfile's probe of a folder)."""
    mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
    target = args[0] if args else kwargs.get("file")
    return any(c in mode for c in "wax+") and not isinstance(target, int) and not os.path.isdir(target)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder with an mlx-lm model folder, and the package and model an earlier export wrote."""
    from mlx2onnx.tasks import export_folder

    root = tmp_path_factory.mktemp("place")
    zoo.write_model_folder(root / "src", "llama")
    (root / "notes.txt").write_text("the user's")
    export_folder(root / "src", root / "pkg")
    return root


COMMANDS = {
    "package": ["export", "src", "-o", "pkg/", "--overwrite"],
    "model": ["export", "mlp", "-o", "m.onnx", "--overwrite"],
}


def _faulted(place, monkeypatch, capsys, command, at, fault):
    with monkeypatch.context() as patch:
        injector = Injector(patch, at, fault)
        code, _, err = inprocess(*COMMANDS[command], "-q", cwd=place, capsys=capsys)
    return code, err, injector


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_fault_at_each_write_leaves_the_output_as_it_was(place, monkeypatch, capsys, command):
    code, err, _ = _faulted(place, monkeypatch, capsys, command, None, OSError)  # the output exists: a replacement
    assert code == 0, err
    before = snapshot(place)
    code, err, counted = _faulted(place, monkeypatch, capsys, command, None, OSError)
    assert code == 0 and counted.calls >= 3, (err, counted.where)
    replaced = snapshot(place)
    assert replaced.keys() == before.keys()
    faults = [(at, OSError) for at in range(1, counted.calls + 1)]
    if command == "model":  # Ctrl-C at each write too (in the package export it takes the same path)
        faults += [(at, KeyboardInterrupt) for at in range(1, counted.calls + 1)]
    for at, fault in faults:
        code, err, _ = _faulted(place, monkeypatch, capsys, command, at, fault)
        where = f"{fault.__name__} at write {at} of {counted.calls} ({counted.where[at - 1]})"
        assert code == (WRITE_ERROR if fault is OSError else INTERRUPTED), (where, err)
        assert snapshot(place) == replaced, where  # as it was: no partial file, no staging folder
        if fault is OSError:
            assert "injected I/O error" in err and "the output is as it was" in err, err


@pytest.mark.slow
def test_the_decoder_files_are_kept_when_a_write_fails(tmp_path, monkeypatch):
    from mlx2onnx.llm import export_decoder

    model = zoo.mlx_lm_model("llama")
    export_decoder(model, tmp_path / "out", prompt_length=4, max_length=16)
    before = snapshot(tmp_path)
    with monkeypatch.context() as patch:
        counted = Injector(patch, None, OSError)
        export_decoder(model, tmp_path / "out", prompt_length=4, max_length=16, overwrite=True)
    after = snapshot(tmp_path)
    assert after.keys() == before.keys()
    for at in range(1, counted.calls + 1):
        with monkeypatch.context() as patch, pytest.raises(OSError, match="injected"):
            Injector(patch, at, OSError)
            export_decoder(model, tmp_path / "out", prompt_length=4, max_length=16, overwrite=True)
        assert snapshot(tmp_path) == after, counted.where[at - 1]


def _mounted_tmpfs(where: Path, size: int) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.9])
def test_a_disk_that_fills_up_leaves_the_output_as_it_was(place, tmp_path, fraction):
    """The package export onto a tmpfs with room for the old package and a ``fraction`` of
    the new one: exit 5 naming the disk, the old package byte for byte."""
    page = 4096  # what tmpfs counts a file in
    size = sum(-(-p.stat().st_size // page) * page for p in (place / "pkg").rglob("*") if p.is_file())
    disk = tmp_path / "disk"
    if not _mounted_tmpfs(disk, size + int(fraction * size) // page * page):
        pytest.skip("mounting a tmpfs needs root on Linux")
    try:
        shutil.copytree(place / "pkg", disk / "pkg")
        before = snapshot(disk)
        done = subprocess.run(
            [*COMMAND, "export", str(place / "src"), "-o", str(disk / "pkg"), "--overwrite", "-q"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == WRITE_ERROR, done.stderr
        assert "No space left on device" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert snapshot(disk) == before
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.5, 0.75, 0.9])
def test_sigterm_at_any_point_leaves_the_package_as_it_was_or_complete(place, tmp_path, delay):
    """SIGTERM at a fraction ``delay`` of the measured run of a package export with
    --overwrite: ended by SIGTERM (or finished), the package old or new and whole."""
    work = tmp_path / "work"
    shutil.copytree(place / "pkg", work / "pkg")
    old = snapshot(work)
    started = time.monotonic()
    run = [*COMMAND, "export", str(place / "src"), "-o", str(work / "pkg"), "--overwrite", "-q"]
    assert subprocess.run(run, capture_output=True, timeout=300).returncode == 0
    took = time.monotonic() - started
    new = snapshot(work)
    proc = subprocess.Popen(run, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(delay * took)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=300)
    assert proc.returncode in (-signal.SIGTERM, 0)
    after = snapshot(work)
    assert after in (old, new) or after.keys() == new.keys() and _whole(work / "pkg"), sorted(after)
    assert [p.name for p in work.iterdir()] == ["pkg"]


def _whole(package: Path) -> bool:
    import onnx

    onnx.checker.check_model(str(package / "onnx" / "model.onnx"), full_check=True)
    return True
