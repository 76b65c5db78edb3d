//! # gcn-sim: a gfx942 (CDNA3) wave64 simulator for mhc's hand-written GCN kernels
//!
//! No AMD GPU is available to the project, so the gfx942 kernels (`asm/gcn/gfx942/*.s`) are
//! tested here, in CI, against the f64 reference. The simulator reads the assembled code object
//! (`.hsaco`), not the assembly text: [`elf`] finds the kernel descriptor and the metadata,
//! [`decode`] turns the machine code into instructions (checked against `llvm-objdump-19`),
//! [`exec`] runs wave64 workgroups with LDS, barriers, EXEC/VCC masks and scalar branches
//! ([`valu`], [`lds`], [`vmem`]) and reports hazards ([`hazard`]): a register used before the
//! `s_waitcnt` that covers its load, the gfx94x manual wait states (`s_nop`), LDS or global
//! accesses out of bounds, LDS races between waves, barriers before LDS stores complete,
//! cross-workgroup data without the release / acquire cache operations an MI300 needs,
//! unsupported instructions, registers beyond the descriptor's allocation.
//!
//! The simulator is cross-checked against a second author: OpenCL C kernels compiled by
//! clang-19 for gfx942 (`cross/`, `tests/cross.rs`) run here and are compared with a CPU
//! computation of the same thing, their code is decoded exactly as llvm-objdump-19 prints it,
//! and removing any wait state LLVM inserted is reported. [`runner`] implements
//! `mhc::runner::StageRunner` on top of it.

pub mod decode;
pub mod elf;
pub mod exec;
pub mod fpmath;
pub mod hazard;
pub mod images;
pub mod lds;
pub mod runner;
pub mod valu;
pub mod vmem;

pub use elf::{load_kernel, Kernel};
pub use exec::{launch, launch_with, Launch, Memory, Options, Order, Stats};
pub use fpmath::Trans;

use std::fmt;

/// Everything the simulator reports.
#[derive(Debug, Clone, PartialEq)]
pub enum SimError {
    /// The image is not a readable AMDGPU code object or lacks the kernel.
    BadCodeObject(String),
    /// An instruction outside the supported subset (named, with its offset).
    Unsupported { kernel: String, err: decode::DecodeError },
    /// A hazard or illegal access found while executing.
    Hazard { kernel: String, workgroup: [u32; 3], wave: usize, offset: u32, inst: String, what: String },
    /// A launch the simulator cannot run (bad geometry, unsupported initial state).
    Launch(String),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::BadCodeObject(s) => write!(f, "bad code object: {s}"),
            SimError::Unsupported { kernel, err } => write!(f, "{kernel}: {err}"),
            SimError::Hazard { kernel, workgroup, wave, offset, inst, what } => {
                write!(f, "{kernel}: hazard at +0x{offset:x} `{inst}` (workgroup {workgroup:?}, wave {wave}): {what}")
            }
            SimError::Launch(s) => write!(f, "launch: {s}"),
        }
    }
}

impl std::error::Error for SimError {}
