//! Any byte string must parse to a code object or an `Err`, never panic, hang or over-allocate;
//! a successful parse must also render (the snapshot path) and survive the catalogue's measure.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(object) = mhc_loader::parse(data) {
        let _ = mhc_loader::render(&object);
        for k in &object.kernels {
            let _ = mhc_loader::catalogue::measure(data, &k.name);
        }
    }
});
