//! The CUDA device: libcuda through `cudarc` (driver API, opened at run time), hand-written
//! sm_90a kernels embedded as cubins.
//!
//! # API (stable; the `pre` and `post_pre` ops build on it)
//!
//! ```no_run
//! use mhc::device::cuda::{CudaDevice, DeviceBuffer, Plan, Stream};
//! use mhc::{Config, Dtype, Layout};
//! # fn main() -> mhc::Result<()> {
//! let dev = CudaDevice::new(0)?;              // Err(LibraryMissing | NoDevice | UnsupportedArch), never a panic
//! let cfg = Config::new(4, 4096);
//! let plan = Plan::new(&dev, cfg, Dtype::Bf16, 8192)?; // selects + loads every stage's kernel once
//! let stream = Stream::new(&dev)?;
//! let t = 16;
//! let x = DeviceBuffer::alloc(&dev, t * 4 * 4096 * 2)?;
//! let f = DeviceBuffer::alloc(&dev, t * 4096 * 2)?;
//! let hp = DeviceBuffer::alloc(&dev, t * 4 * 4)?;
//! let hr = DeviceBuffer::alloc(&dev, t * 16 * 4)?;
//! let mut out = DeviceBuffer::alloc(&dev, t * 4 * 4096 * 2)?;
//! plan.post(
//!     &stream,
//!     &x.view(Dtype::Bf16, Layout::streams(t, 4, 4096)),
//!     &f.view(Dtype::Bf16, Layout::dense(t, 4096)),
//!     &hp.view(Dtype::F32, Layout::dense(t, 4)),
//!     &hr.view(Dtype::F32, Layout::dense(t, 16)),
//!     &mut out.view_mut(Dtype::Bf16, Layout::streams(t, 4, 4096)),
//! )?;                                          // checks in O(1), then exactly one cuLaunchKernel
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! - [`CudaDevice`]: `new(ordinal)`, `arch()`, `sm_count()`, `max_shared_per_block()`,
//!   `l2_bytes()`, `synchronize()`. Kernel handles are cached per table slot (`kernels.rs`).
//! - [`DeviceBuffer`]: `alloc`, `zeroed`, `from_slice`, `upload`, `download`, `to_vec`,
//!   `fill_u32` (poison), `copy_from`; views `view(dtype, layout)` / `view_mut` / `flat`.
//! - [`DeviceTensor`] / [`DeviceTensorMut`]: pointer + dtype + [`crate::Layout`] (strided rows);
//!   `unsafe from_raw` for memory allocated elsewhere. Ops check them with `check` /
//!   `check_dense_f32` (dtype, rows, row length vs storage, pointer and stride alignment).
//! - [`Stream`]: `new`, `synchronize`, `begin_capture` / `end_capture` -> [`Graph`] (`launch`).
//!   [`Event`]: `new`, `record`, `synchronize`, `elapsed_ms_since`.
//! - [`Plan`]: `new(&dev, cfg, dtype, max_tokens)`, `supports(stage)`, `buckets(stage)`,
//!   `workspace_bytes()`, `new_workspace()` -> [`Workspace`] (zeroed once; kernels leave it
//!   reusable). Ops: `post`, `head`, `static_layer`, `expand`, `coeffs` (this module), `pre`
//!   (`pre.rs`; its decode kernel in `pre_decode.rs`, its persistent-cluster kernel for many tokens
//!   in `pre_pc.rs`), `post_pre` (`post_pre.rs`: post then pre,
//!   the fused kernel as `post_pre_fused`). Post, head, static and expand are chosen per token
//!   range by `mhc_loader::select` from `asm/catalogue.toml`; the other stages by the kernel table.
//! - [`CudaRunner`]: the `StageRunner` of `mhc run --device cuda` (upload in the dtype, poison
//!   outputs with NaN, one launch, download).
//!
//! # Adding a stage's kernels (for `pre.rs` / `post_pre.rs`)
//!
//! 1. Rows in `kernels::build()` (stage, dtype, formulation, n, entry, image, argument struct
//!    size, tile) and the image in `kernels::IMAGES`; the `#[repr(C)]` argument struct beside it
//!    (one kernel parameter: `.param .align 8 .b8 args[SIZE]`).
//! 2. An `impl Plan` block: `let b = self.bucket(Stage::Pre, t)?;` validate the views in O(1)
//!    (`view.check(..)`), fill the argument struct, `self.launch(stream, b, grid, block, smem,
//!    &args)`. Workspace: add the stage's byte formula to `plan::stage_workspace`; ops get the
//!    address from `Workspace::device_ptr`.
//!
//! # Safety model
//!
//! All driver calls are in `ffi.rs`, each `unsafe` block with its argument. A launch is `unsafe`
//! only inside `Plan::launch` (crate-private), reached after the op checked every range the kernel touches.

mod coeffs;
mod device;
mod expand;
mod ffi;
mod head;
pub mod kernels;
mod memory;
mod plan;
mod post;
mod post_pre;
mod pre;
mod pre_decode;
mod pre_gemm;
mod pre_pc;
pub mod runner;
mod static_layer;
mod stream;

pub use device::{CudaArch, CudaDevice, Function};
pub use memory::{DeviceBuffer, DeviceTensor, DeviceTensorMut};
pub use plan::{planned_kernels, Bucket, DeviceLimits, Overlap, Plan, PlannedKernel, Workspace};
pub use post_pre::PostInViews;
pub use pre::{PreKernel, PreOutViews, PreParamViews, PreVariant};
pub use pre_pc::PC_STAMP_ROUNDS;
pub use runner::CudaRunner;
pub use stream::{Event, Graph, Stream};
