#!/usr/bin/env bash
# The CUDA plugin's checks on a lent GPU, in one go. Prepared by plugins/cuda/gpu_prepare.sh on the developer
# machine; then, with the device tool (the machine stays warm between the calls, so parts a and c stay there):
#   run(command="true", carry=["plugins/cuda/.gpu/a"], timeout_s=60)
#   run(command="true", carry=["plugins/cuda/.gpu/c"], timeout_s=60)
#   run(command="bash plugins/cuda/gpu_check.sh", carry=["plugins/cuda/.gpu/b"], timeout_s=600)
# (SKIP_STEPS="check bench" leaves steps out where the device budget is short: testing/check_steps.sh)
# Steps (each writes to $OUT, the summary goes to $OUT/summary.txt; a failing step does not stop the others):
#   1 install the carried wheels and this checkout into /tmp/site      5 the whole conformance suite on CUDA0
#   2 the devices the plugin sees                                       6 llama: KLD and greedy vs llama.cpp
#   3 every kernel compiled by this machine's nvcc (--check --jobs 16)  7 the JSON benchmark
#   4 the plugin's tests, test_gpu.py among them (real GPU)
# shellcheck disable=SC2317  # the steps' functions run through `step`
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"  # cd to the checkout; OUT, G, SITE; step; install (the carried wheels, this checkout)

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
llama() {  # teacher-forced agreement with llama.cpp (as llama-perplexity --kl-divergence), then greedy decoding
    python3 - "$OUT/llama.json" <<'PY'
import json, sys, time
from pathlib import Path
import numpy as np
from pyggml_llama.agreement import NOISE_FLOOR_KLD, agreement
from pyggml_llama.session import Session
fx = json.loads(Path("examples/llama/tests/llama_cpp_greedy.json").read_text())
ref = np.load("plugins/cuda/.gpu/c/llama_cpp_logits.npz")
s = Session("/tmp/model.gguf", ["CUDA0"], n_ctx=512)
res, ok = [], True
for i, c in enumerate(fx["cases"]):
    tokens = c["prompt_tokens"] + c["tokens"]
    s.reset()
    batch = s.eval(tokens, all_logits=True)
    s.reset()
    stepped = np.concatenate([s.eval([t]) for t in tokens])
    r = {"prompt": c["prompt"], "positions": len(tokens)}
    for how, got in (("batch", batch), ("token_by_token", stepped)):
        a = agreement(ref[f"case{i}"], got)
        r[how] = {"mean_kld": a.mean_kld, "max_kld": a.max_kld, "same_top1": a.same_top1}
        ok = ok and a.mean_kld <= NOISE_FLOOR_KLD and a.same_top1 >= 0.95
    s.reset()
    t0 = time.perf_counter()
    toks = list(s.generate(c["prompt_tokens"], len(c["tokens"])))
    r["greedy_seconds"] = round(time.perf_counter() - t0, 3)
    r["greedy_parts_at"] = next((k for k, (x, y) in enumerate(zip(toks, c["tokens"])) if x != y), None)
    r["tokens"], r["expected"] = toks, c["tokens"]
    res.append(r)
st = s.stats
out = {"agrees": ok, "noise_floor_kld": NOISE_FLOOR_KLD, "cases": res,
       "stats": {"prompt_tok_s": round(st.prompt.tok_s, 2), "decode_tok_s": round(st.decode.tok_s, 2),
                 "graph_builds": st.graph_builds, "graph_reuses": st.graph_reuses, "n_splits": st.n_splits}}
Path(sys.argv[1]).write_text(json.dumps(out, indent=1))
print(json.dumps({"agrees": ok, "cases": [{k: r[k] for k in ("batch", "token_by_token", "greedy_parts_at")}
                                          for r in res], "stats": out["stats"]}, indent=1))
sys.exit(0 if ok else 1)
PY
}
conformance() {  # every case of the suite on CUDA0; fails when a case fails
    timeout 300 python3 -m pyggml.cli conformance --backend CUDA0 --mode test --jobs 8 --format json --output "$OUT/conformance.json"
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
    return "$rc"
}

: > "$OUT/summary.txt"
step install install
step devices devices
step check python3 -m pyggml_cuda_testing.check --check --jobs 16 --json
step tests python3 -m pytest -q plugins/cuda/tests -p no:cacheprovider -rs
step conformance conformance
step llama llama
step bench bash -c "python3 plugins/cuda/benchmarks/bench_cuda.py > '$OUT/bench.json'"
exit "$status"
