//! Reads a kernel out of an AMDGPU HSA code object (.hsaco, code object v4/v5): the 64-byte
//! kernel descriptor `<name>.kd` (what the hardware uses), the code bytes it points at, and the
//! metadata note (kernarg layout). Layouts: docs/code-objects.md §3.

use crate::decode::{decode_all, Inst};
use crate::SimError;
use object::{Object, ObjectSection, ObjectSymbol};

/// One kernel argument from the metadata note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernArg {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub value_kind: String,
}

/// A kernel ready to simulate.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub name: String,
    /// LDS bytes (KD GROUP_SEGMENT_FIXED_SIZE).
    pub lds_bytes: u32,
    pub private_bytes: u32,
    pub kernarg_size: u32,
    /// Architected VGPRs the wave may touch (ACCUM_OFFSET; AGPRs live above it).
    pub arch_vgprs: u32,
    /// Unified VGPR allocation from RSRC1 ((G+1)*8).
    pub total_vgprs: u32,
    /// Addressable SGPRs: the RSRC1 allocation minus the 6 extra (VCC, FLAT_SCRATCH, XNACK).
    pub sgprs: u32,
    pub rsrc1: u32,
    pub rsrc2: u32,
    pub code_props: u16,
    pub code: Vec<u8>,
    pub insts: Vec<Inst>,
    /// Registers each instruction reads and writes (precomputed for the hazard checks).
    pub uses: Vec<crate::exec::RegUse>,
    /// Byte offset -> index into `insts` (u32::MAX where no instruction starts).
    pub index_of: Vec<u32>,
    pub args: Vec<KernArg>,
    /// Metadata counts, to cross-check against the descriptor.
    pub meta_vgpr_count: Option<u64>,
    pub meta_sgpr_count: Option<u64>,
    pub meta_lds: Option<u64>,
    pub meta_kernarg_size: Option<u64>,
    pub max_flat_workgroup_size: Option<u64>,
}

fn bad(what: impl Into<String>) -> SimError {
    SimError::BadCodeObject(what.into())
}

/// Reads the 4-byte-aligned notes of a `.note` section and returns the AMDGPU metadata msgpack.
fn metadata(file: &object::File) -> Result<rmpv::Value, SimError> {
    for sec in file.sections() {
        if sec.name().ok() != Some(".note") {
            continue;
        }
        let data = sec.data().map_err(|e| bad(format!(".note: {e}")))?;
        let mut p = 0;
        while p + 12 <= data.len() {
            let rd = |o: usize| u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]) as usize;
            let (namesz, descsz, ty) = (rd(p), rd(p + 4), rd(p + 8));
            let name_end = p + 12 + namesz;
            let desc_start = p + 12 + namesz.div_ceil(4) * 4;
            let desc_end = desc_start.checked_add(descsz).ok_or_else(|| bad("note size overflows"))?;
            if desc_end > data.len() || name_end > data.len() {
                return Err(bad("note runs past its section"));
            }
            if &data[p + 12..name_end] == b"AMDGPU\0" && ty == 32 {
                let mut desc = &data[desc_start..desc_end];
                return rmpv::decode::read_value(&mut desc).map_err(|e| bad(format!("metadata msgpack: {e}")));
            }
            p = desc_start + descsz.div_ceil(4) * 4;
        }
    }
    Err(bad("no AMDGPU metadata note"))
}

fn get<'a>(map: &'a rmpv::Value, key: &str) -> Option<&'a rmpv::Value> {
    map.as_map()?.iter().find(|(k, _)| k.as_str() == Some(key)).map(|(_, v)| v)
}

/// The ELF parser needs 8-byte-aligned data; embedded images (`include_bytes!`) are not.
fn aligned(image: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; image.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..image.len()].copy_from_slice(image);
    words
}

/// Names of every kernel in the image (from the metadata note).
pub fn kernel_names(image: &[u8]) -> Result<Vec<String>, SimError> {
    let words = aligned(image);
    let image = &bytemuck::cast_slice::<u64, u8>(&words)[..image.len()];
    let file = object::File::parse(image).map_err(|e| bad(format!("ELF: {e}")))?;
    let meta = metadata(&file)?;
    let kernels = get(&meta, "amdhsa.kernels").and_then(|k| k.as_array()).ok_or_else(|| bad("no amdhsa.kernels"))?;
    Ok(kernels.iter().filter_map(|k| get(k, ".name").and_then(|n| n.as_str()).map(String::from)).collect())
}

