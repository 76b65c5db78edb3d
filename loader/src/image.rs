//! What the loader reads from one code object: its architecture and, per kernel, the resources
//! a launch needs. `parse` dispatches on `e_machine`; the vendor parsers live in `cubin` and
//! `amdgpu`. Every malformed, truncated or foreign input gives `Err(ParseError)`, never a panic.

use crate::arch::Arch;
use std::fmt;

/// A parse failure, with what was wrong. The caller adds the image name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

impl From<object::read::Error> for ParseError {
    fn from(e: object::read::Error) -> Self {
        ParseError(format!("ELF: {e}"))
    }
}

/// Shorthand for an `Err(ParseError)`.
pub(crate) fn bad<T>(reason: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(reason.into()))
}

/// One kernel parameter as recorded in the code object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Position in the kernel's parameter list (NVIDIA KPARAM_INFO ordinal; AMD `.args` index).
    pub ordinal: u32,
    /// Byte offset in the parameter buffer (kernarg segment).
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Name (AMD metadata only; cubins do not keep parameter names).
    pub name: Option<String>,
    /// AMD `.value_kind` (`global_buffer`, `by_value`, `hidden_*`, ...).
    pub kind: Option<String>,
}

/// AMD-only register and scratch figures. The `*_count` values are the metadata note's (what
/// `llvm-readelf --notes` prints); the `*_alloc` values are decoded from the kernel descriptor
/// (what the hardware allocates, used for occupancy). The parser checks that they agree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmdResources {
    /// Architectural VGPRs (`.vgpr_count`).
    pub vgpr: u32,
    /// Scalar registers incl. VCC/FLAT_SCRATCH/XNACK_MASK (`.sgpr_count`).
    pub sgpr: u32,
    /// Accumulation VGPRs (`.agpr_count`).
    pub agpr: u32,
    /// VGPRs allocated per lane, arch + acc (COMPUTE_PGM_RSRC1 granule x 8).
    pub vgpr_alloc: u32,
    /// SGPRs allocated per wave (COMPUTE_PGM_RSRC1 granule x 8).
    pub sgpr_alloc: u32,
    /// First AGPR in the unified file (COMPUTE_PGM_RSRC3 ACCUM_OFFSET).
    pub accum_offset: u32,
    /// 64 or 32.
    pub wavefront_size: u32,
}

/// The resources of one kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInfo {
    /// The entry symbol (the function name, not the AMD `.kd` symbol).
    pub name: String,
    /// Registers per thread: NVIDIA `EIATTR_REGCOUNT`; AMD the architectural VGPR count.
    pub registers: u32,
    /// Static shared memory / LDS in bytes. On sm_90+ the 1 KiB system-reserved prefix that
    /// ptxas puts in `.nv.shared.<k>` is not counted (cuobjdump's SHARED is this + 1024).
    pub shared_bytes: u32,
    /// Bytes of the system-reserved shared-memory prefix inside the kernel's `.nv.shared.<k>`
    /// section (1024 on sm_90+ when the section exists, else 0; always 0 on AMD). cuobjdump's
    /// SHARED column is `shared_bytes + reserved_shared_bytes`; the driver's SHARED_SIZE_BYTES
    /// is `shared_bytes` (checked on an H200).
    pub reserved_shared_bytes: u32,
    /// Per-thread local memory (NVIDIA stack frame) / private segment (AMD scratch), bytes.
    pub local_bytes: u32,
    /// Most threads per block the kernel may be launched with: `.reqntid` product, else
    /// `.maxntid` product, else the architecture's 1024 (NVIDIA); `.max_flat_workgroup_size` (AMD).
    pub max_threads: u32,
    /// Exact block shape required by `.reqntid` (NVIDIA only).
    pub required_threads: Option<[u32; 3]>,
    /// `.maxnreg` cap (NVIDIA `EIATTR_MAXREG_COUNT`, absent when 0xff = none).
    pub register_cap: Option<u32>,
    /// Bytes of kernel parameters (NVIDIA `CBANK_PARAM_SIZE`; AMD `.kernarg_segment_size`).
    pub kernarg_bytes: u32,
    /// Parameters sorted by offset.
    pub params: Vec<Param>,
    /// AMD register details.
    pub amd: Option<AmdResources>,
}

