"""The exceptions of the `mhc` package. Every one is an `MhcError` and also the built-in class a
caller would catch for that kind of mistake (`ValueError` for shapes, `TypeError` for dtypes, ...);
`status` is the C ABI's status name (`"MHC_ERROR_SHAPE"`)."""


class MhcError(Exception):
    """Base class of every error raised by mhc."""

    status = "MHC_ERROR_INTERNAL"


class InvalidArgumentError(MhcError, ValueError):
    """An argument the ABI cannot take (a value out of range, an output overlapping an input)."""

    status = "MHC_ERROR_INVALID_ARGUMENT"


class ShapeError(MhcError, ValueError):
    """A tensor's shape, rows, row length or strides do not fit the op."""

    status = "MHC_ERROR_SHAPE"


class DtypeError(MhcError, TypeError):
    """A tensor's dtype is not the one the op takes."""

    status = "MHC_ERROR_DTYPE"


class AlignmentError(MhcError, ValueError):
    """A pointer or row stride is not aligned as the kernel needs (16 bytes for rows on GPUs)."""

    status = "MHC_ERROR_ALIGNMENT"


class ConfigError(MhcError, ValueError):
    """A configuration value is out of range (hc_mult, hidden size, iterations, epsilons)."""

    status = "MHC_ERROR_CONFIG"


class DeviceError(MhcError, RuntimeError):
    """No such device, a vendor library missing, a driver failure, tensors on different devices."""

    status = "MHC_ERROR_NO_DEVICE"


class UnsupportedError(MhcError, NotImplementedError):
    """No kernel serves this shape or dtype on this device (the message says why)."""

    status = "MHC_ERROR_NO_VARIANT"


class WorkspaceError(MhcError, RuntimeError):
    """A workspace of another plan or stream."""

    status = "MHC_ERROR_WORKSPACE"


class NonFiniteError(MhcError, ValueError):
    """A parameter holds NaN or infinity (the CPU reference checks this)."""

    status = "MHC_ERROR_NON_FINITE"


class InternalError(MhcError, RuntimeError):
    """A defect inside the library."""

    status = "MHC_ERROR_INTERNAL"


_BY_STATUS = {
    "MHC_ERROR_INVALID_ARGUMENT": InvalidArgumentError,
    "MHC_ERROR_SHAPE": ShapeError,
    "MHC_ERROR_DTYPE": DtypeError,
    "MHC_ERROR_ALIGNMENT": AlignmentError,
    "MHC_ERROR_CONFIG": ConfigError,
    "MHC_ERROR_NO_DEVICE": DeviceError,
    "MHC_ERROR_LIBRARY_MISSING": DeviceError,
    "MHC_ERROR_DRIVER": DeviceError,
    "MHC_ERROR_UNSUPPORTED_ARCH": DeviceError,
    "MHC_ERROR_WRONG_DEVICE": DeviceError,
    "MHC_ERROR_NO_VARIANT": UnsupportedError,
    "MHC_ERROR_UNSUPPORTED": UnsupportedError,
    "MHC_ERROR_WORKSPACE": WorkspaceError,
    "MHC_ERROR_NON_FINITE": NonFiniteError,
    "MHC_ERROR_BAD_CODE_OBJECT": InternalError,
    "MHC_ERROR_INTERNAL": InternalError,
}


def _make(status, message):
    """The exception for a status name and message (called by the native module)."""
    exc = _BY_STATUS.get(status, InternalError)(message)
    exc.status = status
    return exc
