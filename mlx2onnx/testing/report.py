"""The check-suite's reports: JSON, JUnit XML and an HTML page with error histograms.

The HTML page has one row per target and runtime; each output gets a histogram of its
elements' errors over their allowance (``|got - MLX| / (atol + rtol * |MLX|)``, so the
tolerance is 1). The plots are drawn with matplotlib when it is installed
(``pip install "mlx2onnx[report]"``); without it the page shows the counts as a table.
"""

from __future__ import annotations

import base64
import html
import io
import json
import platform
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Sequence

from ..verify.compare import HISTOGRAM_EDGES


def _bin_labels() -> list[str]:
    labels = []
    for lo, hi in zip(HISTOGRAM_EDGES[:-1], HISTOGRAM_EDGES[1:]):
        labels.append(f"<{hi:g}" if lo == 0 else (f">={lo:g}" if hi == float("inf") else f"{lo:g}-{hi:g}"))
    return labels


def write_json(rows: Sequence, summary: dict, path: Path, suite: str) -> None:
    data = {
        "suite": suite,
        "summary": summary,
        "results": [r.to_dict() for r in rows],
        "histogram_bins": list(HISTOGRAM_EDGES[:-1]),
    }
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def write_junit(rows: Sequence, summary: dict, path: Path, suite: str) -> None:
    total = sum(r.seconds for r in rows)
    suites = ET.Element(
        "testsuites",
        name="mlx2onnx check-suite",
        tests=str(len(rows)),
        failures=str(summary["failed"]),
        errors="0",
        time=f"{total:.3f}",
    )
    node = ET.SubElement(
        suites,
        "testsuite",
        name=suite,
        tests=str(len(rows)),
        failures=str(summary["failed"]),
        errors="0",
        skipped="0",
        time=f"{total:.3f}",
        timestamp=time.strftime("%Y-%m-%dT%H:%M:%S"),
        hostname=platform.node(),
    )
    for row in rows:
        case = ET.SubElement(
            node, "testcase", classname=f"{suite}.{row.runtime}", name=row.name, time=f"{row.seconds:.3f}"
        )
        text = _row_text(row)
        if not row.passed:
            failure = ET.SubElement(case, "failure", message=row.reason.splitlines()[0] if row.reason else "failed")
            failure.text = text
        out = ET.SubElement(case, "system-out")
        out.text = text
    ET.indent(suites)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


def _row_text(row) -> str:
    lines = [f"{row.name} ({row.target}) in {row.runtime}: {'PASS' if row.passed else 'FAIL'}"]
    if row.reason:
        lines.append(row.reason)
    for output in row.outputs:
        lines.append("  " + output.line())
    return "\n".join(lines)


def _histogram_png(output) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    counts = list(output.error_histogram)
    labels = _bin_labels()
    fig, ax = plt.subplots(figsize=(4.8, 2.2), dpi=80)
    colors = ["#4c9f70" if hi <= 1.0 else "#c0392b" for hi in HISTOGRAM_EDGES[1:]]
    ax.bar(range(len(counts)), counts, color=colors)
    ax.axvline(HISTOGRAM_EDGES.index(1.0) - 0.5, color="black", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(counts)), labels, rotation=45, fontsize=7, ha="right")
    ax.set_yscale("symlog")
    ax.set_ylabel("elements", fontsize=7)
    ax.set_title(f"{output.name}{f' [{output.at}]' if output.at else ''}: error / tolerance", fontsize=8)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _histogram_html(output) -> str:
    if not output.error_histogram:
        return f"<p>{html.escape(output.name)}: {html.escape(output.problem or 'no element comparison')}</p>"
    png = _histogram_png(output)
    if png is not None:
        return f'<img alt="error histogram of {html.escape(output.name)}" src="data:image/png;base64,{png}">'
    cells = "".join(f"<th>{html.escape(label)}</th>" for label in _bin_labels())
    counts = "".join(f"<td>{c}</td>" for c in output.error_histogram)
    return (
        f"<table class=hist><caption>{html.escape(output.name)}: error / tolerance (install "
        f"mlx2onnx[report] for plots)</caption><tr>{cells}</tr><tr>{counts}</tr></table>"
    )


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; }}
table.rows {{ border-collapse: collapse; width: 100%; }}
table.rows td, table.rows th {{ border: 1px solid #ccc; padding: 6px; vertical-align: top; text-align: left; }}
tr.pass td.verdict {{ background: #dff0d8; }} tr.fail td.verdict {{ background: #f2dede; font-weight: bold; }}
pre {{ white-space: pre-wrap; font-size: 12px; margin: 0; }}
table.hist td, table.hist th {{ border: 1px solid #ddd; padding: 2px 4px; font-size: 11px; }}
</style></head><body>
<h1>{title}</h1>
<p>{passed} of {checks} checks passed{failing}.</p>
<table class=rows>
<tr><th>target</th><th>runtime</th><th>verdict</th><th>outputs</th><th>error histograms (the dashed line is the tolerance)</th></tr>
{rows}
</table></body></html>
"""


def write_html(rows: Sequence, summary: dict, path: Path, suite: str) -> None:
    body = []
    for row in rows:
        verdict = "PASS" if row.passed else "FAIL"
        outputs = "\n".join(o.line() for o in row.outputs)
        detail = html.escape(row.reason + ("\n" if row.reason and outputs else "") + outputs)
        plots = "".join(_histogram_html(o) for o in row.outputs)
        body.append(
            f'<tr class="{verdict.lower()}"><td>{html.escape(row.name)}<br><code>{html.escape(row.target)}</code></td>'
            f"<td>{html.escape(row.runtime)}</td><td class=verdict>{verdict}</td><td><pre>{detail}</pre></td>"
            f"<td>{plots}</td></tr>"
        )
    failing = f"; failing: {html.escape(', '.join(summary['failing']))}" if summary["failing"] else ""
    path.write_text(
        PAGE.format(
            title=html.escape(f"mlx2onnx check-suite: {suite}"),
            passed=summary["passed"],
            checks=summary["checks"],
            failing=failing,
            rows="\n".join(body),
        )
    )
