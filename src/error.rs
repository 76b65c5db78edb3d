//! The one error type of the crate. Every bad input is reported here, before anything is
//! launched or written.

use std::fmt;

/// Everything that can go wrong, with enough context to act on it. New kinds may be added:
/// match with a wildcard arm.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No GPU of the requested kind is present.
    #[error("no device: {0}")]
    NoDevice(String),
    /// A vendor library (libcuda, libamdhip64) or one of its symbols could not be opened.
    #[error("vendor library missing (tried {tried:?})")]
    LibraryMissing {
        /// The library names tried, or the `library:symbol` names that did not resolve.
        tried: Vec<String>,
    },
    /// A driver call failed.
    #[error("driver call {call} failed with code {code}{}", name.map(|n| format!(" ({n})")).unwrap_or_default())]
    Driver {
        /// The driver or runtime function that failed (e.g. `cuLaunchKernel`).
        call: &'static str,
        /// Its status code (`CUresult`, `hipError_t`).
        code: i64,
        /// The driver's name for the code (e.g. `CUDA_ERROR_OUT_OF_MEMORY`), where it has one.
        name: Option<&'static str>,
    },
    /// The device's architecture has no kernels in this build.
    #[error("unsupported architecture: {0}")]
    UnsupportedArch(String),
    /// No variant accepts this stage and shape; `rejected` says why each candidate was refused.
    #[error("no variant for stage {stage} on {arch} at {shape}: {}", rejected.join("; "))]
    NoVariant {
        /// The stage asked for.
        stage: String,
        /// The device's architecture, by name.
        arch: String,
        /// The shape asked for (T, n, C, dtype, options).
        shape: String,
        /// One line per refused variant: its id and the reason.
        rejected: Vec<String>,
    },
    /// A tensor's shape, length or stride does not fit the problem.
    #[error("shape of {what}: expected {expected}, got {got}")]
    Shape {
        /// The tensor (or size) at fault, by its argument name.
        what: &'static str,
        /// What the problem needs.
        expected: String,
        /// What was given.
        got: String,
    },
    /// A tensor's storage type is not the one the configuration asks for.
    #[error("dtype of {tensor}: expected {expected}, got {got}")]
    Dtype {
        /// The tensor, by its argument name.
        tensor: &'static str,
        /// The storage type the configuration asks for.
        expected: crate::Dtype,
        /// The tensor's storage type.
        got: crate::Dtype,
    },
    /// A device pointer or row stride is not aligned as the kernel needs.
    #[error("alignment of {tensor}: must be a multiple of {required} bytes")]
    Alignment {
        /// The tensor, by its argument name.
        tensor: &'static str,
        /// The alignment its address (and row stride in bytes) needs, bytes.
        required: usize,
    },
    /// A configuration value is out of range (n, C, iterations, epsilons).
    #[error("invalid configuration: {what} {reason}")]
    Config {
        /// The value at fault (`n`, `C`, `sinkhorn_iters`, `eps_hc`, ...).
        what: &'static str,
        /// Why it is out of range.
        reason: String,
    },
    /// A tensor (or workspace) on another device than the plan's, or a workspace of another
    /// plan or stream.
    #[error("{tensor} is on device {tensor_device}, the plan on device {plan_device}")]
    Device {
        /// The tensor (or `workspace`), by its argument name.
        tensor: &'static str,
        /// The ordinal of the device it is on.
        tensor_device: u32,
        /// The ordinal of the plan's device.
        plan_device: u32,
    },
    /// A workspace given to a plan that did not make it, or to a second stream.
    #[error("workspace: {0}")]
    Workspace(String),
    /// An output whose memory overlaps another argument of the same call: the kernels' stores
    /// would change what other threads still read, or race each other.
    #[error("{tensor} overlaps {other}: an output must use memory no other argument of the call uses")]
    Overlap {
        /// The output, by its argument name.
        tensor: &'static str,
        /// The argument it overlaps.
        other: &'static str,
    },
    /// A parameter holds NaN or infinity.
    #[error("{tensor} holds a non-finite value at index {index}")]
    NonFinite {
        /// The tensor, by its argument name.
        tensor: &'static str,
        /// The index, in elements of its data, of the first non-finite value found.
        index: usize,
    },
    /// An embedded or user-supplied code object is malformed or does not match the catalogue.
    #[error("bad code object {image}: {reason}")]
    BadCodeObject {
        /// The image's path as the catalogue names it (`asm/bin/...`), or what it is.
        image: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for a shape error.
    pub fn shape(what: &'static str, expected: impl fmt::Display, got: impl fmt::Display) -> Self {
        Error::Shape { what, expected: expected.to_string(), got: got.to_string() }
    }
}
