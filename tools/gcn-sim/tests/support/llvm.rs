//! The LLVM 19 tools the tests use: clang-19 compiles the cross-check kernels (`cross/*.cl`) to
//! gfx942 code objects, llvm-objdump-19 prints the reference disassembly. The test command
//! (`tools/test.sh`) installs both (`tools/install-asm-tools.sh`), so a missing tool is a test
//! failure, not a skip.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One compiled variant of a cross-check source.
pub struct Variant {
    /// Name of the variant (the image's name).
    pub name: &'static str,
    /// Source file under `cross/`.
    pub source: &'static str,
    /// clang flags besides the common ones.
    pub flags: &'static [&'static str],
}

/// Every compiled variant of the suite.
pub const VARIANTS: &[Variant] = &[
    Variant { name: "int", source: "int.cl", flags: &[] },
    Variant { name: "float", source: "float.cl", flags: &["-ffp-contract=off"] },
    Variant { name: "mem", source: "mem.cl", flags: &[] },
    Variant { name: "lds", source: "lds.cl", flags: &[] },
    Variant { name: "lanes", source: "lanes.cl", flags: &[] },
    Variant { name: "flow", source: "flow.cl", flags: &[] },
    Variant { name: "atomics", source: "atomics.cl", flags: &["-munsafe-fp-atomics"] },
    Variant {
        name: "trans",
        source: "trans.cl",
        flags: &["-cl-fp32-correctly-rounded-divide-sqrt", "-ffp-contract=off"],
    },
    Variant {
        name: "fdiv_cr",
        source: "fdiv.cl",
        flags: &["-cl-fp32-correctly-rounded-divide-sqrt", "-ffp-contract=off"],
    },
    Variant { name: "fdiv_fast", source: "fdiv.cl", flags: &["-ffp-contract=off"] },
    Variant {
        name: "fdiv_ftz",
        source: "fdiv.cl",
        flags: &["-cl-fp32-correctly-rounded-divide-sqrt", "-cl-denorms-are-zero", "-ffp-contract=off"],
    },
];

const COMMON: &[&str] = &[
    "-x",
    "cl",
    "-cl-std=CL2.0",
    "-cl-kernel-arg-info",
    "--target=amdgcn-amd-amdhsa",
    "-mcpu=gfx942",
    "-O2",
    "-nogpulib",
    "-c",
];

fn cross_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("cross")
}

fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!(
            "{what}: cannot run {:?} ({e}); the test command installs LLVM 19 (tools/install-asm-tools.sh)",
            cmd.get_program()
        )
    });
    assert!(out.status.success(), "{what} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// The compiled images (name, path of the `.hsaco`, bytes), built once per test binary into a
/// directory under the target dir keyed by a hash of the sources and flags (so a rebuild only
/// happens when a source changes).
pub fn images() -> &'static [(&'static str, PathBuf, Vec<u8>)] {
    static IMAGES: OnceLock<Vec<(&'static str, PathBuf, Vec<u8>)>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let dir = cross_dir();
        let header = std::fs::read(dir.join("common.h")).expect("cross/common.h");
        let version = Command::new("clang-19").arg("--version").output().unwrap_or_else(|e| {
            panic!("clang-19 is not installed ({e}): the test command installs it (tools/install-asm-tools.sh)")
        });
        let mut out = Vec::new();
        for v in VARIANTS {
            let src = std::fs::read(dir.join(v.source)).unwrap_or_else(|e| panic!("cross/{}: {e}", v.source));
            let mut h = fnv(&header, 0xcbf2_9ce4_8422_2325);
            h = fnv(&src, h);
            h = fnv(&version.stdout, h);
            for f in COMMON.iter().chain(v.flags) {
                h = fnv(f.as_bytes(), h);
            }
            let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gcn-sim-cross");
            std::fs::create_dir_all(&cache).expect("cache dir");
            let hsaco = cache.join(format!("{}-{h:016x}.hsaco", v.name));
            if !hsaco.exists() {
                let obj = cache.join(format!("{}-{h:016x}.{}.o", v.name, std::process::id()));
                let mut c = Command::new("clang-19");
                c.args(COMMON).args(v.flags).arg("-I").arg(&dir).arg(dir.join(v.source)).arg("-o").arg(&obj);
                run(&mut c, &format!("clang-19 {}", v.source));
                let tmp = cache.join(format!("{}-{h:016x}.{}.hsaco", v.name, std::process::id()));
                run(Command::new("ld.lld-19").arg("-shared").arg("-o").arg(&tmp).arg(&obj), "ld.lld-19");
                std::fs::remove_file(&obj).ok();
                std::fs::rename(&tmp, &hsaco).expect("publish the image");
            }
            let bytes = std::fs::read(&hsaco).expect("image");
            out.push((v.name, hsaco, bytes));
        }
        out
    })
}

/// The image of variant `name`.
pub fn image(name: &str) -> &'static [u8] {
    &images().iter().find(|(n, _, _)| *n == name).unwrap_or_else(|| panic!("no variant {name}")).2
}

/// (offset from the kernel start, assembly text, words) of every instruction llvm-objdump-19
/// prints for `kernel`; the text has its whitespace collapsed.
pub fn objdump(path: &Path, kernel: &str) -> Vec<(u32, String, Vec<u32>)> {
    let out = Command::new("llvm-objdump-19")
        .args(["-d", "--mcpu=gfx942", &format!("--disassemble-symbols={kernel}")])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("llvm-objdump-19 does not run ({e}); the test command installs LLVM 19"));
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

/// Checks the decoder against llvm-objdump-19 on every kernel of the image at `path`: same
/// boundaries and words, same mnemonic, same operands. Returns the instructions checked.
/// `fixtures`: kernels that do not decode (a fixture of an unsupported instruction) are skipped.
pub fn check_decoder(path: &Path, bytes: &[u8], fixtures: bool) -> usize {
    use gcn_sim::decode::{decode_all, disassemble, full_mnemonic};
    use gcn_sim::elf::{kernel_code, kernel_names};
    let mut checked = 0;
    for name in kernel_names(bytes).unwrap() {
        let code = kernel_code(bytes, &name).unwrap_or_else(|e| panic!("{}: {name}: {e}", path.display()));
        let ours = match decode_all(&code) {
            Ok(d) => d,
            Err(_) if fixtures => continue,
            Err(e) => panic!("{} {name}: {e}", path.display()),
        };
        // objdump runs on to the next symbol (alignment padding): keep the kernel's bytes.
        let theirs: Vec<_> =
            objdump(path, &name).into_iter().filter(|(off, _, _)| (*off as usize) < code.len()).collect();
        assert_eq!(ours.len(), theirs.len(), "{} {name}: instruction count", path.display());
        for (i, (o, (off, text, words))) in ours.iter().zip(&theirs).enumerate() {
            let raw: Vec<u32> = code[o.offset as usize..o.offset as usize + o.len as usize]
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!((o.offset, &raw), (*off, words), "{} {name} #{i}: boundaries/words", path.display());
            let mnemonic = text.split(' ').next().unwrap_or("");
            assert_eq!(full_mnemonic(o), mnemonic, "{} {name} +0x{off:x}: mnemonic", path.display());
            assert_eq!(&disassemble(o), text, "{} {name} +0x{off:x}: operands", path.display());
            checked += 1;
        }
    }
    checked
}
