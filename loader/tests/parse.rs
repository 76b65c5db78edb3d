//! The parsers on real images: hand-checked figures for the fixtures (against `ptxas -v` and
//! `llvm-readelf-19 --notes`), golden snapshots of every fixture and every embedded image,
//! rejection of foreign and inconsistent inputs, and a seeded mutation/truncation storm that must
//! produce `Err`s and never a panic.

use mhc_loader::{parse, render, Arch, FeatureMode};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every image the loader must read: the fixtures and every embedded `asm/bin` image.
fn all_images() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("cubin" | "hsaco")))
        .collect();
    names.sort();
    for p in names {
        let rel = p.strip_prefix(repo_root()).unwrap().to_string_lossy().into_owned();
        out.push((rel, std::fs::read(&p).unwrap()));
    }
    for img in mhc_loader::embedded::IMAGES {
        out.push((img.path.to_string(), img.bytes.to_vec()));
    }
    out
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

#[test]
fn cubin_fixtures_match_ptxas() {
    for (file, arch) in [("fx_sm90.cubin", Arch::Sm90a), ("fx_sm100.cubin", Arch::Sm100a)] {
        let o = parse(&fixture(file)).unwrap();
        assert_eq!(o.arch, arch);
        // ptxas -v: "Used 12 registers", 0 stack; .maxntid 256; 3 x u64 + u32 = 28 bytes.
        let v = o.kernel("fx_vadd").unwrap();
        assert_eq!((v.registers, v.shared_bytes, v.local_bytes, v.max_threads, v.kernarg_bytes), (12, 0, 0, 256, 28));
        assert_eq!(v.params.iter().map(|p| (p.offset, p.size)).collect::<Vec<_>>(), [(0, 8), (8, 8), (16, 8), (24, 4)]);
        assert_eq!((v.required_threads, v.register_cap), (None, None));
        // ptxas -v: "Used 14 registers ... 64 bytes stack frame ... 1024 bytes smem"; .reqntid 128,
        // .maxnreg 64; the 24-byte struct is 16-aligned, so the buffer is 40 bytes.
        let s = o.kernel("fx_smem").unwrap();
        assert_eq!(
            (s.registers, s.shared_bytes, s.local_bytes, s.max_threads, s.kernarg_bytes),
            (14, 1024, 64, 128, 40)
        );
        assert_eq!((s.required_threads, s.register_cap), (Some([128, 1, 1]), Some(64)));
        assert_eq!(s.params[2].size, 24);
    }
}

#[test]
fn amd_fixtures_match_the_metadata_and_descriptors() {
    let o = parse(&fixture("fx_gfx942.hsaco")).unwrap();
    assert_eq!(o.arch, Arch::Gfx942(mhc_loader::AmdFeatures::ANY));
    let v = o.kernel("fx_vadd").unwrap();
    let a = v.amd.unwrap();
    // llvm-readelf --notes: vgpr 4, sgpr 22, agpr 0, kernarg 28; KD: next_free_vgpr 4 -> 8,
    // next_free_sgpr 16 + 6 extra -> 24.
    assert_eq!((v.registers, a.vgpr, a.sgpr, a.agpr, a.vgpr_alloc, a.sgpr_alloc), (4, 4, 22, 0, 8, 24));
    assert_eq!((v.kernarg_bytes, v.max_threads, a.wavefront_size), (28, 256, 64));
    assert_eq!(v.params[3].name.as_deref(), Some("len"));
    assert_eq!(v.params[3].kind.as_deref(), Some("by_value"));
    let l = o.kernel("fx_lds").unwrap();
    let a = l.amd.unwrap();
    assert_eq!((l.shared_bytes, l.local_bytes, a.agpr, a.accum_offset, a.vgpr_alloc), (1024, 16, 4, 8, 16));

    let o = parse(&fixture("fx_gfx942_sramecc.hsaco")).unwrap();
    assert_eq!(o.arch.target_id(), "gfx942:sramecc+:xnack-");
    assert_eq!(o.arch.amd_features().unwrap().xnack, FeatureMode::Off);
}

