#!/bin/sh
# Assembles asm/gcn/gfx942/*.s into asm/bin/gfx942/*.hsaco with the same commands as `mhc asm`
# (llvm-mc-19 -mcpu=gfx942, code object v5, ld.lld-19 -shared). Kept for working on the kernels
# before/without the mhc command; `mhc asm --check` is the authority on the committed binaries.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in "$root"/asm/gcn/gfx942/*.s; do
  name=$(basename "$s" .s)
  llvm-mc-19 -triple=amdgcn-amd-amdhsa -mcpu=gfx942 --amdhsa-code-object-version=5 -filetype=obj \
    -o "$tmp/$name.o" "$s"
  ld.lld-19 -shared -o "$root/asm/bin/gfx942/$name.hsaco" "$tmp/$name.o"
done
