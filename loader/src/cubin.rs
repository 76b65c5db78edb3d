//! NVIDIA cubin (`e_machine` 190) parsing; the layouts are in docs/code-objects.md §2:
//!
//! * architecture: `EI_ABIVERSION` 7 -> SM in `e_flags & 0xff`, `a` = bit 0x800; ABI 8 -> SM in
//!   bits 8..16, `a` = bit 0x8 (ptxas 12.8/12.9) or `.nv.compat` attribute 0x09 = 1 (ptxas 13);
//! * registers and stack frame: module-wide `.nv.info` REGCOUNT (0x2f) / FRAME_SIZE (0x11),
//!   keyed by symbol index (`.text.<k>` `sh_info >> 24` is 0 on sm_90+ and is not used);
//! * launch bounds and parameters: `.nv.info.<k>` MAX_THREADS (0x05), REQNTID (0x10),
//!   MAXREG_COUNT (0x1b), CBANK_PARAM_SIZE (0x19), PARAM_CBANK (0x0a), KPARAM_INFO (0x17);
//! * static shared memory: `sh_size` of `.nv.shared.<k>`, minus the 1 KiB system prefix on sm_90+.
//!
//! The `.nv.merc.*` / `.nv.capmerc.*` copies on sm_100 are the finalizer's input and are ignored.

use crate::arch::Arch;
use crate::image::{bad, u16_at, u32_at, CodeObject, KernelInfo, Param, ParseError};
use object::elf::{FileHeader64, SectionHeader64, SHT_NOBITS, SHT_SYMTAB, STT_FUNC};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian as LE;
use std::collections::{BTreeMap, HashMap};

/// `st_other` bit of a kernel entry symbol (STO_CUDA_ENTRY).
const STO_CUDA_ENTRY: u8 = 0x10;

// .nv.info record formats.
const EIFMT_NVAL: u8 = 1;
const EIFMT_BVAL: u8 = 2;
const EIFMT_HVAL: u8 = 3;
const EIFMT_SVAL: u8 = 4;

// .nv.info attribute ids used here (the rest are skipped by format and size).
const EIATTR_MAX_THREADS: u8 = 0x05;
const EIATTR_PARAM_CBANK: u8 = 0x0a;
const EIATTR_REQNTID: u8 = 0x10;
const EIATTR_FRAME_SIZE: u8 = 0x11;
const EIATTR_KPARAM_INFO: u8 = 0x17;
const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
const EIATTR_MAXREG_COUNT: u8 = 0x1b;
const EIATTR_REGCOUNT: u8 = 0x2f;
/// `.nv.compat` EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET: 1 for an `a` target (ptxas 13.x).
const EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET: u8 = 0x09;

/// Bytes ptxas reserves at the start of every block's shared memory on sm_90 and later.
const RESERVED_SMEM_SM90: u64 = 1024;

/// One `.nv.info` record: attribute id and either an inline value (BVAL/HVAL) or a payload (SVAL).
#[derive(Debug)]
struct Record<'a> {
    attr: u8,
    format: u8,
    value: u16,
    payload: &'a [u8],
}

impl Record<'_> {
    fn inline(&self, what: &str) -> Result<u32, ParseError> {
        match self.format {
            EIFMT_BVAL | EIFMT_HVAL => Ok(u32::from(self.value)),
            f => bad(format!("{what}: format {f} where a BVAL/HVAL was expected")),
        }
    }

    fn words<const N: usize>(&self, what: &str) -> Result<[u32; N], ParseError> {
        if self.format != EIFMT_SVAL || self.payload.len() != 4 * N {
            return bad(format!(
                "{what}: expected a {}-byte SVAL, got format {} size {}",
                4 * N,
                self.format,
                self.payload.len()
            ));
        }
        let mut out = [0u32; N];
        for (i, w) in out.iter_mut().enumerate() {
            *w = u32_at(self.payload, 4 * i).unwrap_or_default();
        }
        Ok(out)
    }
}

/// Walks a `.nv.info`-format stream (also used by `.nv.compat`): 4-byte records, SVAL records
/// followed by their payload. Unknown formats are an error since their size is unknown.
fn records<'a>(section: &str, mut b: &'a [u8]) -> Result<Vec<Record<'a>>, ParseError> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let (Some(&format), Some(&attr), Some(value)) = (b.first(), b.get(1), u16_at(b, 2)) else {
            return bad(format!("{section}: truncated record header"));
        };
        let (payload, len) = match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => (&b[..0], 4),
            EIFMT_SVAL => {
                let size = usize::from(value);
                match b.get(4..4 + size) {
                    Some(p) => (p, 4 + size),
                    None => return bad(format!("{section}: attribute 0x{attr:02x} runs past the section")),
                }
            }
            f => return bad(format!("{section}: unknown record format {f} (attribute 0x{attr:02x})")),
        };
        let value = if format == EIFMT_BVAL { value & 0xff } else { value };
        out.push(Record { attr, format, value, payload });
        b = &b[len..];
    }
    Ok(out)
}

