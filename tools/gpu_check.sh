#!/usr/bin/env bash
# The checks of issue 16 that need a CUDA GPU, as one script for a lent GPU machine: the tests
# that run kernels on the device, then benchmarks/gpu.py (with GPU_TRIALS=N, the tuned matmul
# too). Logs go to $OUT (or ./gpu-check-out); a summary is printed last.
#
# The machine's own python3 runs it, with tvms's wheel and lark from .whl/ (build them first:
#   .venv/bin/pip wheel -q --no-deps -w .whl . && .venv/bin/pip download -q --no-deps -d .whl lark
# and carry .whl). Each step has a time limit, so that one hang leaves the rest measured:
# GPU_TEST_SECS, GPU_BENCH_SECS; GPU_TEST_FILTER is a pytest -k expression; GPU_BENCH_ARGS go to
# gpu.py (e.g. "--spaces tiles").
set -u
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT" && rm -f "$OUT/summary.txt"
SITE=/tmp/tvms-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "installing the wheels failed"; exit 1; }
export PYTHONPATH=$SITE PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: run, log to $OUT/NAME.log, note the exit status
    local name=$1 secs=$2; shift 2
    local start=$SECONDS
    timeout "$secs" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    echo "$name: exit $rc in $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
}

{
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    python3 --version
    python3 -m pip list 2>/dev/null | grep -i -E '^(cuda|nvidia-cu|llvmlite|numpy|cupy|torch |lark)'
    python3 -c 'import tvms; d = tvms.cuda(0); print("tvms sees", d.exist, d.missing_reason if not d.exist else d.device_name)'
} >"$OUT/environment.txt" 2>&1
cat "$OUT/environment.txt"

GPU_TESTS="tests/test_cuda_runtime.py tests/test_seed_flows_cuda.py tests/test_cublas.py tests/test_runtime_tensor.py
           tests/test_cuda_ptx_mma.py tests/test_reference_wmma.py tests/test_tvm_api.py tests/test_scope_ids.py
           tests/test_wgmma.py"
# shellcheck disable=SC2086
# (launches stay asynchronous, so that an ordering bug can show; CUDA_LAUNCH_BLOCKING=1 in the
# environment makes each synchronous, to find which kernel faulted)
step tests "${GPU_TEST_SECS:-240}" python3 -m pytest -q -p no:cacheprovider -rfE \
    -n "${GPU_TEST_WORKERS:-6}" --timeout 120 --durations=8 ${GPU_TEST_FILTER:+-k "$GPU_TEST_FILTER"} $GPU_TESTS
# shellcheck disable=SC2086
step gpu_bench "${GPU_BENCH_SECS:-240}" python3 benchmarks/gpu.py ${GPU_TRIALS:+--trials $GPU_TRIALS} ${GPU_BENCH_ARGS:-}

echo "---- failures"
grep -E '^(FAILED|ERROR)' "$OUT/tests.log" | head -40
tail -3 "$OUT/tests.log"
echo "---- benchmarks"
grep -v -E '^ *$|^trials ' "$OUT/gpu_bench.log" | tail -30
cat "$OUT/summary.txt"
