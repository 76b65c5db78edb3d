#!/usr/bin/env bash
# Some PTX files repeat one hand-written instruction sequence per specialisation (n, dtype,
# formulation); small template scripts beside them write those repetitions out. This check runs
# every such script on a copy of asm/ and fails, naming the file, if the committed .ptx is not
# exactly what its script writes (the PTX files stay the sources `mhc asm` assembles; nothing
# runs Python at build or run time).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r asm "$tmp/"
(
    cd "$tmp"
    python3 asm/ptx/gen_coeffs_shfl.py
    python3 asm/ptx/gen_coeffs_thread.py
    python3 asm/ptx/sm90/gen_forward.py
    python3 asm/ptx/sm90/pre_gen/gen.py asm/ptx/sm90/pre.ptx
    python3 asm/ptx/sm90/gen_pre_decode.py
    python3 asm/ptx/sm90/gen_pre_pc.py
    python3 asm/ptx/sm90/gen_pre_gemm.py
)
if ! diff -r -q -x __pycache__ asm "$tmp/asm"; then
    echo "check-ptx-templates: the files above differ from what their template scripts write" >&2
    exit 1
fi
echo "check-ptx-templates: every templated .ptx is what its script writes"