pub(crate) fn parse(data: &[u8]) -> Result<CodeObject, ParseError> {
    let e = LE;
    let header = FileHeader64::<LE>::parse(data)?;
    let sections = header.sections(e, data)?;
    // Sections by name (the first of each name, as `section_by_name` finds it), built once: a
    // lookup per kernel stays O(1) however many kernels and sections the file has.
    let mut by_name: HashMap<&[u8], &SectionHeader64<LE>> = HashMap::with_capacity(sections.len());
    for s in sections.iter() {
        if let Ok(name) = sections.section_name(e, s) {
            by_name.entry(name).or_insert(s);
        }
    }
    let section = |name: &str| by_name.get(name.as_bytes()).copied();
    let section_bytes = |name: &str| -> Result<Option<&[u8]>, ParseError> {
        match section(name) {
            Some(s) if s.sh_type(e) != SHT_NOBITS => {
                Ok(Some(s.data(e, data).map_err(|_| ParseError(format!("section {name} lies outside the file")))?))
            }
            Some(_) => Ok(Some(&[])),
            None => Ok(None),
        }
    };

    // Architecture.
    let flags = header.e_flags(e);
    let (sm, accelerated) = match header.e_ident().abi_version {
        7 => (flags & 0xff, flags & 0x800 != 0),
        8 => {
            let mut a = flags & 0x8 != 0;
            if let Some(compat) = section_bytes(".nv.compat")? {
                for r in records(".nv.compat", compat)? {
                    if r.attr == EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET && r.inline(".nv.compat 0x09")? == 1 {
                        a = true;
                    }
                }
            }
            ((flags >> 8) & 0xff, a)
        }
        v => return bad(format!("cubin ELF ABI version {v} (known: 7 = CUDA <= 12 legacy, 8 = sm_100+/CUDA 13)")),
    };
    let arch = match (sm, accelerated) {
        (90, true) => Arch::Sm90a,
        (100, true) => Arch::Sm100a,
        (sm, a) => return bad(format!("cubin for sm_{sm}{} (mhc loads sm_90a and sm_100a)", if a { "a" } else { "" })),
    };

    // Module-wide records keyed by symbol index.
    let mut regcount = BTreeMap::new();
    let mut frame = BTreeMap::new();
    if let Some(info) = section_bytes(".nv.info")? {
        for r in records(".nv.info", info)? {
            match r.attr {
                EIATTR_REGCOUNT => {
                    let [sym, regs] = r.words::<2>("REGCOUNT")?;
                    regcount.insert(sym, regs);
                }
                EIATTR_FRAME_SIZE => {
                    let [sym, bytes] = r.words::<2>("FRAME_SIZE")?;
                    frame.insert(sym, bytes);
                }
                _ => {}
            }
        }
    }

    let symtab = sections.symbols(e, data, SHT_SYMTAB)?;
    let mut kernels = Vec::new();
    for (index, sym) in symtab.enumerate() {
        if sym.st_type() != STT_FUNC || sym.st_other() & STO_CUDA_ENTRY == 0 {
            continue;
        }
        let name = std::str::from_utf8(symtab.symbol_name(e, sym)?)
            .map_err(|_| ParseError("kernel symbol name is not UTF-8".into()))?
            .to_string();
        let Ok(sym_index) = u32::try_from(index.0) else { return bad("symbol index overflows u32") };
        let Some(&registers) = regcount.get(&sym_index) else {
            return bad(format!("kernel {name}: no REGCOUNT record in .nv.info"));
        };
        let local_bytes = frame.get(&sym_index).copied().unwrap_or(0);
        let mut kernel = KernelInfo {
            name: name.clone(),
            registers,
            shared_bytes: 0,
            reserved_shared_bytes: 0,
            local_bytes,
            max_threads: arch.max_threads_per_block(),
            required_threads: None,
            register_cap: None,
            kernarg_bytes: 0,
            params: Vec::new(),
            amd: None,
        };
        if let Some(info) = section_bytes(&format!(".nv.info.{name}"))? {
            read_kernel_info(&mut kernel, info)?;
        }
        if let Some(s) = section(&format!(".nv.shared.{name}")) {
            let size = s.sh_size(e);
            let user = size.checked_sub(RESERVED_SMEM_SM90).ok_or_else(|| {
                ParseError(format!("kernel {name}: .nv.shared is {size} bytes, less than the 1 KiB sm_90+ prefix"))
            })?;
            kernel.shared_bytes =
                u32::try_from(user).map_err(|_| ParseError(format!("kernel {name}: huge .nv.shared")))?;
            kernel.reserved_shared_bytes = RESERVED_SMEM_SM90 as u32;
        }
        kernels.push(kernel);
    }
    Ok(CodeObject { arch, kernels })
}

