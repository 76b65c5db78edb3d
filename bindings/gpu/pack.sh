#!/usr/bin/env bash
# Builds, on a machine with the toolchains (no GPU needed), everything the GPU checks of the
# bindings need into one folder to carry to the GPU machine (which has python3 with PyTorch and no
# network): the release wheel of the `mhc` Python package, the C example and the C++ decode step
# (linked statically against libmhc_c.a), the test binary that compares the C++ decode step with
# the Rust API bit for bit, and the scripts.
#
#   bash bindings/gpu/pack.sh [OUT]        (default gpu-pack-embed; then run OUT/run-checks.sh there)
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-gpu-pack-embed}"
target="${CARGO_TARGET_DIR:-target}"
rm -rf "$out"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

python3 -m pip install -q --disable-pip-version-check "maturin>=1.5,<2"
(cd bindings/python && maturin build --release --quiet -o "$out")
cargo build --release --quiet -p mhc-c
inc=bindings/c/include
g++ -std=c++17 -O2 -ffp-contract=off -I"$inc" bindings/c/examples/decode_step.cpp "$target/release/libmhc_c.a" \
    -lpthread -ldl -lm -s -o "$out/decode_step"
gcc -std=c11 -O2 -I"$inc" bindings/c/examples/basic.c "$target/release/libmhc_c.a" -lpthread -ldl -lm -s -o "$out/basic"
# The examples test (its CUDA variant is ignored by default; run-checks.sh includes it).
bin=$(cargo test --release -p mhc-c --test examples --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
[ -x "$bin" ] || { echo "pack: the examples test binary was not built"; exit 1; }
cp "$bin" "$out/mhc_c_examples"
strip "$out/mhc_c_examples"
cp bindings/python/tests/gpu_check.py bindings/python/examples/decode_stack.py bindings/gpu/run-checks.sh "$out/"
ls -la "$out"
echo "pack: $out ($(du -sh "$out" | cut -f1)); on the GPU machine: bash $out/run-checks.sh"
