#!/usr/bin/env bash
# Builds the GPU test and bench executables and the `mhc` binary (release, x86-64) and packs them
# into gpu-pack/ (ignored by git) with gpu-pack/run-all.sh, for a machine with a CUDA GPU but no
# Rust toolchain (docs/gpu-checks.md). There: `bash gpu-pack/run-all.sh OUTDIR`.
#
#   tools/gpu-pack.sh            # all tests/gpu_*.rs + mhc
#   GPU_TESTS="gpu_forward" tools/gpu-pack.sh
#   GPU_PACK_DIR=/work/main/gpu-pack-mine GPU_NO_BENCHES=1 tools/gpu-pack.sh   # another folder, no criterion benches
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
pack="${GPU_PACK_DIR:-$root/gpu-pack}"
rm -rf "$pack"
mkdir -p "$pack"
tests="${GPU_TESTS:-$(ls tests/gpu_*.rs 2>/dev/null | xargs -n1 basename | sed 's/\.rs$//' | tr '\n' ' ')}"
args=()
for t in $tests; do args+=(--test "$t"); done
if [ ${#args[@]} -gt 0 ]; then
  cargo test --release -p mhc --no-run "${args[@]}" --message-format=json 2>/dev/null |
    python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        dst = os.path.join(sys.argv[1], m["target"]["name"])
        shutil.copy(m["executable"], dst)
        print("packed", dst)
' "$pack"
fi
# The criterion benches (tests/../benches/*.rs), packed as bench_<name>; run with `--bench`.
[ "${GPU_NO_BENCHES:-0}" = 1 ] || cargo bench -p mhc --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["bench"]:
        dst = os.path.join(sys.argv[1], "bench_" + m["target"]["name"])
        shutil.copy(m["executable"], dst)
        print("packed", dst)
' "$pack"
# The commit the bench records name (mhc bench writes it into its JSON record).
MHC_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || true)" cargo build --release -p mhc-cli --bin mhc
cp "${CARGO_TARGET_DIR:-target}/release/mhc" "$pack/mhc"
# Debug info is not needed there; strip keeps the carried tree small.
for f in "$pack"/*; do strip --strip-debug "$f" 2>/dev/null || true; done
cp tools/gpu-tests.sh "$pack/gpu-tests.sh"
cat > "$pack/run-all.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the whole GPU test suite with no skipping (gpu-tests.sh), then with MHC_SANITIZE=1 each
# test binary's sanitizer smoke tests under compute-sanitizer memcheck and racecheck, then
# `mhc bench` (MHC_SKIP_BENCH=1 skips it; MHC_BENCH_ARGS adds arguments). Logs go to $1
# (default ./gpu-logs).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-gpu-logs}"
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv > "$out/gpu.txt" 2>&1 || true
bash "$here/gpu-tests.sh" "$here" "$out"
status=$?
if [ "${MHC_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    for t in "$here"/gpu_*; do
      MHC_REQUIRE_GPU=1 MHC_GPU_SMALL=1 compute-sanitizer --tool $tool --error-exitcode 99 "$t" --include-ignored sanitizer_smoke --test-threads=1 > "$out/sanitizer-$tool-$(basename "$t").log" 2>&1
      echo "compute-sanitizer $tool $(basename "$t") rc=$?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer-$tool-$(basename "$t").log" | tail -1)"
    done
  done
fi
if [ "${MHC_SKIP_BENCH:-0}" != 1 ]; then
  "$here/mhc" bench --device cuda --out "$out" ${MHC_BENCH_ARGS:-} > "$out/bench.log" 2>&1
  echo "bench rc=$?"; cat "$out/bench.txt"
fi
exit $status
RUN
chmod +x "$pack/run-all.sh"
du -sh "$pack"
