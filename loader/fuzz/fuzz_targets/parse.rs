//! Any byte string must parse to a code object or an `Err`, never panic, hang or over-allocate;
//! a successful parse must also render (the snapshot path) and survive the catalogue's measure.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = mhc_loader::parse(data) {
        let _ = mhc_loader::render(&object);
        // `measure` parses the image again per kernel: a few kernels exercise it, all of them
        // would make this target quadratic in the kernel count.
        for k in object.kernels.iter().take(4) {
            let _ = mhc_loader::catalogue::measure(data, &k.name);
        }
    }
});
