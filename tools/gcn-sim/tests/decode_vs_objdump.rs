//! The decoder against `llvm-objdump-19 -d --mcpu=gfx942` on every embedded gfx942 kernel, the
//! hazard fixtures and the clang-compiled cross-check suite: same instruction boundaries, same
//! raw words, same text (mnemonic and every operand, as `gcn_sim::decode::disassemble` prints
//! it). The test command installs LLVM 19; a missing llvm-objdump-19 or clang-19 fails.

#[path = "support/llvm.rs"]
mod llvm;

#[test]
fn decoder_agrees_with_llvm_objdump_on_every_embedded_kernel_and_fixture() {
    let dir = std::env::temp_dir().join(format!("gcn-sim-objdump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    let fixtures = [
        ("tools/gcn-sim/tests/fixtures/hazards.hsaco", &include_bytes!("fixtures/hazards.hsaco")[..]),
        ("tools/gcn-sim/tests/fixtures/wait_states.hsaco", &include_bytes!("fixtures/wait_states.hsaco")[..]),
        ("tools/gcn-sim/tests/fixtures/coherence.hsaco", &include_bytes!("fixtures/coherence.hsaco")[..]),
        ("tools/gcn-sim/tests/fixtures/semantics.hsaco", &include_bytes!("fixtures/semantics.hsaco")[..]),
    ];
    for (path, bytes) in gcn_sim::images::all().chain(fixtures) {
        let file = dir.join(path.replace('/', "_"));
        std::fs::write(&file, bytes).unwrap();
        checked += llvm::check_decoder(&file, bytes, path.contains("fixtures"));
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked > 1000, "only {checked} instructions checked: are the gfx942 images embedded?");
    println!("{checked} instructions agree with llvm-objdump-19");
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_the_clang_compiled_suite() {
    let mut checked = 0;
    for (name, path, bytes) in llvm::images() {
        let n = llvm::check_decoder(path, bytes, false);
        assert!(n > 20, "{name}: only {n} instructions");
        checked += n;
    }
    println!("{checked} instructions of the clang-compiled suite agree with llvm-objdump-19");
}