/// Reads a kernel's `.nv.info.<k>` records into `k`, checking their consistency.
fn read_kernel_info(k: &mut KernelInfo, info: &[u8]) -> Result<(), ParseError> {
    let mut max_ntid = None;
    let mut cbank_window = None;
    let mut cbank_size = None;
    let threads = |dims: [u32; 3], what: &str| -> Result<u32, ParseError> {
        let total = dims.iter().try_fold(1u32, |acc, &d| acc.checked_mul(d)).unwrap_or(0);
        if total == 0 || total > 1024 {
            return bad(format!("kernel {}: {what} {dims:?} is not a valid block shape", k.name));
        }
        Ok(total)
    };
    for r in records(&format!(".nv.info.{}", k.name), info)? {
        match r.attr {
            EIATTR_MAX_THREADS => max_ntid = Some(threads(r.words::<3>("MAX_THREADS")?, ".maxntid")?),
            EIATTR_REQNTID => {
                let dims = r.words::<3>("REQNTID")?;
                threads(dims, ".reqntid")?;
                k.required_threads = Some(dims);
            }
            EIATTR_MAXREG_COUNT => {
                let cap = r.inline("MAXREG_COUNT")?;
                k.register_cap = (cap != 0xff).then_some(cap);
            }
            EIATTR_CBANK_PARAM_SIZE => cbank_size = Some(r.inline("CBANK_PARAM_SIZE")?),
            EIATTR_PARAM_CBANK => {
                let [_sym, window] = r.words::<2>("PARAM_CBANK")?;
                cbank_window = Some(window >> 16);
            }
            EIATTR_KPARAM_INFO => {
                let p = r.payload;
                if r.format != EIFMT_SVAL || p.len() != 12 {
                    return bad(format!("kernel {}: KPARAM_INFO record of {} bytes", k.name, p.len()));
                }
                let ordinal = u32::from(u16_at(p, 4).unwrap_or_default());
                let offset = u32::from(u16_at(p, 6).unwrap_or_default());
                let flags = u32_at(p, 8).unwrap_or_default();
                k.params.push(Param { ordinal, offset, size: (flags >> 18) & 0x3fff, name: None, kind: None });
            }
            _ => {}
        }
    }
    k.kernarg_bytes = cbank_size.unwrap_or(0);
    if let Some(window) = cbank_window {
        if window != k.kernarg_bytes {
            return bad(format!(
                "kernel {}: PARAM_CBANK window is {window} bytes but CBANK_PARAM_SIZE is {}",
                k.name, k.kernarg_bytes
            ));
        }
    }
    k.max_threads = match (k.required_threads, max_ntid) {
        (Some(dims), _) => dims[0] * dims[1] * dims[2],
        (None, Some(max)) => max,
        (None, None) => k.max_threads,
    };
    k.params.sort_by_key(|p| (p.offset, p.ordinal));
    check_params(&k.name, &k.params, k.kernarg_bytes)
}

/// Parameters must lie inside the parameter buffer, not overlap, and have distinct ordinals.
pub(crate) fn check_params(kernel: &str, params: &[Param], kernarg: u32) -> Result<(), ParseError> {
    let mut end = 0u32;
    let mut ordinals = std::collections::BTreeSet::new();
    for p in params {
        let Some(p_end) = p.offset.checked_add(p.size) else {
            return bad(format!("kernel {kernel}: parameter overflow"));
        };
        if p.offset < end || p_end > kernarg || !ordinals.insert(p.ordinal) {
            return bad(format!(
                "kernel {kernel}: parameter #{} at {}..{} overlaps another or leaves the {kernarg}-byte buffer",
                p.ordinal, p.offset, p_end
            ));
        }
        end = p_end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_walk_skips_unknown_ids_and_rejects_truncation() {
        // CUDA_API_VERSION (SVAL 4), SPARSE_MMA_MASK (HVAL), MAXREG_COUNT 0xff, NVAL, BVAL.
        let bytes = [
            0x04, 0x37, 0x04, 0x00, 0x81, 0x00, 0x00, 0x00, 0x03, 0x50, 0x00, 0x00, 0x03, 0x1b, 0xff, 0x00, 0x01, 0x01,
            0x00, 0x00, 0x02, 0x4c, 0x01, 0x07,
        ];
        let r = records("t", &bytes).unwrap();
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].payload, &[0x81, 0, 0, 0]);
        assert_eq!(r[2].value, 0xff);
        assert_eq!(r[4].value, 1, "BVAL keeps only its byte");
        assert!(records("t", &bytes[..6]).is_err());
        assert!(records("t", &bytes[..22]).is_err());
        assert!(records("t", &[0x05, 0x01, 0, 0]).is_err());
    }
}