fn read_at(file: &object::File, addr: u64, len: u64) -> Result<Vec<u8>, SimError> {
    for sec in file.sections() {
        let (a, s) = (sec.address(), sec.size());
        if addr >= a && addr + len <= a + s {
            let data = sec.data().map_err(|e| bad(format!("section data: {e}")))?;
            let start = (addr - a) as usize;
            return data.get(start..start + len as usize).map(|d| d.to_vec()).ok_or_else(|| bad("NOBITS section"));
        }
    }
    Err(bad(format!("address 0x{addr:x} (+{len}) is in no section")))
}

/// The code bytes of kernel `name` (from its descriptor's entry to the end of its symbol).
pub fn kernel_code(image: &[u8], name: &str) -> Result<Vec<u8>, SimError> {
    let words = aligned(image);
    let image = &bytemuck::cast_slice::<u64, u8>(&words)[..image.len()];
    let file = object::File::parse(image).map_err(|e| bad(format!("ELF: {e}")))?;
    Ok(locate(&file, image, name)?.2)
}

/// (descriptor bytes, descriptor address, code) of kernel `name`.
fn locate(file: &object::File, image: &[u8], name: &str) -> Result<(Vec<u8>, u64, Vec<u8>), SimError> {
    // e_machine 224 = EM_AMDGPU (the `object` crate has no Architecture variant for it).
    if image.get(18..20) != Some(&224u16.to_le_bytes()[..]) {
        return Err(bad("not an AMDGPU code object"));
    }
    let kd_name = format!("{name}.kd");
    let mut kd_sym = None;
    let mut fn_sym = None;
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        match sym.name() {
            Ok(n) if n == kd_name => kd_sym = Some((sym.address(), sym.size())),
            Ok(n) if n == name => fn_sym = Some((sym.address(), sym.size())),
            _ => {}
        }
    }
    let (kd_addr, _) = kd_sym.ok_or_else(|| bad(format!("no symbol {kd_name}")))?;
    let kd = read_at(file, kd_addr, 64)?;
    let entry_off = i64::from_le_bytes(kd[16..24].try_into().expect("8 bytes"));
    let entry = (kd_addr as i64 + entry_off) as u64;
    let (fn_addr, fn_size) = fn_sym.ok_or_else(|| bad(format!("no symbol {name}")))?;
    if fn_addr != entry {
        return Err(bad(format!("{name}: descriptor entry 0x{entry:x} is not the symbol 0x{fn_addr:x}")));
    }
    let code = read_at(file, entry, fn_size)?;
    Ok((kd, kd_addr, code))
}

