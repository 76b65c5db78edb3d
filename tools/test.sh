#!/usr/bin/env bash
# The README's test command. Installs the pinned assembler tools when missing (llvm-19, lld-19 and
# clang-19 from Debian, ptxas 12.9.86 from PyPI into .tools/), then: format check, clippy with
# warnings denied, every test of the workspace (GPU tests are ignored here, with the reason;
# tools/gpu-tests.sh runs them on a GPU machine), the library docs (broken links are errors), that
# every cited docs page exists, that the generated PTX, catalogue rows and Rust argument structs
# are what `asm/gen` writes, that the committed code objects are exactly what the sources assemble
# to, and a dry run of publishing the crates.
set -euo pipefail
cd "$(dirname "$0")/.."

# CI machines may have little free disk, so the run keeps its peak small. A fresh clone builds
# once: incremental caches would only take disk (about 1 GB). Debug info is left out: in the
# forty-odd test binaries it is about two thirds of each (about 1 GB in all), and a panic's
# backtrace still names its functions from the symbol table.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=0

bash tools/install-asm-tools.sh
rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy (warnings denied)"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== cargo test"
cargo test --workspace --quiet 2>&1 | tee /tmp/mhc-test.log
echo "== cargo doc (library crates, warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p mhc -p mhc-loader -p mhc-kernels -p gcn-sim
echo "== every cited docs page exists"
bash tools/check-citations.sh
echo "== generated PTX, catalogue rows and Rust ABI are what asm/gen writes"
python3 -m asm.gen --check
echo "== mhc asm --check"
cargo run --quiet -p mhc-cli -- asm --check
echo "== the library crates package and build on their own (cargo publish --dry-run)"
# The dry run verifies each crate against the others through a local registry
# (target/.../package/tmp-registry) whose packages keep version 0.1.0, and cargo treats registry
# packages as immutable: it reuses an earlier run's extraction ($CARGO_HOME/registry/src/-<hash>/,
# local registries have no host name) and its compiled crates. Both are dropped first, and the
# verification builds in its own target folder, so every run verifies what it packaged.
publish_target=target/publish-check
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/mhc-*0.1.0
rm -rf "$publish_target"/package "$publish_target"/debug/.fingerprint/mhc* "$publish_target"/debug/deps/*mhc*
CARGO_TARGET_DIR="$publish_target" cargo publish --quiet --dry-run --allow-dirty --workspace
# Its build (about 0.4 GB) is not used again; the disk goes to the Python wheel's build.
rm -rf "$publish_target"

# ---- Bindings (C ABI, Python package) ---------------------------------------------------------
# The C ABI's tests ran with the workspace above (the header regenerated and compared with
# bindings/c/include/mhc.h, the C and C++ examples compiled with gcc / g++ and run on the CPU
# reference). Here: the Python package, built as an abi3 wheel, installed and tested.
echo "== bindings/python: maturin wheel, install, pytest"
bash bindings/python/test.sh
