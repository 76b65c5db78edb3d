#!/usr/bin/env bash
# Installs the pinned assembler tools that `mhc asm` uses, only when missing (idempotent, quiet):
#   * LLVM 19 (llvm-mc-19, ld.lld-19, llvm-readelf-19, llvm-objdump-19) from Debian:
#     apt-get install llvm-19 lld-19
#   * clang-19 from Debian (apt-get install clang-19): gcn-sim's cross-check suite compiles its
#     OpenCL C kernels (tools/gcn-sim/cross) with it
#   * ptxas 12.9.86 from the PyPI wheel nvidia-cuda-nvcc-cu12==12.9.86, unpacked into
#     .tools/nvcc-12.9.86 (an ignored folder) with pip --target, so no venv or CUDA install is needed.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v llvm-mc-19 >/dev/null || ! command -v ld.lld-19 >/dev/null || ! command -v llvm-readelf-19 >/dev/null \
    || ! command -v llvm-objdump-19 >/dev/null || ! command -v clang-19 >/dev/null; then
    echo "install-asm-tools: installing llvm-19, lld-19 and clang-19 (apt-get)" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq llvm-19 lld-19 clang-19 >/dev/null
fi

ptxas=.tools/nvcc-12.9.86/nvidia/cuda_nvcc/bin/ptxas
if [ ! -x "$ptxas" ]; then
    echo "install-asm-tools: installing ptxas 12.9.86 into .tools/nvcc-12.9.86 (pip)" >&2
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
        --target .tools/nvcc-12.9.86 nvidia-cuda-nvcc-cu12==12.9.86 >/dev/null
fi
# (capture first: `ptxas | grep -q` under pipefail fails when grep exits early and ptxas gets SIGPIPE)
ptxas_version=$("$ptxas" --version)
case "$ptxas_version" in
    *V12.9.86*) ;;
    *) echo "install-asm-tools: $ptxas is not V12.9.86" >&2; exit 1 ;;
esac

# cuobjdump 13.5.37 (PyPI has no -cu12 build; 13.5 reads the ABI-7 sm_90a and ABI-8 sm_100a cubins
# that ptxas 12.9 writes). Used only by the loader's cross-check test against `cuobjdump -res-usage`.
cuobjdump=.tools/cu13/nvidia/cu13/bin/cuobjdump
if [ ! -x "$cuobjdump" ]; then
    echo "install-asm-tools: installing cuobjdump 13.5.37 into .tools/cu13 (pip)" >&2
    python3 -m pip install --quiet --disable-pip-version-check --no-deps \
        --target .tools/cu13 nvidia-cuda-cuobjdump==13.5.37 >/dev/null
fi
