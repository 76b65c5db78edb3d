//! AMDGPU HSA code object (`e_machine` 224, code object v4/v5/v6) parsing, per docs/code-objects.md §3:
//!
//! * architecture: `e_flags` low byte = MACH, bits 8-9 XNACK, 10-11 SRAMECC;
//! * per kernel: the msgpack metadata note (`"AMDGPU"`, type 32) `amdhsa.kernels[i]`, and the
//!   64-byte kernel descriptor `<k>.kd` the hardware actually uses. For hand-written assembly the
//!   note is whatever was typed, so every figure is cross-checked against the descriptor:
//!   LDS, scratch and kernarg sizes must be equal; the VGPR/AGPR/SGPR counts must round up to the
//!   descriptor's granulated allocation; the descriptor's entry offset must point at the kernel.

use crate::arch::{AmdFeatures, Arch, FeatureMode};
use crate::image::{bad, i64_at, u32_at, AmdResources, CodeObject, KernelInfo, Param, ParseError};
use object::elf::{FileHeader64, SHT_DYNSYM, SHT_NOBITS, SHT_NOTE, SHT_SYMTAB};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader, Sym, SymbolTable};
use object::{LittleEndian as LE, SectionIndex};
use rmpv::Value;
use std::collections::HashMap;

const ELFOSABI_AMDGPU_HSA: u8 = 64;
const NT_AMDGPU_METADATA: u32 = 32;
const EF_AMDGPU_MACH_GFX90A: u32 = 0x3f;
const EF_AMDGPU_MACH_GFX942: u32 = 0x4c;
const EF_AMDGPU_MACH_GFX950: u32 = 0x4f;
/// Size of a kernel descriptor.
const KD_SIZE: usize = 64;
/// VGPR allocation granule of gfx90a / gfx94x / gfx950 (unified arch + acc file, wave64).
const VGPR_GRANULE: u32 = 8;
/// SGPR granule as encoded in COMPUTE_PGM_RSRC1 on gfx9.
const SGPR_GRANULE: u32 = 8;

fn round_up(x: u32, to: u32) -> u32 {
    x.max(1).div_ceil(to).saturating_mul(to)
}

/// Looks a key up in a msgpack map.
fn get<'a>(map: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    map.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

struct KernelMeta<'a> {
    map: &'a [(Value, Value)],
    name: String,
}

impl KernelMeta<'_> {
    fn u32(&self, key: &str) -> Result<u32, ParseError> {
        match get(self.map, key).and_then(Value::as_u64) {
            Some(v) => {
                u32::try_from(v).map_err(|_| ParseError(format!("kernel {}: {key} = {v} is too large", self.name)))
            }
            None => bad(format!("kernel {}: metadata lacks the integer {key}", self.name)),
        }
    }
    fn str(&self, key: &str) -> Result<&str, ParseError> {
        get(self.map, key)
            .and_then(Value::as_str)
            .ok_or_else(|| ParseError(format!("kernel {}: metadata lacks the string {key}", self.name)))
    }
}

