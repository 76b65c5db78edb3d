//! The argument blocks of the sm_90a kernels and the launch constants their code is built
//! around, as the PTX generator writes them (`asm/src/abi/sm90.rs`, from `asm/gen/abi.py`): one
//! `#[repr(C)]` struct per kernel family, laid out as the kernel's single parameter. `Pod`
//! proves at compile time that no struct has padding, so a launch copies the block as bytes;
//! the plan checks each struct's size against the parameter bytes the loader reads from the
//! code object when it loads the kernel.

pub use mhc_kernels::abi::sm90::*;