/// Loads kernel `name` from `image`, decoding its code.
pub fn load_kernel(image: &[u8], name: &str) -> Result<Kernel, SimError> {
    let words = aligned(image);
    let image = &bytemuck::cast_slice::<u64, u8>(&words)[..image.len()];
    let file = object::File::parse(image).map_err(|e| bad(format!("ELF: {e}")))?;
    let (kd, _, code) = locate(&file, image, name)?;
    let u32_at = |o: usize| u32::from_le_bytes([kd[o], kd[o + 1], kd[o + 2], kd[o + 3]]);
    let insts = decode_all(&code).map_err(|e| SimError::Unsupported { kernel: name.to_string(), err: e })?;
    let mut index_of = vec![u32::MAX; code.len() + 4];
    for (i, inst) in insts.iter().enumerate() {
        index_of[inst.offset as usize] = i as u32;
    }
    let rsrc3 = u32_at(44);
    let rsrc1 = u32_at(48);
    let rsrc2 = u32_at(52);
    let code_props = u16::from_le_bytes([kd[56], kd[57]]);
    let total_vgprs = ((rsrc1 & 0x3f) + 1) * 8;
    let arch_vgprs = ((rsrc3 & 0x3f) + 1) * 4;
    let sgprs = (((rsrc1 >> 6) & 0xf) + 1) * 8 - 6;

    let meta = metadata(&file)?;
    let kernels = get(&meta, "amdhsa.kernels").and_then(|k| k.as_array()).ok_or_else(|| bad("no amdhsa.kernels"))?;
    let km = kernels
        .iter()
        .find(|k| get(k, ".name").and_then(|n| n.as_str()) == Some(name))
        .ok_or_else(|| bad(format!("{name} is not in the metadata")))?;
    let num = |k: &str| get(km, k).and_then(|v| v.as_u64());
    let mut args = Vec::new();
    for a in get(km, ".args").and_then(|a| a.as_array()).map(|v| v.as_slice()).unwrap_or(&[]) {
        let s = |k: &str| get(a, k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let n = |k: &str| get(a, k).and_then(|v| v.as_u64());
        args.push(KernArg {
            name: s(".name"),
            offset: n(".offset").ok_or_else(|| bad(format!("{name}: arg without .offset")))? as usize,
            size: n(".size").ok_or_else(|| bad(format!("{name}: arg without .size")))? as usize,
            value_kind: s(".value_kind"),
        });
    }
    let uses = insts.iter().map(crate::exec::operands).collect();
    let kernel = Kernel {
        name: name.to_string(),
        lds_bytes: u32_at(0),
        private_bytes: u32_at(4),
        kernarg_size: u32_at(8),
        arch_vgprs,
        total_vgprs,
        sgprs,
        rsrc1,
        rsrc2,
        code_props,
        code,
        insts,
        uses,
        index_of,
        args,
        meta_vgpr_count: num(".vgpr_count"),
        meta_sgpr_count: num(".sgpr_count"),
        meta_lds: num(".group_segment_fixed_size"),
        meta_kernarg_size: num(".kernarg_segment_size"),
        max_flat_workgroup_size: num(".max_flat_workgroup_size"),
    };
    crate::exec::check_limits(&kernel)?;
    Ok(kernel)
}

impl Kernel {
    /// A copy of the kernel running `insts` instead (a mutated body: an instruction changed or
    /// dropped). Instructions keep their byte offsets; a branch to a dropped instruction lands
    /// on the next one.
    pub fn with_insts(&self, insts: Vec<Inst>) -> Kernel {
        let mut index_of = vec![u32::MAX; self.code.len() + 4];
        for (i, inst) in insts.iter().enumerate() {
            index_of[inst.offset as usize] = i as u32;
        }
        // Offsets of dropped instructions resolve to the next instruction that remains.
        let mut next = insts.len() as u32;
        for off in (0..index_of.len()).rev() {
            if index_of[off] != u32::MAX {
                next = index_of[off];
            } else if self.index_of.get(off).is_some_and(|&i| i != u32::MAX) {
                index_of[off] = next;
            }
        }
        let uses = insts.iter().map(crate::exec::operands).collect();
        Kernel { insts, uses, index_of, ..self.clone() }
    }

    /// The argument named `name`.
    pub fn arg(&self, name: &str) -> Option<&KernArg> {
        self.args.iter().find(|a| a.name == name)
    }

    /// Checks that the hand-written metadata agrees with the descriptor (the assembler does
    /// not: docs/code-objects.md §3.5) and that every argument fits the kernarg segment.
    pub fn check_metadata(&self) -> Result<(), String> {
        if self.meta_lds != Some(self.lds_bytes as u64) {
            return Err(format!("{}: metadata LDS {:?} != descriptor {}", self.name, self.meta_lds, self.lds_bytes));
        }
        if self.meta_kernarg_size != Some(self.kernarg_size as u64) {
            return Err(format!(
                "{}: metadata kernarg size {:?} != descriptor {}",
                self.name, self.meta_kernarg_size, self.kernarg_size
            ));
        }
        match self.meta_vgpr_count {
            Some(v) if v as u32 <= self.arch_vgprs && v as u32 > self.arch_vgprs.saturating_sub(8) => {}
            v => return Err(format!("{}: metadata vgpr_count {v:?} vs accum_offset {}", self.name, self.arch_vgprs)),
        }
        match self.meta_sgpr_count {
            Some(s) if s as u32 <= self.sgprs + 6 && s as u32 + 8 > self.sgprs + 6 => {}
            s => return Err(format!("{}: metadata sgpr_count {s:?} vs descriptor {}", self.name, self.sgprs + 6)),
        }
        for a in &self.args {
            if a.offset + a.size > self.kernarg_size as usize || a.offset % a.size.clamp(1, 8) != 0 {
                return Err(format!("{}: argument {} at {}+{} is misplaced", self.name, a.name, a.offset, a.size));
            }
        }
        if self.private_bytes != 0 {
            return Err(format!("{}: uses scratch, which the simulator does not model", self.name));
        }
        Ok(())
    }
}
