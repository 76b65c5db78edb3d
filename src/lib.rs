//! # mhc: a runtime for mHC (Manifold-Constrained Hyper-Connections) layers
//!
//! Fused GPU stages written by hand in PTX (NVIDIA sm_90a, sm_100a) and GCN assembly (AMD
//! gfx942), embedded as code objects, loaded by [`mhc_loader`], selected per architecture,
//! register budget and token count; plus [`mod@reference`], the float64 oracle of every stage
//! (docs/math.md), forward and backward.
//!
//! Layers, data flowing one way: `asm/` sources -> `asm/bin` code objects -> `mhc_loader`
//! (parse, registry, select) -> device (load once, cache handles) -> plan -> one launch per op
//! (`post_pre` on NVIDIA is one launch where it folds post into the kernel pre runs: few tokens,
//! and for bf16 with n = 4 from 129 tokens one fused cluster kernel at C a multiple of 128 up to
//! 4096 without `gamma_f`; the post kernel then the pre kernel elsewhere; docs/kernels/post_pre.md).
//! docs/architecture.md describes the folders and where each choice is made.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod config;
pub mod device;
pub mod error;
pub mod npy;
pub mod plan;
pub mod reference;
pub mod runner;
pub mod tensor;

pub use config::{Config, Dtype, Formulation, Stage, MAX_N};
pub use error::{Error, Result};
pub use plan::Tuning;
pub use tensor::{bf16_nearest, HostData, HostDataMut, HostTensor, HostTensorMut, Layout};
