#!/usr/bin/env bash
# The whole GPU test suite on a GPU machine, with no skipping: every packed test binary (built
# here by tools/gpu-pack.sh: the integration tests tests/gpu_*.rs) runs its GPU tests, which are
# ignored by default elsewhere, with MHC_REQUIRE_GPU=1 so that a missing or unusable GPU fails
# them instead of skipping. Benchmarks (bench_*) are left out. Prints one summary line per binary
# and a total; exits 1 if any test failed or did not run.
#
# The binaries run side by side (each one test at a time): the suite's time is then about its
# longest binary's rather than their sum, one binary's CPU work (inputs, the f64 reference)
# overlapping another's kernels. The tests check results, not times, so sharing the GPU changes
# none of them. GPU_TESTS_SERIAL=1 runs one binary after the other instead.
#
#   bash tools/gpu-tests.sh [PACK_DIR] [LOG_DIR]      (defaults gpu-pack, gpu-logs)
set -uo pipefail
pack="${1:-gpu-pack}"; logs="${2:-gpu-logs}"
mkdir -p "$logs"

# One binary, its log in $logs/NAME.log and its exit status in $logs/NAME.rc.
run_one() {
    local t="$1" name
    name="$(basename "$t")"
    # --report-time puts each test's duration in the log (an unstable libtest option, which
    # RUSTC_BOOTSTRAP=1 unlocks in a stable-built test binary): what the suite's time goes to.
    MHC_REQUIRE_GPU=1 RUSTC_BOOTSTRAP=1 "$t" --include-ignored --skip bench_ --test-threads=1 \
        -Zunstable-options --report-time > "$logs/$name.log" 2>&1
    echo $? > "$logs/$name.rc"
}

binaries=()
for t in "$pack"/gpu_*; do
    [ -x "$t" ] && binaries+=("$t")
done
for t in "${binaries[@]}"; do
    rm -f "$logs/$(basename "$t").rc"
    if [ "${GPU_TESTS_SERIAL:-0}" = 1 ]; then
        run_one "$t"
    else
        run_one "$t" &
    fi
done
wait

status=0; total=0; failed=0
for t in "${binaries[@]}"; do
    name="$(basename "$t")"
    rc="$(cat "$logs/$name.rc" 2>/dev/null || echo missing)"
    line="$(grep -E '^test result' "$logs/$name.log" | tail -1)"
    echo "$name rc=$rc: $line"
    passed=$(echo "$line" | sed -n 's/.* \([0-9]*\) passed.*/\1/p'); fails=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
    total=$((total + ${passed:-0})); failed=$((failed + ${fails:-0}))
    if [ "$rc" != 0 ] || [ -z "$line" ]; then
        status=1
        grep -E 'panicked|FAILED' "$logs/$name.log" | head -20
    fi
done
echo "gpu-tests: $total passed, $failed failed (no test skipped: MHC_REQUIRE_GPU=1)"
exit $status
