# The step runner of the device check scripts (plugins/cuda/gpu_check.sh, plugins/metal/mac_check.sh), sourced by
# them after they cd to the checkout and set OUT: `step NAME COMMAND...` runs the command with its output in
# $OUT/NAME.txt, appends "NAME: rc=... Ns" to $OUT/summary.txt and sets `status` to 1 on a failure, so that a failing
# step does not stop the others and the script's exit status ($status) says whether all passed. Steps named in
# SKIP_STEPS (space-separated) are listed as skipped and not run.
status=0
step() {  # step NAME COMMAND...
    local name=$1; shift
    if [[ " ${SKIP_STEPS:-} " == *" $name "* ]]; then  # a short device budget: SKIP_STEPS="check bench"
        echo "$name: skipped (SKIP_STEPS)" | tee -a "$OUT/summary.txt"
        return
    fi
    local t0=$SECONDS
    "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 0 ] || status=1
    echo "$name: rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
}
