"""transformers.js in a real browser: headless Chromium (Debian's ``chromium``, installed by
``.ci/run``) opens a page served on 127.0.0.1 that imports transformers.js's browser build
from ``node_modules``, with onnxruntime-web's wasm files beside it and the packages under
``/models/``; the page posts its result back to the server. WebGPU runs on Chromium's
software adapter (SwiftShader)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRANSFORMERS = ROOT / "node_modules" / "@huggingface" / "transformers" / "dist" / "transformers.min.js"
# the onnxruntime-web that transformers.js itself depends on (its wasm files match its build)
ORT = ROOT / "node_modules" / "@huggingface" / "transformers" / "node_modules" / "onnxruntime-web" / "dist"
WASM = ("ort-wasm-simd-threaded.asyncify.mjs", "ort-wasm-simd-threaded.asyncify.wasm")
WEBGPU_FLAGS = [
    "--enable-unsafe-webgpu",
    "--enable-features=Vulkan",
    "--use-angle=swiftshader",
    "--use-webgpu-adapter=swiftshader",
    "--enable-unsafe-swiftshader",
]

# onnxruntime-web itself, as a page that runs a plain export imports it
ORT_WEB = ROOT / "node_modules" / "onnxruntime-web" / "dist"
TRANSFORMERS_PRELUDE = (
    """import * as transformers from "/transformers.min.js";
const { env } = transformers;
env.allowLocalModels = true;  // off by default in a browser
env.allowRemoteModels = false;
env.localModelPath = "/models/";
env.backends.onnx.wasm.wasmPaths = { mjs: "/ort/%s", wasm: "/ort/%s" };"""
    % WASM
)
ORT_PRELUDE = """import * as ort from "/ortweb/ort.all.min.mjs";
ort.env.wasm.wasmPaths = "/ortweb/";"""

PAGE = """<!doctype html><meta charset="utf-8"><script type="module">
{prelude}
const post = (data) => fetch("/result", { method: "POST", body: JSON.stringify(data) });
try {
  const run = async () => { {script} };
  await post({ result: await run() });
} catch (error) {
  await post({ error: String((error && error.stack) || error) });
}
</script>"""


def chromium() -> str:
    """The browser's path, or skip where the machine has none (.ci/run installs it)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium; .ci/run does)")
    if not TRANSFORMERS.is_file() or not all((ORT / name).is_file() for name in WASM):
        pytest.skip("transformers.js is not installed (npm ci --ignore-scripts)")
    return found


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".mjs": "text/javascript",
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".json": "application/json",
    }

    def __init__(self, *args, site: dict, results: list, done: threading.Event, **kwargs):
        self.site, self.results, self.done = site, results, done
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        path = path.split("?", 1)[0]
        for prefix in sorted(self.site, key=len, reverse=True):  # the longest prefix serves
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                rest = path[len(prefix.rstrip("/")) :].lstrip("/")
                return str(Path(self.site[prefix]) / rest) if rest else str(self.site[prefix])
        return str(Path(self.site["/"]) / path.lstrip("/"))

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.results.append(json.loads(body))
        self.send_response(204)
        self.end_headers()
        self.done.set()

    def log_message(self, *args):
        pass


def run_page(
    script: str,
    models: dict[str, Path],
    webgpu: bool = False,
    timeout: float = 480,
    prelude: str = TRANSFORMERS_PRELUDE,
) -> object:
    """Run ``script`` (the body of an async function returning a JSON value, with
    ``transformers`` in scope, or ``ort`` with :data:`ORT_PRELUDE`) in a page of headless
    Chromium, with ``models`` served as ``/models/NAME/``; its result, or AssertionError
    with the page's error."""
    browser = chromium()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "index.html").write_text(PAGE.replace("{prelude}", prelude).replace("{script}", script))
        site = {
            "/transformers.min.js": TRANSFORMERS,
            "/ort": ORT,
            "/ortweb": ORT_WEB,
            "/": scratch,
            **{f"/models/{name}": path for name, path in models.items()},
        }
        results, done = [], threading.Event()
        handler = functools.partial(_Handler, site=site, results=results, done=done)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        flags = [
            "--headless",
            "--no-sandbox",
            f"--user-data-dir={scratch / 'profile'}",
            "--no-first-run",
            *(WEBGPU_FLAGS if webgpu else ["--disable-gpu"]),
        ]
        proc = subprocess.Popen(
            [browser, *flags, f"http://127.0.0.1:{server.server_address[1]}/index.html"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Chromium's singleton socket goes in TMPDIR and stays when it is killed: keep it here
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        try:
            finished = done.wait(timeout)
        finally:
            proc.kill()
            proc.wait()
            server.shutdown()
            server.server_close()
    assert finished, f"the page posted nothing within {timeout} s"
    outcome = results[0]
    assert "error" not in outcome, f"the page failed: {outcome['error']}"
    return outcome["result"]
