//! The decoder against `llvm-objdump-19 -d --mcpu=gfx942` on every embedded gfx942 kernel:
//! same instruction boundaries, same raw words, same text (mnemonic and every operand, as
//! `gcn_sim::decode::disassemble` prints it). The hazard fixtures are checked too. CI installs
//! LLVM 19; where llvm-objdump-19 is missing the test says so and skips.

use gcn_sim::decode::{decode_all, disassemble, full_mnemonic};
use gcn_sim::elf::{kernel_names, load_kernel};
use std::process::Command;

/// (offset from the kernel start, assembly text, words) of every instruction objdump prints
/// for `kernel`; the text has its whitespace collapsed.
fn objdump(path: &std::path::Path, kernel: &str) -> Vec<(u32, String, Vec<u32>)> {
    let out = Command::new("llvm-objdump-19")
        .args(["-d", "--mcpu=gfx942", &format!("--disassemble-symbols={kernel}")])
        .arg(path)
        .output()
        .expect("llvm-objdump-19 runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let mut start = None;
    let mut insts = Vec::new();
    for line in text.lines() {
        if line.ends_with(&format!("<{kernel}>:")) {
            start = Some(u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap());
            continue;
        }
        let Some(start) = start else { continue };
        let Some((asm, comment)) = line.split_once("//") else { continue };
        let Some((addr, words)) = comment.trim().split_once(':') else { continue };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else { continue };
        let words: Vec<u32> = words
            .split_whitespace()
            .take_while(|w| !w.starts_with('<'))
            .map(|w| u32::from_str_radix(w, 16).unwrap())
            .collect();
        let text = asm.split_whitespace().collect::<Vec<_>>().join(" ");
        insts.push(((addr - start) as u32, text, words));
    }
    insts
}

#[test]
fn decoder_agrees_with_llvm_objdump_on_every_embedded_kernel() {
    if Command::new("llvm-objdump-19").arg("--version").output().is_err() {
        println!("SKIPPED: llvm-objdump-19 is not installed (CI installs LLVM 19)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("gcn-sim-objdump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut checked = 0;
    let fixtures = [("tools/gcn-sim/tests/fixtures/hazards.hsaco", &include_bytes!("fixtures/hazards.hsaco")[..])];
    for (path, bytes) in gcn_sim::images::all().chain(fixtures) {
        let file = dir.join(path.replace('/', "_"));
        std::fs::write(&file, bytes).unwrap();
        for name in kernel_names(bytes).unwrap() {
            // The fixtures include kernels the simulator refuses at load (that is their point):
            // decode their code directly.
            let code = match load_kernel(bytes, &name) {
                Ok(k) => k.code,
                Err(_) => continue,
            };
            let ours = decode_all(&code).unwrap();
            // objdump runs on to the next symbol (alignment padding): keep the kernel's bytes.
            let theirs: Vec<_> =
                objdump(&file, &name).into_iter().filter(|(off, _, _)| (*off as usize) < code.len()).collect();
            assert_eq!(ours.len(), theirs.len(), "{path} {name}: instruction count");
            for (i, (o, (off, mn, words))) in ours.iter().zip(&theirs).enumerate() {
                let raw: Vec<u32> = code[o.offset as usize..o.offset as usize + o.len as usize]
                    .chunks(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                assert_eq!((o.offset, &raw), (*off, words), "{path} {name} #{i}: boundaries/words");
                let mnemonic = mn.split(' ').next().unwrap_or("");
                assert_eq!(full_mnemonic(o), mnemonic, "{path} {name} +0x{off:x}: mnemonic");
                assert_eq!(&disassemble(o), mn, "{path} {name} +0x{off:x}: operands");
                checked += 1;
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    assert!(checked > 1000, "only {checked} instructions checked: are the gfx942 images embedded?");
    println!("{checked} instructions agree with llvm-objdump-19");
}
