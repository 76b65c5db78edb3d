#!/usr/bin/env bash
# The README's run command: builds the `mhc` tool (release), lists the embedded kernels, then runs
# every forward stage on seeded random inputs on each device present — the f64 reference (cpu),
# the gfx942 simulator (gcn-sim; always), and an NVIDIA GPU (cuda) or AMD GPU (hip) when one is
# there — and compares each device's outputs with the reference. With a CUDA GPU it finishes with
# `mhc bench`. Usage: bash tools/run.sh [T] [n] [C]   (defaults 16 4 1024)
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-16}"; n="${2:-4}"; c="${3:-1024}"

cargo build --release --quiet -p mhc-cli
mhc="${CARGO_TARGET_DIR:-target}/release/mhc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== embedded kernels"
"$mhc" inspect | head -n 12
echo "   ... ($("$mhc" inspect --json | grep -c '"kernel"') kernels; full list: mhc inspect)"

devices=(gcn-sim)
if "$mhc" run post --in /nonexistent --out "$work/probe" --device cuda 2>&1 | grep -q "nonexistent\|missing"; then
    devices+=(cuda)
fi
if "$mhc" run post --in /nonexistent --out "$work/probe" --device hip 2>&1 | grep -q "nonexistent\|missing"; then
    devices+=(hip)
fi

for stage in pre post post_pre head static; do
    "$mhc" example "$stage" --out "$work/$stage/in" --tokens "$t" --n "$n" --c "$c" >/dev/null
    "$mhc" run "$stage" --in "$work/$stage/in" --out "$work/$stage/cpu" --dtype f32 >/dev/null
    for dev in "${devices[@]}"; do
        for dtype in f32 bf16; do
            tol=2e-5; [ "$dtype" = bf16 ] && tol=1e-2
            "$mhc" run "$stage" --in "$work/$stage/in" --out "$work/$stage/$dev-$dtype" --device "$dev" --dtype "$dtype" >/dev/null
            echo "== $stage on $dev ($dtype storage) vs the f64 reference, T=$t n=$n C=$c"
            "$mhc" compare "$work/$stage/$dev-$dtype" "$work/$stage/cpu" --tol "$tol"
        done
    done
done

if [[ " ${devices[*]} " == *" cuda "* ]]; then
    echo "== mhc bench (cuda)"
    "$mhc" bench
fi
