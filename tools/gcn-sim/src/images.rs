//! The gfx942 code objects the simulator runs: the committed `asm/bin/gfx942/*.hsaco` files
//! (assembled from `asm/gcn/gfx942/*.s` by `mhc asm`), embedded at build time.

/// (file stem, image bytes) of every embedded gfx942 image.
pub const IMAGES: &[(&str, &[u8])] = &[
    ("apply", include_bytes!("../../../asm/bin/gfx942/apply.hsaco")),
    ("coeffs", include_bytes!("../../../asm/bin/gfx942/coeffs.hsaco")),
    ("post", include_bytes!("../../../asm/bin/gfx942/post.hsaco")),
    ("proj", include_bytes!("../../../asm/bin/gfx942/proj.hsaco")),
];

/// The image holding kernel family `stem` (e.g. `post`).
pub fn image(stem: &str) -> Option<&'static [u8]> {
    IMAGES.iter().find(|(s, _)| *s == stem).map(|(_, b)| *b)
}
