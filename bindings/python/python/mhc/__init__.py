"""mhc: mHC (Manifold-Constrained Hyper-Connections) layers from hand-written GPU kernels.

- `mhc.reference`: the float64 reference of every stage on NumPy arrays (no torch, no GPU).
- `mhc.ops`: the ops on `torch.Tensor`s (`torch.ops.mhc.*`: CUDA kernels on the current stream,
  the reference on CPU tensors), traceable by `torch.compile` and capturable in CUDA graphs.
  Registered when torch is importable; `import mhc` never requires torch.

Both take DeepSeek-V4's conventions: a residual stream `[..., n, C]` (`n = hc_mult`), `hc_fn`,
`hc_scale`, `hc_base`. docs/embedding.md maps FlashInfer's, TileKernels' and vLLM's mHC ops onto
these.
"""

import importlib as _il
import importlib.util as _ilu

from . import _native, reference
from ._errors import (
    AlignmentError,
    ConfigError,
    DeviceError,
    DtypeError,
    InternalError,
    InvalidArgumentError,
    MhcError,
    NonFiniteError,
    ShapeError,
    UnsupportedError,
    WorkspaceError,
)

__version__ = _native.version()


def version():
    """The library version (the Rust crates' version)."""
    return _native.version()


def abi_version():
    """The C ABI version the extension was built with (`MHC_ABI_VERSION` of mhc.h)."""
    return _native.abi_version()


def cuda_device_count():
    """CUDA devices visible to the library (0 without libcuda)."""
    return _native.device_count(1)


ops = None
if _ilu.find_spec("torch") is not None:
    try:
        ops = _il.import_module(".ops", __name__)  # registers torch.ops.mhc.*
    except ImportError:  # a torch that cannot be imported here: the NumPy half still works
        ops = None

__all__ = [
    "reference",
    "ops",
    "version",
    "abi_version",
    "cuda_device_count",
    "MhcError",
    "InvalidArgumentError",
    "ShapeError",
    "DtypeError",
    "AlignmentError",
    "ConfigError",
    "DeviceError",
    "UnsupportedError",
    "WorkspaceError",
    "NonFiniteError",
    "InternalError",
]