pub(crate) fn parse(data: &[u8]) -> Result<CodeObject, ParseError> {
    let e = LE;
    let header = FileHeader64::<LE>::parse(data)?;
    let ident = header.e_ident();
    if ident.os_abi != ELFOSABI_AMDGPU_HSA {
        return bad(format!("AMDGPU ELF with OS/ABI {} (expected 64, AMDGPU HSA)", ident.os_abi));
    }
    // 2 = v4, 3 = v5, 4 = v6; the metadata version [1, N] must agree (N = version - 1).
    let co_version = match ident.abi_version {
        v @ 2..=4 => u64::from(v) + 2,
        v => return bad(format!("AMDGPU code object ABI version {v} (mhc reads v4, v5 and v6)")),
    };
    let flags = header.e_flags(e);
    let features =
        AmdFeatures { xnack: FeatureMode::from_code(flags >> 8), sramecc: FeatureMode::from_code(flags >> 10) };
    let arch = match flags & 0xff {
        EF_AMDGPU_MACH_GFX90A => Arch::Gfx90a(features),
        EF_AMDGPU_MACH_GFX942 => Arch::Gfx942(features),
        EF_AMDGPU_MACH_GFX950 => Arch::Gfx950(features),
        m => return bad(format!("AMDGPU MACH 0x{m:02x} (mhc loads gfx90a 0x3f, gfx942 0x4c, gfx950 0x4f)")),
    };
    if co_version >= 6 && flags >> 24 != 0 {
        return bad("generic-target code objects (gfx9-4-generic, ...) are not loaded by mhc");
    }

    let sections = header.sections(e, data)?;
    let desc = metadata_note(header, &sections, data)?;
    let meta = rmpv::decode::read_value(&mut &desc[..])
        .map_err(|err| ParseError(format!("metadata note is not valid msgpack: {err}")))?;
    let Some(top) = meta.as_map() else { return bad("metadata note is not a msgpack map") };

    match get(top, "amdhsa.version").and_then(Value::as_array).map(|v| v.iter().map(Value::as_u64).collect::<Vec<_>>())
    {
        Some(v) if v.len() == 2 && v[0] == Some(1) && v[1] == Some(co_version - 3) => {}
        other => {
            return bad(format!(
                "amdhsa.version {other:?} does not match code object v{co_version} (expected [1, {}])",
                co_version - 3
            ))
        }
    }
    if let Some(target) = get(top, "amdhsa.target") {
        let parsed = target.as_str().map(Arch::parse);
        if !matches!(parsed, Some(Ok(t)) if t == arch) {
            return bad(format!("amdhsa.target {target} does not match e_flags ({arch})"));
        }
    }
    let Some(list) = get(top, "amdhsa.kernels").and_then(Value::as_array) else {
        return bad("metadata lacks amdhsa.kernels");
    };

    // Kernel descriptors are looked up where the runtime looks: .dynsym (then .symtab).
    let mut symbols = sections.symbols(e, data, SHT_DYNSYM)?;
    if symbols.is_empty() {
        symbols = sections.symbols(e, data, SHT_SYMTAB)?;
    }
    let symbols = symbol_index(&symbols);
    let mut kernels = Vec::with_capacity(list.len().min(64));
    for entry in list {
        let Some(map) = entry.as_map() else { return bad("an amdhsa.kernels entry is not a map") };
        let name = get(map, ".name")
            .and_then(Value::as_str)
            .ok_or_else(|| ParseError("a kernel lacks .name".into()))?
            .to_string();
        let m = KernelMeta { map, name };
        kernels.push(kernel(&m, arch, &symbols, &sections, data)?);
    }
    Ok(CodeObject { arch, kernels })
}

/// The descriptor of the `NT_AMDGPU_METADATA` note, from the PT_NOTE segments (or, in an
/// unlinked object, the SHT_NOTE sections).
fn metadata_note<'d>(
    header: &FileHeader64<LE>,
    sections: &object::read::elf::SectionTable<'d, FileHeader64<LE>>,
    data: &'d [u8],
) -> Result<&'d [u8], ParseError> {
    let e = LE;
    let mut found = None;
    for ph in header.program_headers(e, data)? {
        if let Some(mut notes) = ph.notes(e, data)? {
            while let Some(note) = notes.next()? {
                if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                    found = Some(note.desc());
                }
            }
        }
    }
    if found.is_none() {
        for s in sections.iter().filter(|s| s.sh_type(e) == SHT_NOTE) {
            if let Some(mut notes) = s.notes(e, data)? {
                while let Some(note) = notes.next()? {
                    if note.name() == b"AMDGPU" && note.n_type(e) == NT_AMDGPU_METADATA {
                        found = Some(note.desc());
                    }
                }
            }
        }
    }
    found.ok_or_else(|| ParseError("no AMDGPU metadata note (NT_AMDGPU_METADATA)".into()))
}

