"""Shared benchmark helpers: timing, peak memory, OpenBLAS discovery, subprocess workers."""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Debian's libopenblas0-pthread (apt-get install -y libopenblas0-pthread).
OPENBLAS_CANDIDATES = [
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
    *glob.glob("/usr/lib/*/openblas-pthread/libopenblas.so.0"),
]
MLX_ONNX_VENV = Path(os.environ.get("MLX_ONNX_VENV", "/work/venv-mlxonnx"))


def openblas() -> str | None:
    for path in OPENBLAS_CANDIDATES:
        if os.path.exists(path):
            return path
    return None


def median_time(fn, repeats: int, warmup: int = 1, budget: float = 60.0) -> float:
    """Median wall time of ``fn()`` in seconds (fewer repeats when one call is slow)."""
    for _ in range(warmup):
        start = time.perf_counter()
        fn()
        first = time.perf_counter() - start
    if warmup and first * repeats > budget:
        repeats = max(1, int(budget / max(first, 1e-9)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def alternate(calls: dict, repeats: int, block: int = 3, budget: float = 240.0) -> dict:
    """Median seconds of each call, the calls timed in turn in blocks of ``block`` (a 50 ms
    pause before each block lets the other runtime's worker threads go idle), so the load
    of a shared machine affects them alike. Each call runs once first, untimed."""
    for call in calls.values():
        call()
    times = {key: [] for key in calls}
    deadline = time.perf_counter() + budget
    for _ in range(max(1, repeats // block)):
        for key, call in calls.items():
            time.sleep(0.05)
            for _ in range(block):
                start = time.perf_counter()
                call()
                times[key].append(time.perf_counter() - start)
        if time.perf_counter() > deadline:
            break
    return {key: statistics.median(v) for key, v in times.items()}


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM) in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def sync_write(arrays, path: str) -> float:
    """Seconds to write ``arrays`` with ``numpy.ndarray.tofile`` into ``path`` and fsync it:
    the floor an export that writes its weights once cannot beat."""
    start = time.perf_counter()
    with open(path, "wb") as f:
        for a in arrays:
            a.tofile(f)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - start


def reset_peak_rss() -> None:
    """Reset VmHWM to the current RSS (Linux clear_refs '5'); ignored where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def run_worker(
    script: str, args: list[str], env: dict | None = None, python: str | None = None, timeout: float = 3600
) -> dict:
    """Run ``python script args`` in a fresh process; it prints one JSON line last."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run(
        [python or sys.executable, str(HERE / script), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["exit %d" % proc.returncode]}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else {"error": ["no result printed"]}


def measured(script: str, kind: str, args: list[str], env: dict | None = None) -> dict:
    """``run_worker(script, ["--worker", kind, *args])``; a failed worker stops the run."""
    result = run_worker(script, ["--worker", kind, *args], env=env)
    if "error" in result:
        raise SystemExit(f"the {kind} worker failed: {result['error']}")
    return result


def answered(kind: str | None, workers: dict) -> bool:
    """In a worker process (``--worker KIND``), print ``workers[kind]()`` as the JSON line
    :func:`run_worker` reads, and say so; False in the main process."""
    if kind is None:
        return False
    print(json.dumps(workers[kind]()))
    return True


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None or x != x:
        return "-"
    return f"{x:.{digits}g}"
