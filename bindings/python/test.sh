#!/usr/bin/env bash
# The Python package's tests on a machine without a GPU: installs what they need when missing
# (maturin, numpy, pytest from PyPI), builds the abi3 wheel with maturin (debug profile: the
# tests need no speed; bindings/gpu/pack.sh builds the release wheel), installs it and runs the
# tests against the installed package (the NumPy reference, every error path, the descriptor path;
# the torch tests when torch imports). MHC_TEST_TORCH=1 also installs PyTorch from PyPI (about 3 GB
# with its CUDA libraries, which `import torch` loads even on a machine without a GPU).
set -euo pipefail
cd "$(dirname "$0")"
here="$(pwd)"
target="$(cd ../.. && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
pip() { python3 -m pip --disable-pip-version-check -q "$@" 2>&1 | grep -v -e '^WARNING: Running pip as' -e 'pip.pypa.io/warnings/venv' || true; }

python3 -c 'import maturin' 2>/dev/null || command -v maturin >/dev/null || pip install "maturin>=1.5,<2"
python3 -c 'import numpy, pytest' 2>/dev/null || pip install numpy pytest
if [ "${MHC_TEST_TORCH:-0}" = 1 ] && ! python3 -c 'import torch' 2>/dev/null; then
    pip install torch
fi

wheels="$target/wheels"
rm -f "$wheels"/mhc-*.whl
maturin build --quiet -o "$wheels" 2>&1 | grep -v -e '^📦' -e '^🔗' -e '^🐍' -e '^⚠' || true
wheel=$(ls "$wheels"/mhc-*-abi3-*.whl)
echo "wheel: $(basename "$wheel")"
pip install --force-reinstall --no-deps "$wheel"
# From outside the source tree, so the installed package is what the tests import.
cd "$(mktemp -d)"
python3 -c 'import mhc, sys; print("mhc", mhc.__version__, "torch ops:", "registered" if mhc.ops else "not registered (torch is not importable)")'
python3 -m pytest -q -p no:cacheprovider "$here/tests"
