#!/usr/bin/env bash
# The README's run command: builds the `mhc` tool (release), lists the devices present and the
# embedded kernels, then runs every forward stage (pre, post, post_pre, head, static, expand) on
# seeded random inputs on each device present - the float64 reference (cpu), the gfx942 simulator
# (gcn-sim; always), an NVIDIA GPU (cuda) or AMD GPU (hip) when `mhc devices` finds one this build
# serves - and compares each device's outputs with the float64 reference. Devices it skips are
# named with the reason. With a CUDA GPU it finishes with `mhc bench --quick`.
#
#   bash tools/run.sh [T] [n] [C]      (defaults 16 4 1024)
#
# MHC_BIN=path uses a prebuilt `mhc` instead of building one; MHC_BENCH_OUT=DIR keeps the bench's
# JSON record and SVG plot there.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-16}"; n="${2:-4}"; c="${3:-1024}"

if [ -n "${MHC_BIN:-}" ]; then
    mhc="$MHC_BIN"   # a prebuilt tool (a GPU machine without a toolchain; tools/gpu-pack.sh packs one)
    echo "== using $mhc"
else
    echo "== building mhc (release; the first build takes about 5 minutes on 2 cores)"
    cargo build --release -p mhc-cli
    mhc="${CARGO_TARGET_DIR:-target}/release/mhc"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== devices"
"$mhc" devices
devices=(gcn-sim)
for dev in cuda hip; do
    if reason=$("$mhc" devices --check "$dev" 2>&1); then
        devices+=("$dev")
    else
        echo "   skipping $dev: $(echo "$reason" | tail -1 | sed 's/^mhc: //')"
    fi
done

echo "== embedded kernels"
"$mhc" inspect | head -n 12
echo "   ... ($("$mhc" inspect --json | grep -c '"kernel"') kernels; full list: mhc inspect)"

status=0
for stage in pre post post_pre head static expand; do
    extra=(); [ "$stage" = expand ] && extra=(--n "$n")
    "$mhc" example "$stage" --out "$work/$stage/in" --tokens "$t" --n "$n" --c "$c" >/dev/null
    echo "== $stage, T=$t n=$n C=$c: the float64 reference on the cpu"
    "$mhc" run "$stage" --in "$work/$stage/in" --out "$work/$stage/cpu" --dtype f64 "${extra[@]}"
    for dev in "${devices[@]}"; do
        for dtype in f32 bf16; do
            tol=2e-5; [ "$dtype" = bf16 ] && tol=1e-2
            if ! out=$("$mhc" run "$stage" --in "$work/$stage/in" --out "$work/$stage/$dev-$dtype" --device "$dev" --dtype "$dtype" "${extra[@]}" 2>&1); then
                case "$out" in
                    *"no variant"*) echo "== $stage on $dev ($dtype): this device has no kernel for it" ;;
                    *) echo "== $stage on $dev ($dtype) FAILED: $out"; status=1 ;;
                esac
                continue
            fi
            echo "== $stage on $dev ($dtype storage) against the float64 reference"
            "$mhc" compare "$work/$stage/$dev-$dtype" "$work/$stage/cpu" --tol "$tol" || status=1
        done
    done
done

if [[ " ${devices[*]} " == *" cuda "* ]]; then
    echo "== mhc bench --quick (cuda)"
    "$mhc" bench --quick ${MHC_BENCH_OUT:+--out "$MHC_BENCH_OUT"}
fi
exit $status
