#!/usr/bin/env bash
# Every generated file (the .ptx sources under asm/ptx, the generated sections of
# asm/catalogue.toml, the Rust argument layouts in asm/src/abi/sm90.rs) must be exactly what the
# generators in asm/gen write: this runs them into a temporary folder and fails, naming each file
# that differs. The .ptx files stay the sources `mhc asm` assembles; nothing runs Python at build
# or run time. Regenerate with `python3 -m asm.gen`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m asm.gen --check "$@"
