#!/usr/bin/env bash
# pyggml's CUDA0 beside llama.cpp's CUDA backend on one lent GPU, in one run of under 8 minutes (issue 36).
#
# Prepared on the developer machine by `plugins/cuda/gpu_prepare.sh --bench`: the parts a and b of gpu_check.sh (the
# wheels, SmolLM2-135M Q4_1 in two halves) and d (and e where it needs two parts): llama.cpp's llama-bench,
# llama-perplexity and llama-quantize with its CUDA backend for sm_90 and their libraries (`python -m
# pyggml_testing.llama_cpp_ref cuda-bench`: llama-cpp-python 0.3.36's llama.cpp, about an hour of nvcc on 2 cores;
# cuBLAS and libcuda are the GPU machine's own). Then, with the device tool (the machine stays warm between the calls,
# so the parts carried by the first calls stay there):
#   run(command="true", carry=["plugins/cuda/.gpu/a"], timeout_s=60)
#   run(command="true", carry=["plugins/cuda/.gpu/d"], timeout_s=60)
#   run(command="true", carry=["plugins/cuda/.gpu/e"], timeout_s=60)      (only where gpu_prepare.sh made an e)
#   run(command="bash plugins/cuda/gpu_bench.sh", carry=["plugins/cuda/.gpu/b"], timeout_s=600)
# and give_back unless another run follows at once. The summary is printed at the end (output_tail) and written to
# $OUT/bench.json, which comes back with the reply's files.
#
# Steps (each logs to $OUT/STEP.txt and appends its status to $OUT/summary.txt; each is time-boxed within
# GPU_BENCH_SECONDS, default 470 s, and a failing or cut step does not stop the others):
#   install    the carried wheels and this checkout into /tmp/pyggml-site (gpu_env.sh, as gpu_check.sh)
#   anchor     llama.cpp's tools unpacked into /tmp/llama-cuda; this machine's libcublas.so.13 found (pip's
#              nvidia-cublas of the PyTorch install, else a toolkit's) and put on LD_LIBRARY_PATH; ldd; its devices
#   facts      nvidia-smi (name, driver, clocks) and the memory bandwidth of a timed device-to-device copy (PyTorch)
#   models_*   SmolLM2 Q4_K_M (from the F16 copy of the shipped Q4_1) and, in the background from here on, the
#              llama-1.1b shape of benchmarks/llama_shapes.py (random weights) as Q4_K_M and Q8_0, each quantised by
#              the carried llama-quantize (pyggml_cuda_testing.bench_vs_llama models)
#   kld_q4_1   llama-perplexity --kl-divergence-base on SmolLM2 Q4_1 (CUDA, plugins/rpc/tests/data/kld_text.txt,
#              -c 128), llama.cpp's own floor (the same one token at a time against it), and pyggml's CUDA0 in one batch
#              and one token at a time against it (bench_vs_llama kld)
#   llama_TAG, pyggml_TAG   llama-bench -ngl 99 and pyggml-llama bench --backend CUDA0 on each model, side by side:
#              -p 512 -n 128 -d 0,4096 -r 3, llama.cpp with -fa 1,0, pyggml with -fa 1,0 (PYGGML_FA); rows as jsonl
#   kld_q4_k_m the agreement on SmolLM2 Q4_K_M, where time is left
#   mma_off    where time is left: the big Q4_K_M model's prompt with PYGGML_CUDA_MMA=0 (the tiled float kernel in
#              place of the tensor cores: what the WMMA kernel gained, $OUT/mma_off.jsonl)
#   profile    where time is left: pyggml-llama --profile on the big Q4_K_M model (a prompt of about 500 tokens and
#              32 decoded ones on CUDA0): the time by op (the table in profile.txt, the trace in profile.json)
#   report     $OUT/bench.json (bench_vs_llama summary): both sides' t/s, ratios pyggml / llama.cpp (same -fa, and
#              the better -fa of each), bytes read per decoded token and that over the measured bandwidth, the goals
# Knobs: GPU_BENCH_SECONDS, BENCH_REPS (3), PYGGML_FA (1,0), LLAMA_FA (1,0), SKIP_STEPS (testing/check_steps.sh).
# GPU_BENCH_DRY=1 tests the script on a machine without a GPU: no install (the checkout's .venv), pyggml on cpu, the
# anchor (.gpu/d if packed, else .cache/llama-cuda/bin) on its CPU backend over a stand-in libcuda.so.1 and the cuBLAS
# it was built against, tiny sizes, a two-layer model of the same vocabulary in place of the 1.1B one.
# shellcheck disable=SC2317  # the steps' functions run through `step`
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"  # cd to the checkout; OUT, G, SITE; step; install (the carried wheels, this checkout)

