//! Code-object loader: parses cubins and AMDGPU code objects into `Arch` and per-kernel
//! resources; holds the variant registry and the selector. No GPU, no FFI, no `unsafe`.
//!
//! Data flows one way: `asm/bin/*` images (embedded by [`embedded`], a table `mhc asm`
//! generates) -> [`parse`] -> [`KernelInfo`] -> the [`registry`] joins them with
//! `asm/variants.toml` -> [`select`] picks a variant for an (arch, stage, shape, budget).
#![forbid(unsafe_code)]

mod amdgpu;
pub mod arch;
mod cubin;
pub mod embedded;
mod embedded_images;
pub mod image;

pub use arch::{AmdFeatures, Arch, FeatureMode, UnsupportedArch, Vendor};
pub use image::{parse, render, AmdResources, CodeObject, KernelInfo, Param, ParseError};
pub mod manifest;

/// Lowercase hex SHA-256 of `bytes` (image hashes in the manifest and the tuned tables).
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}
