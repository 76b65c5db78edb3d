//! The committed header is what cbindgen makes of the crate today. `MHC_BLESS=1 cargo test -p
//! mhc-c --test header` rewrites it.

use std::path::PathBuf;

#[test]
fn committed_header_matches_the_sources() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut generated);
    let generated = String::from_utf8(generated).expect("the header is UTF-8");
    let path = crate_dir.join("include/mhc.h");
    if std::env::var_os("MHC_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write include/mhc.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed.lines().zip(generated.lines()).position(|(a, b)| a != b);
        panic!(
            "bindings/c/include/mhc.h is not what cbindgen generates from the sources (first difference at line {}); \
             run `MHC_BLESS=1 cargo test -p mhc-c --test header` and commit the header",
            line.map_or_else(|| "end".to_string(), |l| (l + 1).to_string())
        );
    }
}
