#!/usr/bin/env bash
# The whole GPU test suite on a GPU machine, with no skipping: every packed test binary (built
# here by tools/gpu-pack.sh: the integration tests tests/gpu_*.rs) runs its GPU tests, which are
# ignored by default elsewhere, with MHC_REQUIRE_GPU=1 so that a missing or unusable GPU fails
# them instead of skipping. Benchmarks (bench_*) are left out. Prints one summary line per binary
# and a total; exits 1 if any test failed or did not run.
#
#   bash tools/gpu-tests.sh [PACK_DIR] [LOG_DIR]      (defaults gpu-pack, gpu-logs)
set -uo pipefail
pack="${1:-gpu-pack}"; logs="${2:-gpu-logs}"
mkdir -p "$logs"
status=0; total=0; failed=0
for t in "$pack"/gpu_*; do
    [ -x "$t" ] || continue
    name="$(basename "$t")"
    # --report-time puts each test's duration in the log (an unstable libtest option, which
    # RUSTC_BOOTSTRAP=1 unlocks in a stable-built test binary): what the suite's time goes to.
    MHC_REQUIRE_GPU=1 RUSTC_BOOTSTRAP=1 "$t" --include-ignored --skip bench_ --test-threads=1 \
        -Zunstable-options --report-time > "$logs/$name.log" 2>&1
    rc=$?
    line="$(grep -E '^test result' "$logs/$name.log" | tail -1)"
    echo "$name rc=$rc: $line"
    passed=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p'); fails=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    total=$((total + ${passed:-0})); failed=$((failed + ${fails:-0}))
    if [ $rc -ne 0 ] || [ -z "$line" ]; then
        status=1
        grep -E 'panicked|FAILED' "$logs/$name.log" | head -20
    fi
done
echo "gpu-tests: $total passed, $failed failed (no test skipped: MHC_REQUIRE_GPU=1)"
exit $status
