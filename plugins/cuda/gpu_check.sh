#!/usr/bin/env bash
# The CUDA plugin's checks on a lent GPU, in one go. Prepared by plugins/cuda/gpu_prepare.sh on the developer
# machine; then, with the device tool (the machine stays warm between the two calls, so part a stays there):
#   run(command="true", carry=["plugins/cuda/.gpu/a"], timeout_s=60)
#   run(command="bash plugins/cuda/gpu_check.sh", carry=["plugins/cuda/.gpu/b"], timeout_s=600)
# Steps (each writes to $OUT, the summary goes to $OUT/summary.txt; a failing step does not stop the others):
#   1 install the carried wheels and this checkout into /tmp/site      5 the whole conformance suite on CUDA0
#   2 the devices the plugin sees                                       6 llama: greedy tokens vs llama.cpp's
#   3 every kernel compiled by this machine's nvcc (--check --jobs 16)  7 the JSON benchmark
#   4 the plugin's tests, test_gpu.py among them (real GPU)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/pyggml-gpu-out}
mkdir -p "$OUT"
G=plugins/cuda/.gpu
SITE=/tmp/pyggml-site
export PYTHONUNBUFFERED=1 PYGGML_CACHE_DIR=/tmp/pyggml-cache PYTHONPATH=$SITE PATH="$SITE/bin:$PATH"
. testing/check_steps.sh  # step NAME COMMAND...: run, log to $OUT/NAME.txt, record the exit status in $status

install() {
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$G"/b/wheels/*.whl &&
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$SITE" \
        ./ ./dialect ./plugins/opencl ./plugins/cuda ./conformance ./examples/llama ./testing &&
    cat "$G/a/model.00" "$G/b/model.01" > /tmp/model.gguf &&
    [ "$(sha256sum /tmp/model.gguf | cut -d' ' -f1)" = "$(cat "$G/b/model.sha256")" ]
}
devices() {
    nvidia-smi -L
    python3 - <<'PY'
import json
from pyggml_cuda.registry import CudaRegistry
reg = CudaRegistry()
print(json.dumps({"reason": reg.unavailable_reason(),
                  "devices": [{"name": d.name, "description": d.description, "details": d.details()}
                              for d in reg.devices()]}, indent=1))
PY
}
llama() {
    python3 - "$OUT/llama.json" <<'PY'
import json, sys, time
from pathlib import Path
from pyggml_llama.session import Session
fx = json.loads(Path("examples/llama/tests/llama_cpp_greedy.json").read_text())
s = Session("/tmp/model.gguf", ["CUDA0"], n_ctx=512)
res = []
for c in fx["cases"]:
    s.reset()
    t0 = time.perf_counter()
    toks = list(s.generate(c["prompt_tokens"], len(c["tokens"])))
    res.append({"prompt": c["prompt"], "equal": toks == c["tokens"], "tokens": toks, "expected": c["tokens"],
                "seconds": round(time.perf_counter() - t0, 3)})
st = s.stats
out = {"all_equal": all(r["equal"] for r in res), "cases": res,
       "stats": {"prompt_tok_s": round(st.prompt.tok_s, 2), "decode_tok_s": round(st.decode.tok_s, 2),
                 "graph_builds": st.graph_builds, "graph_reuses": st.graph_reuses, "n_splits": st.n_splits}}
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
print(json.dumps({"all_equal": out["all_equal"], "stats": out["stats"]}))
sys.exit(0 if out["all_equal"] else 1)
PY
}
conformance() {  # every case of the suite on CUDA0; fails when a case fails
    timeout 300 pyggml conformance --backend CUDA0 --mode test --jobs 8 --format json --output "$OUT/conformance.json"
    local rc=$?
    python3 - "$OUT/conformance.json" <<'PY' || return 1
import collections, json, sys
r = json.load(open(sys.argv[1]))["results"]
c = collections.Counter(x["status"] for x in r)
print(dict(c))
for x in r:
    if x["status"] == "fail":
        print("FAIL", x["name"], x.get("error"))
sys.exit(1 if c.get("fail") else 0)
PY
    return $rc
}

: > "$OUT/summary.txt"
step install install
step devices devices
step check python3 -m pyggml_cuda.compile --check --jobs 16 --json
step tests python3 -m pytest -q plugins/cuda/tests -p no:cacheprovider -rs
step conformance conformance
step llama llama
step bench bash -c "python3 plugins/cuda/benchmarks/bench_cuda.py > '$OUT/bench.json'"
exit $status
