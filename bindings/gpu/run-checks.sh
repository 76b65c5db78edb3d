#!/usr/bin/env bash
# The GPU checks of the bindings, run from the folder bindings/gpu/pack.sh made, on a CUDA machine
# whose python3 has PyTorch (no network needed). Each step prints its lines; logs and JSON results go
# to LOG_DIR (default ./gpu-logs-embed). Exits 1 if any check failed.
#
#   bash run-checks.sh [LOG_DIR]            all checks, then the measurement
#   MHC_SKIP_BENCH=1 bash run-checks.sh     checks only
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-gpu-logs-embed}"
mkdir -p "$logs"
status=0
site="$(mktemp -d)"
python3 -m pip install -q --no-index --no-deps --target "$site" "$here"/mhc-*.whl || exit 1
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1

step() {  # name, command...
    local name="$1"; shift
    echo "== $name"
    "$@" 2>&1 | tee "$logs/$name.log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] || { echo "== $name FAILED (rc=$rc)"; status=1; }
}

step c-example "$here/basic" --cuda
step c-overhead "$here/basic" --cuda --bench 100000
step cpp-decode-step "$here/decode_step" --backend cuda --tokens 16
MHC_DECODE_STEP="$here/decode_step" MHC_REQUIRE_GPU=1 \
    step cpp-matches-rust "$here/mhc_c_examples" --include-ignored --exact cpp_decode_step_matches_the_rust_api_bit_for_bit_on_cuda
MHC_REQUIRE_GPU=1 step c-tuned "$here/mhc_c_examples" --include-ignored --exact tuned_plans_on_cuda
step python-gpu-check python3 "$here/gpu_check.py" --json "$logs/gpu_check.json"
if [ "${MHC_SKIP_BENCH:-0}" != 1 ]; then
    step decode-stack python3 "$here/decode_stack.py" --json "$logs/decode_stack.json"
fi
echo "run-checks: $([ $status -eq 0 ] && echo all passed || echo FAILURES) (logs in $logs)"
exit $status