/// The file bytes of a defined symbol's contents.
fn symbol_bytes<'d>(
    sym: &object::elf::Sym64<LE>,
    sections: &object::read::elf::SectionTable<'d, FileHeader64<LE>>,
    data: &'d [u8],
) -> Option<&'d [u8]> {
    let e = LE;
    let section = sections.section(SectionIndex(usize::from(sym.st_shndx(e)))).ok()?;
    if section.sh_type(e) == SHT_NOBITS {
        return None;
    }
    let delta = sym.st_value(e).checked_sub(section.sh_addr(e))?;
    let size = sym.st_size(e);
    if delta.checked_add(size)? > section.sh_size(e) {
        return None;
    }
    let start = usize::try_from(section.sh_offset(e).checked_add(delta)?).ok()?;
    data.get(start..start.checked_add(usize::try_from(size).ok()?)?)
}

/// Defined symbols by name (the first of each name, as a linear search would find it), built
/// once so that looking up every kernel's symbols stays linear in the file.
type SymbolIndex<'d> = HashMap<&'d [u8], &'d object::elf::Sym64<LE>>;

fn symbol_index<'d>(symbols: &SymbolTable<'d, FileHeader64<LE>>) -> SymbolIndex<'d> {
    let mut index = HashMap::new();
    for s in symbols.iter().filter(|s| s.st_shndx(LE) != 0) {
        if let Ok(name) = symbols.symbol_name(LE, s) {
            index.entry(name).or_insert(s);
        }
    }
    index
}

fn find_symbol<'d>(symbols: &SymbolIndex<'d>, name: &str) -> Option<&'d object::elf::Sym64<LE>> {
    symbols.get(name.as_bytes()).copied()
}