#[test]
fn foreign_and_inconsistent_images_are_rejected() {
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let err = parse(&exe).unwrap_err().to_string();
    assert!(err.contains("e_machine") || err.contains("64-bit"), "{err}");
    assert!(parse(b"").is_err());
    assert!(parse(b"\x7fELF").is_err());
    assert!(parse(&[0u8; 4096]).is_err());

    // A cubin whose e_flags say plain sm_90 (no `a`): mhc ships arch-specific cubins only.
    let mut c = fixture("fx_sm90.cubin");
    c[48..52].copy_from_slice(&0x005a055au32.to_le_bytes());
    assert!(parse(&c).unwrap_err().to_string().contains("sm_90"));
    // An unknown ELF ABI version.
    let mut c = fixture("fx_sm90.cubin");
    c[8] = 9;
    assert!(parse(&c).unwrap_err().to_string().contains("ABI version"));

    // An hsaco whose descriptor disagrees with its note: bump fx_vadd.kd's LDS size.
    let h = fixture("fx_gfx942.hsaco");
    let kd = find(&h, &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x00]).unwrap();
    let mut bad = h.clone();
    bad[kd] = 0x40;
    let err = parse(&bad).unwrap_err().to_string();
    assert!(err.contains("group_segment_fixed_size"), "{err}");
    // ... or allocates more VGPRs than the note's counts round to.
    let mut bad = h.clone();
    bad[kd + 48] |= 0x3;
    let err = parse(&bad).unwrap_err().to_string();
    assert!(err.contains("VGPRs"), "{err}");
    // An unknown MACH.
    let mut bad = h;
    bad[48] = 0x30;
    assert!(parse(&bad).unwrap_err().to_string().contains("MACH"));
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Golden files under tests/snapshots, one per image; `MHC_BLESS=1` rewrites them.
#[test]
fn snapshots_of_every_image() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let bless = std::env::var_os("MHC_BLESS").is_some();
    let mut failures = Vec::new();
    let mut expected_files = Vec::new();
    for (path, bytes) in all_images() {
        let text = match parse(&bytes) {
            Ok(o) => render(&o),
            Err(e) => panic!("{path}: {e}"),
        };
        let file = dir.join(format!("{}.txt", path.replace('/', "__")));
        expected_files.push(file.clone());
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&file, &text).unwrap();
        } else {
            match std::fs::read_to_string(&file) {
                Ok(golden) if golden == text => {}
                Ok(golden) => failures
                    .push(format!("{path}: differs from {}\n--- golden\n{golden}--- now\n{text}", file.display())),
                Err(_) => failures.push(format!("{path}: no snapshot {} (run with MHC_BLESS=1)", file.display())),
            }
        }
    }
    if !bless {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if !expected_files.contains(&p) {
                failures.push(format!("stale snapshot {} (run with MHC_BLESS=1 and delete it)", p.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Thousands of random truncations and byte/word mutations of every real image: each must parse
/// or fail with `Err`; a panic fails the test (and prints the seed and the image).
#[test]
fn mutations_and_truncations_never_panic() {
    let start = std::time::Instant::now();
    let mut rng = Rng(0x6d68_635f_6c6f_6164);
    let mut runs = 0usize;
    for (path, original) in all_images() {
        for round in 0..2500 {
            let mut m = original.clone();
            if round % 5 == 0 {
                m.truncate(rng.below(original.len()));
            } else {
                for _ in 0..1 + rng.below(6) {
                    // Headers and tables sit at both ends of these files: bias a third of the hits
                    // to the first 64 bytes and to the section header table at the end.
                    let at = match rng.below(3) {
                        0 => rng.below(64.min(m.len())),
                        1 => m.len() - 1 - rng.below(1024.min(m.len())),
                        _ => rng.below(m.len()),
                    };
                    match rng.below(4) {
                        0 => m[at] ^= 1 << rng.below(8),
                        1 => m[at] = rng.next() as u8,
                        2 => {
                            let at = at & !3;
                            let word: u32 = [0, 1, 0xff, 0xffff_ffff, 0x8000_0000, 64, 1024][rng.below(7)];
                            let end = (at + 4).min(m.len());
                            m[at..end].copy_from_slice(&word.to_le_bytes()[..end - at]);
                        }
                        _ => m[at] = m[at].wrapping_add(1),
                    }
                }
            }
            let result = std::panic::catch_unwind(|| parse(&m).map(|o| render(&o)));
            assert!(result.is_ok(), "{path}: panic on mutation round {round}");
            runs += 1;
        }
    }
    assert!(runs >= 10_000, "only {runs} mutations");
    eprintln!("{runs} mutated images parsed without a panic in {:?}", start.elapsed());
}
