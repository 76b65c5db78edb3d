#!/usr/bin/env bash
# Packs a timing build for the GPU machine: the generators' experiment builds (python3 -m asm.gen
# --experiment NAME[,NAME], e.g. pre_pc.stamps) assembled in place of the committed kernels, the
# GPU tests and `mhc` built on them (tools/gpu-pack.sh), and the committed sources, code objects
# and catalogue put back, whatever happens. docs/gpu-checks.md, "Timing builds".
#
#   tools/timing-pack.sh pre_pc.stamps                     # into gpu-pack-timing/
#   GPU_PACK_DIR=/work/main/gpu-pack-x GPU_TESTS=gpu_pre tools/timing-pack.sh pre_pc.stamps,pre_pc.nosink
#
# The asm/ folder must have no uncommitted change (it is restored with git checkout). A normal
# build afterwards rebuilds the crates on the committed code objects.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
exp="${1:?usage: tools/timing-pack.sh FAMILY.EXPERIMENT[,FAMILY.EXPERIMENT]}"
if ! git diff --quiet HEAD -- asm; then
  echo "timing-pack: asm/ has uncommitted changes; commit or stash them first" >&2
  exit 2
fi
restore() {
  git checkout -q HEAD -- asm
  rm -rf asm/gen/out
}
trap restore EXIT
rm -rf asm/gen/out
python3 -m asm.gen --experiment "$exp"
# asm/gen/out mirrors the repository's paths below asm/
(cd asm/gen/out && find . -type f) | while read -r f; do
  cp "asm/gen/out/$f" "asm/${f#./}"
  echo "timing-pack: asm/${f#./} <- the $exp build"
done
cargo build --release -q -p mhc-cli --bin mhc
"${CARGO_TARGET_DIR:-target}/release/mhc" asm --update-catalogue
GPU_PACK_DIR="${GPU_PACK_DIR:-$root/gpu-pack-timing}" GPU_NO_BENCHES=1 GPU_TESTS="${GPU_TESTS:-gpu_pre}" \
  bash tools/gpu-pack.sh
# The packed binaries must embed the experiment's code objects, not a stale build's.
pack="${GPU_PACK_DIR:-$root/gpu-pack-timing}"
python3 - "$pack" $(git status --porcelain -- asm/bin | awk '{print $2}') <<'PY'
import os, sys
pack, cubins = sys.argv[1], sys.argv[2:]
for name in sorted(os.listdir(pack)):
    if name.endswith(".sh"):
        continue
    data = open(os.path.join(pack, name), "rb").read()
    for cubin in cubins:
        if open(cubin, "rb").read() not in data:
            sys.exit(f"timing-pack: {pack}/{name} does not embed {cubin}: a stale build (cargo clean -p mhc-kernels)")
    print(f"timing-pack: {pack}/{name} embeds {', '.join(cubins)}")
PY
echo "timing-pack: $exp packed into $pack (the committed asm/ is restored on exit)"
