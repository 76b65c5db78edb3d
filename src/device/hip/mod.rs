//! The HIP device: `libamdhip64` opened at run time (nothing from ROCm is needed to build),
//! hand-written gfx942 (CDNA3) kernels embedded as raw code objects and loaded with
//! `hipModuleLoadData`. It mirrors the CUDA device's API.
//!
//! ```no_run
//! use mhc::device::hip::{DeviceBuffer, HipDevice, Plan, Stream};
//! use mhc::{Config, Dtype, Layout};
//! # fn main() -> mhc::Result<()> {
//! let dev = HipDevice::new(0)?;              // Err(LibraryMissing | NoDevice | UnsupportedArch), never a panic
//! let cfg = Config::new(4, 4096);
//! let plan = Plan::new(&dev, cfg, Dtype::Bf16, 8192)?; // loads every stage's kernels once
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
//! )?;                                          // checks in O(1), then one hipModuleLaunchKernel
//! stream.synchronize()?;
//! # Ok(()) }
//! ```
//!
//! Layers (sys -> result -> safe, after cudarc: docs/architecture.md, "A vendor's part"):
//! `sys.rs` (the library and its entry points, resolved once), `result.rs` (each call as a
//! `Result`, every runtime `unsafe` block), then the safe handles: [`HipDevice`] (`device.rs`),
//! [`DeviceBuffer`] / views (`memory.rs`), [`Stream`], [`Event`], [`Graph`] (`stream.rs`),
//! [`Plan`] and its ops (`plan.rs`), [`HipRunner`] (`runner.rs`).
//! What each stage launches, on which grid and with which arguments lives in [`recipe`], which
//! calls no runtime and is tested without a GPU.
//!
//! Difference from the CUDA API: `head` and `static_layer` take the plan's [`Workspace`] (the
//! head's weights and the static layer's coefficients live there).
//!
//! # Safety model
//!
//! All runtime calls are in `result.rs`, each `unsafe` block with its argument. A launch is
//! `unsafe` only inside `Plan::launch`, reached after the op checked every range the kernels
//! touch; kernel arguments are written through a layout resolved by name against the code
//! object's metadata when the kernel was loaded.

mod device;
mod memory;
mod plan;
pub mod recipe;
mod result;
pub mod runner;
mod stream;
mod sys;

pub use device::{arch_from_gcn_name, device_count, Function, HipDevice};
pub use memory::{DeviceBuffer, DeviceTensor, DeviceTensorMut};
pub use plan::{Plan, PostInViews, PreOutViews, PreParamViews, Workspace};
pub use runner::HipRunner;
pub use stream::{Event, Graph, Stream};

#[cfg(test)]
mod tests {
    use super::sys;
    use crate::error::Error;

    #[test]
    fn a_missing_library_is_an_error_listing_every_path_tried() {
        let tried = vec!["/nonexistent/mhc-test/libamdhip64.so".to_string(), "libamdhip64-mhc-absent.so.9".to_string()];
        match sys::open(&tried) {
            Err(Error::LibraryMissing { tried: t }) => assert_eq!(t, tried),
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("a nonexistent library opened"),
        }
    }

    #[test]
    fn a_library_without_the_entry_points_names_the_missing_symbols() {
        // libc opens everywhere and exports none of HIP's symbols.
        let libc = ["libc.so.6".to_string()];
        match sys::open(&libc) {
            Err(Error::LibraryMissing { tried }) => {
                assert_eq!(tried.len(), sys::Api::SYMBOLS.len(), "{tried:?}");
                assert!(tried.contains(&"libc.so.6:hipModuleLaunchKernel".to_string()), "{tried:?}");
                assert!(tried.contains(&"libc.so.6:hipGetDevicePropertiesR0600".to_string()));
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("libc resolved the HIP entry points"),
        }
    }

    #[test]
    fn candidates_honour_the_override_and_rocm_path() {
        assert_eq!(sys::candidates(Some("/x/libamdhip64.so"), Some("/opt/rocm-6.3")), vec!["/x/libamdhip64.so"]);
        let list = sys::candidates(None, Some("/opt/rocm-6.3/"));
        assert_eq!(list[0], "libamdhip64.so");
        assert!(list.contains(&"libamdhip64.so.6".to_string()));
        assert!(list.contains(&"/opt/rocm-6.3/lib/libamdhip64.so".to_string()));
        assert_eq!(list.last().unwrap(), "/opt/rocm/lib/libamdhip64.so");
        let plain = sys::candidates(Some(""), None);
        assert_eq!(plain.iter().filter(|p| p.ends_with("/opt/rocm/lib/libamdhip64.so")).count(), 1);
    }

    #[test]
    fn the_process_runtime_is_absent_here_or_opens_cleanly() {
        // On a machine without ROCm (CI, this one) the cached outcome is LibraryMissing naming
        // libamdhip64; with ROCm it opens. Either way, no panic, and the same answer twice.
        let first = sys::hip().map(|h| h.path.clone());
        let second = sys::hip().map(|h| h.path.clone());
        assert_eq!(first, second);
        if let Err(e) = first {
            match e {
                Error::LibraryMissing { tried } => assert!(tried.iter().any(|p| p.contains("libamdhip64"))),
                Error::Driver { call: "hipInit", .. } => {}
                other => panic!("{other}"),
            }
        }
    }
}

#[cfg(test)]
mod gpu_tests;
#[cfg(test)]
mod test_support;