/// A parsed code object: its architecture and its kernels, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeObject {
    /// The architecture in the ELF header (with the AMD features of `e_flags`).
    pub arch: Arch,
    /// Every kernel of the image, sorted by name (names are unique).
    pub kernels: Vec<KernelInfo>,
}

impl CodeObject {
    /// The kernel named `name`.
    pub fn kernel(&self, name: &str) -> Option<&KernelInfo> {
        self.kernels.iter().find(|k| k.name == name)
    }
}

pub(crate) const EM_CUDA: u16 = object::elf::EM_CUDA;
pub(crate) const EM_AMDGPU: u16 = object::elf::EM_AMDGPU;

/// Parses a cubin (`e_machine` 190) or an AMDGPU HSA code object (224).
pub fn parse(data: &[u8]) -> Result<CodeObject, ParseError> {
    if data.len() < 64 || &data[..4] != b"\x7fELF" {
        return bad("not an ELF file");
    }
    if data[4] != object::elf::ELFCLASS64 || data[5] != object::elf::ELFDATA2LSB {
        return bad("not a 64-bit little-endian ELF");
    }
    let machine = u16::from_le_bytes([data[18], data[19]]);
    let mut object = match machine {
        EM_CUDA => crate::cubin::parse(data)?,
        EM_AMDGPU => crate::amdgpu::parse(data)?,
        m => return bad(format!("e_machine {m} is neither EM_CUDA (190) nor EM_AMDGPU (224)")),
    };
    object.kernels.sort_by(|a, b| a.name.cmp(&b.name));
    if object.kernels.is_empty() {
        return bad("no kernels in the code object");
    }
    if object.kernels.windows(2).any(|w| w[0].name == w[1].name) {
        return bad("a kernel name appears twice");
    }
    Ok(object)
}

/// Little-endian reads that fail instead of panicking.
pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

pub(crate) fn i64_at(b: &[u8], at: usize) -> Option<i64> {
    Some(i64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Renders what the loader read, one field per line, for golden-file snapshots and `mhc inspect`.
pub fn render(object: &CodeObject) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "arch {}", object.arch);
    for k in &object.kernels {
        let _ = writeln!(s, "kernel {}", k.name);
        let _ = writeln!(s, "  registers {}", k.registers);
        if let Some(a) = &k.amd {
            let _ = writeln!(
                s,
                "  vgpr {} sgpr {} agpr {} vgpr_alloc {} sgpr_alloc {} accum_offset {} wavefront {}",
                a.vgpr, a.sgpr, a.agpr, a.vgpr_alloc, a.sgpr_alloc, a.accum_offset, a.wavefront_size
            );
        }
        let _ = writeln!(s, "  shared_bytes {}", k.shared_bytes);
        let _ = writeln!(s, "  local_bytes {}", k.local_bytes);
        let _ = writeln!(s, "  max_threads {}", k.max_threads);
        if let Some(r) = k.required_threads {
            let _ = writeln!(s, "  required_threads {} {} {}", r[0], r[1], r[2]);
        }
        if let Some(c) = k.register_cap {
            let _ = writeln!(s, "  register_cap {c}");
        }
        let _ = writeln!(s, "  kernarg_bytes {}", k.kernarg_bytes);
        for p in &k.params {
            let _ = write!(s, "  param #{} offset {} size {}", p.ordinal, p.offset, p.size);
            if let Some(n) = &p.name {
                let _ = write!(s, " name {n}");
            }
            if let Some(kind) = &p.kind {
                let _ = write!(s, " kind {kind}");
            }
            s.push('\n');
        }
    }
    s
}
