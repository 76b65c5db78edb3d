//! Hostile code objects: register counts at the edge of 32 bits, and files with tens of thousands
//! of kernels. Each must give `Err` or a result, never a panic, and parse in time linear in the
//! file.

use mhc_loader::parse;
use std::path::Path;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)).unwrap()
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> usize {
    from + hay[from..].windows(needle.len()).position(|w| w == needle).expect("pattern in the fixture")
}

/// `fx_lds`'s metadata with `.vgpr_count = 0xFFFFFFFF` (its `.agpr_count` is 4): the msgpack
/// value grows by 4 bytes, paid for by renaming `.kernarg_segment_align` (not read by the loader)
/// to a 4-byte shorter key of the same map, so the note keeps its size.
fn hsaco_with_vgpr_count_max() -> Vec<u8> {
    let h = fixture("fx_gfx942.hsaco");
    let map = find(&h, b"\x8c\xab.agpr_count\x04", 0);
    let align = find(&h, b"\xb6.kernarg_segment_align", map);
    let vgpr = find(&h, b"\xab.vgpr_count\x08", map);
    assert!(align < vgpr);
    let mut out = h[..align].to_vec();
    out.extend_from_slice(b"\xb2.kernarg_seg_align");
    out.extend_from_slice(&h[align + 23..vgpr]);
    out.extend_from_slice(b"\xab.vgpr_count\xce\xff\xff\xff\xff");
    out.extend_from_slice(&h[vgpr + 13..]);
    assert_eq!(out.len(), h.len());
    out
}

#[test]
fn amd_register_counts_that_overflow_are_an_error() {
    let bad = hsaco_with_vgpr_count_max();
    let result = std::panic::catch_unwind(|| parse(&bad));
    let err = result.expect("the parser panicked").unwrap_err().to_string();
    assert!(err.contains("fx_lds") && err.contains("overflows"), "{err}");
}

/// A minimal sm_90a cubin (ELF ABI 7) with `kernels` entry symbols `k<i>`, a module-wide
/// `.nv.info` with their REGCOUNT records, and one `.nv.info.k<i>` section per kernel.
fn synthetic_cubin(kernels: usize) -> Vec<u8> {
    let mut shstrtab = b"\0.shstrtab\0.strtab\0.symtab\0.nv.info\0".to_vec();
    let mut strtab = vec![0u8];
    let mut symtab = vec![0u8; 24];
    let mut info = Vec::new();
    let mut per_kernel: Vec<(u32, Vec<u8>)> = Vec::new();
    for i in 0..kernels {
        let name = format!("k{i}");
        let sym_index = (i + 1) as u32;
        let section_index = (5 + i) as u16;
        let st_name = strtab.len() as u32;
        strtab.extend_from_slice(name.as_bytes());
        strtab.push(0);
        symtab.extend_from_slice(&st_name.to_le_bytes());
        symtab.push(0x12); // STB_GLOBAL, STT_FUNC
        symtab.push(0x10); // STO_CUDA_ENTRY
        symtab.extend_from_slice(&section_index.to_le_bytes());
        symtab.extend_from_slice(&[0; 16]);
        // REGCOUNT (SVAL, 8 bytes): symbol index, registers.
        info.extend_from_slice(&[0x04, 0x2f, 0x08, 0x00]);
        info.extend_from_slice(&sym_index.to_le_bytes());
        info.extend_from_slice(&32u32.to_le_bytes());
        let sh_name = shstrtab.len() as u32;
        shstrtab.extend_from_slice(format!(".nv.info.{name}\0").as_bytes());
        // MAX_THREADS (SVAL, 12 bytes): 128 x 1 x 1.
        let mut record = vec![0x04, 0x05, 0x0c, 0x00];
        for d in [128u32, 1, 1] {
            record.extend_from_slice(&d.to_le_bytes());
        }
        per_kernel.push((sh_name, record));
    }

    let mut data = vec![0u8; 64];
    // (name, type, offset, size, link, entsize)
    let mut headers: Vec<(u32, u32, u64, u64, u32, u64)> = vec![(0, 0, 0, 0, 0, 0)];
    let mut push = |data: &mut Vec<u8>, name: u32, kind: u32, bytes: &[u8], link: u32, entsize: u64| {
        headers.push((name, kind, data.len() as u64, bytes.len() as u64, link, entsize));
        data.extend_from_slice(bytes);
    };
    push(&mut data, 1, 3, &shstrtab, 0, 0); // .shstrtab
    push(&mut data, 11, 3, &strtab, 0, 0); // .strtab
    push(&mut data, 19, 2, &symtab, 2, 24); // .symtab -> .strtab
    push(&mut data, 27, 0x7000_0000, &info, 0, 0); // .nv.info (SHT_LOPROC)
    for (name, record) in &per_kernel {
        push(&mut data, *name, 0x7000_0000, record, 0, 0);
    }
    while data.len() % 8 != 0 {
        data.push(0);
    }
    let shoff = data.len() as u64;
    for &(name, kind, offset, size, link, entsize) in &headers {
        data.extend_from_slice(&name.to_le_bytes());
        data.extend_from_slice(&kind.to_le_bytes());
        data.extend_from_slice(&0u64.to_le_bytes()); // flags
        data.extend_from_slice(&0u64.to_le_bytes()); // addr
        data.extend_from_slice(&offset.to_le_bytes());
        data.extend_from_slice(&size.to_le_bytes());
        data.extend_from_slice(&link.to_le_bytes());
        data.extend_from_slice(&0u32.to_le_bytes()); // info
        data.extend_from_slice(&1u64.to_le_bytes()); // addralign
        data.extend_from_slice(&entsize.to_le_bytes());
    }
    let shnum = u16::try_from(headers.len()).expect("fewer than 65280 sections");
    let h = &mut data[..64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // ELFCLASS64
    h[5] = 1; // little-endian
    h[6] = 1; // EV_CURRENT
    h[7] = 0x33; // ELFOSABI_CUDA
    h[8] = 7; // ABI version 7: SM in e_flags & 0xff, `a` = 0x800
    h[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    h[18..20].copy_from_slice(&190u16.to_le_bytes()); // EM_CUDA
    h[20..24].copy_from_slice(&1u32.to_le_bytes());
    h[40..48].copy_from_slice(&shoff.to_le_bytes());
    h[48..52].copy_from_slice(&(90u32 | 0x800 | (90 << 16)).to_le_bytes());
    h[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
    h[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
    h[60..62].copy_from_slice(&shnum.to_le_bytes());
    h[62..64].copy_from_slice(&1u16.to_le_bytes()); // e_shstrndx
    data
}

#[test]
fn the_synthetic_cubin_parses_as_written() {
    let o = parse(&synthetic_cubin(3)).unwrap();
    assert_eq!(o.arch, mhc_loader::Arch::Sm90a);
    assert_eq!(o.kernels.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["k0", "k1", "k2"]);
    assert!(o.kernels.iter().all(|k| k.registers == 32 && k.max_threads == 128));
}

#[test]
fn a_cubin_of_32000_kernels_parses_in_linear_time() {
    let image = synthetic_cubin(32_000);
    let start = std::time::Instant::now();
    let o = parse(&image).unwrap();
    let took = start.elapsed();
    assert_eq!(o.kernels.len(), 32_000);
    assert!(o.kernels.iter().all(|k| k.max_threads == 128), "every .nv.info.<k> was read");
    // Linear: tens of milliseconds even unoptimised; the per-kernel section search took > 15 s.
    assert!(took < std::time::Duration::from_secs(1), "32,000 kernels took {took:?}");
}
