"""A one-line progress display on stderr for the command line."""

from __future__ import annotations

import itertools
import sys
import threading
import time


class Progress:
    """A one-line spinner on stderr with the current stage; silent unless stderr is a TTY.

    ``stage(text)`` is a context manager; ``update(text)`` changes the text in place (for
    counters such as ``12/140 primitives``).
    """

    FRAMES = "|/-\\"

    def __init__(self, quiet: bool = False, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self._text = ""
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def stage(self, text: str):
        progress = self

        class _Stage:
            def __enter__(self_inner):
                progress.update(text)
                return progress

            def __exit__(self_inner, *exc):
                progress.update("")
                return False

        return _Stage()

    def update(self, text: str) -> None:
        if not self.enabled:
            return
        with self._lock:
            self._text = text
        if text and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._spin, daemon=True)
            self._thread.start()
        if not text:
            self.close()

    def close(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self.stream.write("\r\033[K")
            self.stream.flush()

    def _spin(self) -> None:
        for frame in itertools.cycle(self.FRAMES):
            if self._stop.wait(0.1):
                return
            with self._lock:
                text = self._text
            elapsed = time.monotonic() - self._start
            self.stream.write(f"\r\033[K{frame} {text} ({elapsed:.1f}s)")
            self.stream.flush()
