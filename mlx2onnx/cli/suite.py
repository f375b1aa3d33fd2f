"""``mlx2onnx check-suite SUITE.toml -o DIR``."""

from __future__ import annotations

from pathlib import Path

from .common import EXIT_MISMATCH, EXIT_OK
from .progress import Progress


# -- check-suite ---------------------------------------------------------------------------
def cmd_check_suite(ns, progress: Progress) -> int:
    from ..errors import UsageError
    from ..io.packages import check_folder_path, folder_written_whole
    from ..testing.report import write_html, write_json, write_junit
    from ..testing.suite import load_suite, run_suite, summary

    suite = Path(ns.suite)
    if not suite.is_file():
        raise UsageError(f"no such suite file: {ns.suite}")
    # the reports of an earlier run are replaced; a folder holding anything else is refused
    out = check_folder_path(ns.output, overwrite=True)
    total = len(load_suite(suite))  # every error in the file, before anything runs
    print(f"{suite}: {total} target(s)")

    def report_progress(k, n, item, rows):
        for row in rows:
            verdict = "PASS" if row.passed else "FAIL"
            reason = f"  {row.reason.splitlines()[0]}" if row.reason and not row.passed else ""
            print(f"[{k}/{n}] {row.name} [{row.runtime}] {verdict} ({row.seconds:.1f} s){reason}", flush=True)

    with progress.stage(f"checking {total} target(s)"):
        rows = run_suite(suite, progress=report_progress)
    result = summary(rows)
    name = suite.stem
    with folder_written_whole(out) as staged:
        write_json(rows, result, staged / "report.json", name)
        write_junit(rows, result, staged / "junit.xml", name)
        write_html(rows, result, staged / "report.html", name)
    print(f"{result['passed']} passed, {result['failed']} failed")
    print(f"reports: {out / 'report.json'}, {out / 'junit.xml'}, {out / 'report.html'}")
    return EXIT_OK if not result["failed"] else EXIT_MISMATCH