DRY=${GPU_BENCH_DRY:-0}
DEADLINE=${GPU_BENCH_SECONDS:-470}
RESERVE=15  # kept for the report
R=${BENCH_REPS:-3}
LLAMA_FA=${LLAMA_FA:-1,0}
PYGGML_FA=${PYGGML_FA:-1,0}
MODELS=/tmp/bench-models
LL=/tmp/llama-cuda
KLD_TEXT=plugins/rpc/tests/data/kld_text.txt
KLD_ARGS=(-c 128)
P=512 N=128 D=0,4096 DEV=CUDA0 BIG=llama-1.1b QT=8 DRYF=()
if [ "$DRY" = 1 ]; then
    P=32 N=8 D=0,64 R=1 DEV=cpu BIG=llama-tiny QT=2 DRYF=(--dry) KLD_ARGS=(-c 128 --chunks 2)
    MODELS=${TMPDIR:-/tmp}/gpu-bench-dry-models
    PATH="$PWD/.venv/bin:$PATH" PYTHONPATH=
    export PYTHONPATH
    ls "$G"/d/llama-cuda.tar.xz.* >/dev/null 2>&1 || LL=$PWD/.cache/llama-cuda/bin
    CUBLAS_DIR=${CUBLAS_DIR:-$PWD/.cache/llama-cuda/cublas/lib}
fi
export PATH
mkdir -p "$MODELS"

box() {  # box WANT: WANT seconds, or what is left before the deadline (less the report's reserve) if that is less
    local left=$((DEADLINE - SECONDS - RESERVE))
    if [ "$left" -lt "$1" ]; then echo $((left > 1 ? left : 1)); else echo "$1"; fi
}
tstep() {  # tstep NAME COMMAND...: step, unless fewer than 10 seconds are left
    if [ $((DEADLINE - SECONDS - RESERVE)) -lt 10 ]; then
        echo "$1: skipped (out of time at ${SECONDS}s)" | tee -a "$OUT/summary.txt"
        return
    fi
    step "$@"
}

cublas_dir() {  # the folder of this machine's libcublas.so.13 (CUDA 13's cuBLAS, which the anchor was linked against)
    if [ -n "${CUBLAS_DIR:-}" ]; then echo "$CUBLAS_DIR"; return; fi
    local py d
    for py in python3 /opt/torch/.venv/bin/python3; do
        command -v "$py" >/dev/null || continue
        d=$("$py" - 2>/dev/null <<'PY'
import glob, importlib.util, os
spec = importlib.util.find_spec("nvidia")
for root in (spec.submodule_search_locations or []) if spec else []:
    for f in sorted(glob.glob(os.path.join(root, "*", "lib", "libcublas.so.13*"))):
        print(os.path.dirname(f))
        raise SystemExit
PY
        )
        if [ -n "$d" ]; then echo "$d"; return; fi
    done
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
        if [ -e "$d/libcublas.so.13" ]; then echo "$d"; return; fi
    done
    d=$(timeout 30 find / -xdev -name 'libcublas.so.13*' -print -quit 2>/dev/null)
    if [ -n "$d" ]; then dirname "$d"; return; fi
    return 1
}
anchor() {  # llama.cpp's tools in $LL, their libraries resolved (LD_LIBRARY_PATH exported for the later steps)
    if [ "$LL" = /tmp/llama-cuda ]; then
        rm -rf "$LL" && mkdir -p "$LL" && cat "$G"/[d-z]/llama-cuda.tar.xz.* | tar -xJf - -C "$LL" || return 1
    fi
    local lib
    lib=$(cublas_dir) || { echo "no libcublas.so.13 on this machine"; return 1; }
    if [ "$DRY" = 1 ]; then  # no driver here: a libcuda.so.1 without functions (cudart then finds no device)
        mkdir -p /tmp/gpu-bench-stub && echo 'void pyggml_no_driver(void) {}' > /tmp/gpu-bench-stub/stub.c &&
        gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o /tmp/gpu-bench-stub/libcuda.so.1 /tmp/gpu-bench-stub/stub.c &&
        lib=$lib:/tmp/gpu-bench-stub
    fi
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    { head -n 1 "$LL/built-with.txt"; echo "cuBLAS from $lib"; } | tee "$OUT/anchor.txt"
    ls -l "$LL"
    local missing
    missing=$(ldd "$LL"/llama-bench "$LL"/llama-perplexity "$LL"/llama-quantize "$LL"/lib*.so.* | grep 'not found')
    ldd "$LL/libggml-cuda.so.0"
    if [ -n "$missing" ]; then echo "missing: $missing"; return 1; fi
    timeout 60 "$LL/llama-bench" --list-devices
}
facts() {  # the GPU and its bandwidth, under the Python that has PyTorch
    nvidia-smi
    local py=python3
    if ! python3 -c 'import torch' 2>/dev/null && [ -x /opt/torch/.venv/bin/python3 ]; then
        py=/opt/torch/.venv/bin/python3
    fi
    timeout -k 5 "$(box 60)" "$py" -m pyggml_cuda_testing.bench_vs_llama facts "$OUT/facts.json" "${DRYF[@]}"
}
models() {  # models WHICH [ARGS]: the benchmark models of WHICH in $MODELS
    timeout -k 5 "$(box "$2")" python3 -m pyggml_cuda_testing.bench_vs_llama models "$1" "$MODELS" \
        --quantize "$LL/llama-quantize" --threads "$QT" "${DRYF[@]}"
}
wait_models() {  # the background job of the big model's files
    wait "$BIG_JOB"
    local rc=$?
    cat "$OUT/models_big.log"
    return "$rc"
}
kld() {  # kld TAG MODEL: llama.cpp's logits, its floor, and pyggml against them
    local tag=$1 model=$2 base=/tmp/kld-base.$1
    local ppl=("$LL/llama-perplexity" -m "$model" -f "$KLD_TEXT" "${KLD_ARGS[@]}" -ngl 99 -fa off)
    timeout -k 5 "$(box 60)" "${ppl[@]}" --kl-divergence-base "$base" > "$OUT/kld_base.$tag.log" 2>&1 || {
        tail -n 20 "$OUT/kld_base.$tag.log"; return 1; }
    timeout -k 5 "$(box 60)" "${ppl[@]}" -b 1 -ub 1 --kl-divergence-base "$base" --kl-divergence \
        > "$OUT/kld_floor.$tag.log" 2>&1
    grep -E 'Mean +KLD|Same top p' "$OUT/kld_floor.$tag.log"
    timeout -k 5 "$(box 120)" python3 -m pyggml_cuda_testing.bench_vs_llama kld "$base" "$model" --device "$DEV" \
        --floor "$OUT/kld_floor.$tag.log" --out "$OUT/kld.$tag.json"
}
bench_llama() {  # bench_llama TAG SECONDS MODEL
    timeout -k 5 "$(box "$2")" "$LL/llama-bench" -m "$3" -p "$P" -n "$N" -d "$D" -r "$R" -fa "$LLAMA_FA" -ngl 99 \
        -o jsonl > "$OUT/llama_bench.$1.jsonl"
}
bench_pyggml() {  # bench_pyggml TAG SECONDS MODEL
    timeout -k 5 "$(box "$2")" pyggml-llama bench -m "$3" -p "$P" -n "$N" -d "$D" -r "$R" -fa "$PYGGML_FA" \
        --backend "$DEV" -o jsonl > "$OUT/pyggml_bench.$1.jsonl"
}
mma_off() {  # mma_off SECONDS MODEL
    PYGGML_CUDA_MMA=0 timeout -k 5 "$(box "$1")" pyggml-llama bench -m "$2" -p "$P" -n 0 -d 0 -r "$R" \
        --backend "$DEV" -o jsonl > "$OUT/mma_off.jsonl"
}
profile() {  # profile SECONDS MODEL
    timeout -k 5 "$(box "$1")" pyggml-llama --model "$2" --prompt "$(head -c 2000 "$KLD_TEXT")" --n-predict 32 \
        --backend "$DEV" --profile "$OUT/profile.json" 2>&1 >/dev/null | tail -n 60
}