fn kernel(
    m: &KernelMeta<'_>,
    arch: Arch,
    symbols: &SymbolIndex<'_>,
    sections: &object::read::elf::SectionTable<'_, FileHeader64<LE>>,
    data: &[u8],
) -> Result<KernelInfo, ParseError> {
    let e = LE;
    let name = &m.name;
    let kd_name = m.str(".symbol")?;
    if kd_name != format!("{name}.kd") {
        return bad(format!("kernel {name}: .symbol is {kd_name:?}, expected \"{name}.kd\""));
    }
    let (group, private, kernarg) =
        (m.u32(".group_segment_fixed_size")?, m.u32(".private_segment_fixed_size")?, m.u32(".kernarg_segment_size")?);
    let (vgpr, sgpr, wavefront) = (m.u32(".vgpr_count")?, m.u32(".sgpr_count")?, m.u32(".wavefront_size")?);
    // .agpr_count is required on gfx90a and later, i.e. on every MACH mhc loads.
    let agpr = m.u32(".agpr_count")?;
    let max_threads = m.u32(".max_flat_workgroup_size")?;
    if max_threads == 0 || max_threads > arch.max_threads_per_block() {
        return bad(format!("kernel {name}: .max_flat_workgroup_size {max_threads} is not in 1..=1024"));
    }

    let Some(kd_sym) = find_symbol(symbols, kd_name) else {
        return bad(format!("kernel {name}: descriptor symbol {kd_name} not found"));
    };
    if kd_sym.st_size(e) != KD_SIZE as u64 {
        return bad(format!("kernel {name}: {kd_name} is {} bytes, not 64", kd_sym.st_size(e)));
    }
    let Some(kd) = symbol_bytes(kd_sym, sections, data) else {
        return bad(format!("kernel {name}: {kd_name} does not lie inside a section of the file"));
    };
    let Some(code_sym) = find_symbol(symbols, name) else {
        return bad(format!("kernel {name}: function symbol not found"));
    };
    let field = |at| u32_at(kd, at).unwrap_or_default();
    let (kd_group, kd_private, kd_kernarg) = (field(0), field(4), field(8));
    let entry_offset = i64_at(kd, 16).unwrap_or_default();
    let (rsrc3, rsrc1) = (field(44), field(48));
    let properties = u32::from(kd[56]) | u32::from(kd[57]) << 8;

    let mismatch = |what: &str, note: u32, desc: u32| {
        bad(format!("kernel {name}: metadata {what} is {note} but the kernel descriptor says {desc}"))
    };
    if group != kd_group {
        return mismatch(".group_segment_fixed_size", group, kd_group);
    }
    if private != kd_private {
        return mismatch(".private_segment_fixed_size", private, kd_private);
    }
    if kernarg != kd_kernarg {
        return mismatch(".kernarg_segment_size", kernarg, kd_kernarg);
    }
    let kd_wave = if properties & (1 << 10) != 0 { 32 } else { 64 };
    if wavefront != kd_wave {
        return mismatch(".wavefront_size", wavefront, kd_wave);
    }
    let entry = (kd_sym.st_value(e) as i64).checked_add(entry_offset);
    if entry != Some(code_sym.st_value(e) as i64) {
        return bad(format!("kernel {name}: the descriptor's code entry offset does not point at {name}"));
    }

    let vgpr_alloc = ((rsrc1 & 0x3f) + 1) * VGPR_GRANULE;
    let sgpr_alloc = (((rsrc1 >> 6) & 0xf) + 1) * SGPR_GRANULE;
    let accum_offset = ((rsrc3 & 0x3f) + 1) * 4;
    // Total per-lane VGPRs as LLVM counts them: arch VGPRs aligned to 4, then the AGPRs.
    let total = if agpr > 0 { vgpr.checked_next_multiple_of(4).and_then(|v| v.checked_add(agpr)) } else { Some(vgpr) };
    let Some(total) = total else {
        return bad(format!("kernel {name}: metadata .vgpr_count {vgpr} + .agpr_count {agpr} overflows 32 bits"));
    };
    if round_up(total, VGPR_GRANULE) != vgpr_alloc {
        return bad(format!(
            "kernel {name}: metadata .vgpr_count {vgpr} + .agpr_count {agpr} rounds to {} VGPRs but the \
             descriptor allocates {vgpr_alloc} (fix .amdhsa_next_free_vgpr or the metadata)",
            round_up(total, VGPR_GRANULE)
        ));
    }
    if agpr > 0 && (vgpr > accum_offset || accum_offset.saturating_add(agpr) > vgpr_alloc) {
        return bad(format!(
            "kernel {name}: {vgpr} VGPRs and {agpr} AGPRs do not fit around accum_offset {accum_offset} in {vgpr_alloc}"
        ));
    }
    if round_up(sgpr, SGPR_GRANULE) != sgpr_alloc {
        return bad(format!(
            "kernel {name}: metadata .sgpr_count {sgpr} rounds to {} but the descriptor allocates {sgpr_alloc} \
             (count VCC, FLAT_SCRATCH and XNACK_MASK: next_free_sgpr + 6 on gfx94x)",
            round_up(sgpr, SGPR_GRANULE)
        ));
    }

    let mut params = Vec::new();
    if let Some(args) = get(m.map, ".args") {
        let Some(args) = args.as_array() else { return bad(format!("kernel {name}: .args is not a list")) };
        for (i, arg) in args.iter().enumerate() {
            let Some(map) = arg.as_map() else { return bad(format!("kernel {name}: an .args entry is not a map")) };
            let a = KernelMeta { map, name: name.clone() };
            params.push(Param {
                ordinal: u32::try_from(i).unwrap_or(u32::MAX),
                offset: a.u32(".offset")?,
                size: a.u32(".size")?,
                name: get(map, ".name").and_then(Value::as_str).map(str::to_string),
                kind: Some(a.str(".value_kind")?.to_string()),
            });
        }
    }
    params.sort_by_key(|p| (p.offset, p.ordinal));
    crate::cubin::check_params(name, &params, kernarg)?;

    Ok(KernelInfo {
        name: name.clone(),
        registers: vgpr,
        shared_bytes: group,
        reserved_shared_bytes: 0,
        local_bytes: private,
        max_threads,
        required_threads: None,
        register_cap: None,
        kernarg_bytes: kernarg,
        params,
        amd: Some(AmdResources { vgpr, sgpr, agpr, vgpr_alloc, sgpr_alloc, accum_offset, wavefront_size: wavefront }),
    })
}
