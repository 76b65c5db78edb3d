//! The assembled mHC kernels as data: every code object under `asm/bin` (cubins for sm_90a and
//! sm_100a, AMDGPU code objects for gfx942), the kernel catalogue (`asm/catalogue.toml`: one row
//! per variant with its constraints, launch geometry and argument layout) and the tuned tables
//! (`asm/tuning/<arch>.toml`). No code runs here: `mhc-loader` parses these, the `mhc` runtime
//! loads them. The sources (`asm/ptx`, `asm/gcn`) stay in the repository; `mhc asm` assembles
//! them into `asm/bin` and writes the image table (`images.rs`).
#![forbid(unsafe_code)]

mod images;

/// The argument layouts and launch constants of the generated kernels, written by the PTX
/// generator (`python3 -m asm.gen`) from the same definitions as the kernels' parameter loads.
pub mod abi {
    // Written by the generator, checked byte for byte by `python3 -m asm.gen --check`.
    #[rustfmt::skip]
    pub mod sm90;
}

/// One embedded code object.
#[derive(Debug, Clone, Copy)]
pub struct EmbeddedImage {
    /// Path relative to the repository root, e.g. `asm/bin/sm90/coeffs.cubin`: the name the
    /// catalogue's `file` fields use.
    pub path: &'static str,
    /// The file's bytes.
    pub bytes: &'static [u8],
}

pub use images::IMAGES;

/// The embedded image at `path` (relative to the repository root).
pub fn image(path: &str) -> Option<&'static EmbeddedImage> {
    IMAGES.iter().find(|i| i.path == path)
}

/// Where the catalogue lives, relative to the repository root.
pub const CATALOGUE_PATH: &str = "asm/catalogue.toml";

/// The kernel catalogue's text.
pub const CATALOGUE: &str = include_str!("../catalogue.toml");

/// The tuned tables, one per architecture: (path relative to the repository root, text).
pub const TUNED_TABLES: [(&str, &str); 3] = [
    ("asm/tuning/sm_90a.toml", include_str!("../tuning/sm_90a.toml")),
    ("asm/tuning/sm_100a.toml", include_str!("../tuning/sm_100a.toml")),
    ("asm/tuning/gfx942.toml", include_str!("../tuning/gfx942.toml")),
];
