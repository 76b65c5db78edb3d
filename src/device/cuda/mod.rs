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
//!   `l2_bytes()`, `synchronize()`. Kernel handles are cached per catalogue row.
//! - [`DeviceBuffer`]: `alloc`, `zeroed`, `from_slice`, `upload`, `download`, `to_vec`,
//!   `fill_u32` (poison), `copy_from`; views `view(dtype, layout)` / `view_mut` / `flat`.
//! - [`DeviceTensor`] / [`DeviceTensorMut`]: pointer + dtype + [`crate::Layout`] (strided rows);
//!   `unsafe from_raw` for memory allocated elsewhere. Ops check them (dtype, rows, row length
//!   vs storage, pointer and stride alignment) before anything is launched.
//! - [`Stream`]: `new`, `synchronize`, `begin_capture` / `end_capture` -> [`Graph`] (`launch`).
//!   [`Event`]: `new`, `record`, `synchronize`, `elapsed_ms_since`.
//! - [`Plan`]: `new(&dev, cfg, dtype, max_tokens)`, `supports(stage)`, `kernel_for(stage, t)`,
//!   `buckets(stage)`, `workspace_bytes()`, `new_workspace()` -> [`Workspace`] (zeroed once;
//!   kernels leave it reusable). Ops: `pre`, `post`, `post_pre`, `head`, `static_layer`,
//!   `expand`, `coeffs`.
//! - [`planned_kernels`]: the plan's selection without a device (`mhc inspect --explain`).
//!
//! # How a call runs
//!
//! `Plan::new` asks the loader's selector (the only place a kernel is chosen) for every stage's
//! variant per token range, with this device's limits ([`DeviceLimits`], cluster occupancy),
//! and loads each chosen kernel once, checking its parameter bytes against its launcher's
//! argument block. An op looks its bucket up by T, the bucket's launcher (one module per kernel
//! family: `post.rs`, `head.rs`, `static_layer.rs`, `expand.rs`, `coeffs.rs`, `pre/`) checks
//! every view and builds the launch as data ([`launch`]), and the plan enqueues it: one driver
//! call, no allocation, no host sync.
//!
//! # Safety model
//!
//! All driver calls are in `ffi.rs`, each `unsafe` block with its argument. A launch is `unsafe`
//! only inside [`launch`]'s enqueue (crate-private), reached after the launcher checked every
//! range the kernel touches.

mod abi;
mod coeffs;
mod device;
mod expand;
mod ffi;
mod head;
#[cfg(feature = "testing")]
mod hooks;
pub mod launch;
mod memory;
mod ops;
mod plan;
mod post;
mod pre;
pub mod runner;
mod static_layer;
mod stream;

pub use device::{list_devices, CudaArch, CudaDevice, CudaDeviceInfo, DeviceLimits, Function};
#[cfg(feature = "testing")]
pub use hooks::{PreKernel, PC_STAMP_ROUNDS};
pub use launch::{Bucket, LaunchKind, Overlap};
pub use memory::{DeviceBuffer, DeviceTensor, DeviceTensorMut};
pub use plan::{planned_kernels, Plan, PlannedKernel, Workspace};
pub use pre::general::PreVariant;
pub use pre::{PostInViews, PreOutViews, PreParamViews};
pub use runner::CudaRunner;
pub use stream::{Event, Graph, Stream};
