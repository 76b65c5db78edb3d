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
    LibraryMissing { tried: Vec<String> },
    /// A driver call failed.
    #[error("driver call {call} failed with code {code}{}", name.map(|n| format!(" ({n})")).unwrap_or_default())]
    Driver { call: &'static str, code: i64, name: Option<&'static str> },
    /// The device's architecture has no kernels in this build.
    #[error("unsupported architecture: {0}")]
    UnsupportedArch(String),
    /// No variant accepts this stage and shape; `rejected` says why each candidate was refused.
    #[error("no variant for stage {stage} on {arch} at {shape}: {}", rejected.join("; "))]
    NoVariant { stage: String, arch: String, shape: String, rejected: Vec<String> },
    /// A tensor's shape, length or stride does not fit the problem.
    #[error("shape of {what}: expected {expected}, got {got}")]
    Shape { what: &'static str, expected: String, got: String },
    /// A tensor's storage type is not the one the configuration asks for.
    #[error("dtype of {tensor}: expected {expected}, got {got}")]
    Dtype { tensor: &'static str, expected: crate::Dtype, got: crate::Dtype },
    /// A device pointer or row stride is not aligned as the kernel needs.
    #[error("alignment of {tensor}: must be a multiple of {required} bytes")]
    Alignment { tensor: &'static str, required: usize },
    /// A configuration value is out of range (n, C, iterations, epsilons).
    #[error("invalid configuration: {what} {reason}")]
    Config { what: &'static str, reason: String },
    /// A tensor (or workspace) on another device than the plan's, or a workspace of another
    /// plan or stream.
    #[error("{tensor} is on device {tensor_device}, the plan on device {plan_device}")]
    Device { tensor: &'static str, tensor_device: u32, plan_device: u32 },
    /// A workspace given to a plan that did not make it, or to a second stream.
    #[error("workspace: {0}")]
    Workspace(String),
    /// A parameter holds NaN or infinity.
    #[error("{tensor} holds a non-finite value at index {index}")]
    NonFinite { tensor: &'static str, index: usize },
    /// An embedded or user-supplied code object is malformed or does not match the catalogue.
    #[error("bad code object {image}: {reason}")]
    BadCodeObject { image: String, reason: String },
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Shorthand for a shape error.
    pub fn shape(what: &'static str, expected: impl fmt::Display, got: impl fmt::Display) -> Self {
        Error::Shape { what, expected: expected.to_string(), got: got.to_string() }
    }
}
