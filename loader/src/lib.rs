//! Code-object loader: parses cubins and AMDGPU code objects into `Arch` and per-kernel
//! resources; holds the variant registry and the selector. No GPU, no FFI, no `unsafe`.
//!
//! Data flows one way: `asm/bin/*` images (embedded by [`embedded`], a table `mhc asm`
//! generates) -> [`parse`] -> [`KernelInfo`] -> the [`registry`] joins them with
//! `asm/catalogue.toml` ([`catalogue`]) -> [`select()`] picks a variant for an
//! (arch, stage, shape, budget), consulting the [`tuning`] tables.
//!
//! Stages are plain strings here (`"pre"`, `"post"`, `"coeffs"`, ...) so that this crate does not
//! depend on `mhc`; `mhc` maps its `Stage` enum onto them.
#![forbid(unsafe_code)]

mod amdgpu;
pub mod arch;
pub mod catalogue;
mod cubin;
pub mod embedded;
pub mod image;
pub mod registry;
pub mod select;
pub mod tuning;

pub use arch::{AmdFeatures, Arch, FeatureMode, UnsupportedArch, Vendor};
pub use catalogue::{CatalogueError, Geometry, Trait};
pub use image::{parse, render, AmdResources, CodeObject, KernelInfo, Param, ParseError};
pub use registry::{Registry, Resources, Variant};
pub use select::{select, Budget, Choice, NoVariant, Reason, Selection, Selector, Shape, TokenBucket};
pub use tuning::TunedTable;

/// Everything the loader can report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// `asm/catalogue.toml` is malformed.
    #[error(transparent)]
    Catalogue(#[from] CatalogueError),
    /// An image is missing, malformed, or disagrees with the catalogue.
    #[error("bad code object {image}: {reason}")]
    BadCodeObject { image: String, reason: String },
    /// A tuned table is malformed.
    #[error("tuned table {table}: {reason}")]
    Tuning { table: String, reason: String },
    /// No variant passed the filters.
    #[error(transparent)]
    NoVariant(#[from] NoVariant),
    #[error(transparent)]
    UnsupportedArch(#[from] UnsupportedArch),
}

/// Lowercase hex SHA-256 of `bytes` (image hashes in the catalogue and the tuned tables).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let mut s = String::with_capacity(64);
    for b in Sha256::digest(bytes) {
        let _ = write!(s, "{b:02x}");
    }
    s
}