: > "$OUT/summary.txt"
if [ "$DRY" = 1 ]; then
    echo "install: skipped (dry run: the checkout's .venv)" | tee -a "$OUT/summary.txt"
else
    step install install
fi
step anchor anchor
tstep facts facts
SMOL=$(python3 -c 'from pyggml_llama.session import default_model_path; print(default_model_path())')
BIG_JOB=
if [ $((DEADLINE - SECONDS - RESERVE)) -ge 60 ]; then
    models llama-1.1b 240 > "$OUT/models_big.log" 2>&1 &  # (--dry: llama-tiny)
    BIG_JOB=$!
fi
tstep models_smollm2 models smollm2 90
tstep kld_q4_1 kld q4_1 "$SMOL"
if [ -n "$BIG_JOB" ]; then tstep models_big wait_models; fi
for spec in "smollm2-q4_1 40 90 $SMOL" "smollm2-q4_k_m 40 90 $MODELS/smollm2-135m-q4_k_m.gguf" \
            "$BIG-q4_k_m 50 120 $MODELS/$BIG-q4_k_m.gguf" "$BIG-q8_0 50 120 $MODELS/$BIG-q8_0.gguf"; do
    read -r tag ll_s pg_s model <<< "$spec"
    tstep "llama_$tag" bench_llama "$tag" "$ll_s" "$model"
    tstep "pyggml_$tag" bench_pyggml "$tag" "$pg_s" "$model"
done
tstep kld_q4_k_m kld q4_k_m "$MODELS/smollm2-135m-q4_k_m.gguf"
tstep mma_off mma_off 60 "$MODELS/$BIG-q4_k_m.gguf"
tstep profile profile 60 "$MODELS/$BIG-q4_k_m.gguf"
step report python3 -m pyggml_cuda_testing.bench_vs_llama summary "$OUT"
cat "$OUT/report.txt"
echo "total ${SECONDS}s"
exit "$status"
