//! The gfx942 code objects the simulator runs: the committed `asm/bin/gfx942/*.hsaco` files
//! (assembled from `asm/gcn/gfx942/*.s` by `mhc asm`), taken from the loader's embedded-image
//! table so the simulator always runs exactly what the library ships.

/// Path (relative to the repository root) of the image of kernel family `stem`.
pub fn path(stem: &str) -> String {
    format!("asm/bin/gfx942/{stem}.hsaco")
}

/// The image holding kernel family `stem` (e.g. `post`).
pub fn image(stem: &str) -> Option<&'static [u8]> {
    mhc_loader::embedded::image(&path(stem)).map(|i| i.bytes)
}

/// (path, bytes) of every embedded gfx942 image.
pub fn all() -> impl Iterator<Item = (&'static str, &'static [u8])> {
    mhc_loader::embedded::IMAGES.iter().filter(|i| i.path.starts_with("asm/bin/gfx942/")).map(|i| (i.path, i.bytes))
}
