//! The CUDA device: opens libcuda, retains the primary context, reads the architecture and the
//! limits, and loads each embedded image once, caching every kernel's function handle in the
//! slot of its catalogue row.

use super::ffi;
use crate::error::{Error, Result};
use crate::plan::catalogue;
use cudarc::driver::sys::{CUdevice_attribute as DA, CUfunction_attribute as FA};
use mhc_loader::Variant;
use std::ffi::CString;
use std::fmt;
use std::sync::{Arc, Mutex};

/// The architectures this build has CUDA kernels for. Parsed from the compute capability;
/// anything else is [`Error::UnsupportedArch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CudaArch {
    /// Hopper, compute capability 9.0, arch-specific cubins (`sm_90a`).
    Sm90a,
}

impl CudaArch {
    pub fn from_compute_capability(major: i32, minor: i32) -> Result<Self> {
        match (major, minor) {
            (9, 0) => Ok(CudaArch::Sm90a),
            _ => Err(Error::UnsupportedArch(format!(
                "compute capability {major}.{minor}: this build has CUDA kernels for sm_90a only"
            ))),
        }
    }
    /// Catalogue name (`sm_90a`).
    pub const fn name(self) -> &'static str {
        match self {
            CudaArch::Sm90a => "sm_90a",
        }
    }
    /// The loader's architecture (the catalogue's rows are selected for it).
    pub const fn loader_arch(self) -> mhc_loader::Arch {
        match self {
            CudaArch::Sm90a => mhc_loader::Arch::Sm90a,
        }
    }
}

impl fmt::Display for CudaArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A resolved kernel: its function handle plus what the driver reports about it. Plain data,
/// copied into plans; valid while its [`CudaDevice`] lives (plans hold the device).
#[derive(Debug, Clone, Copy)]
pub struct Function {
    pub(crate) raw: ffi::CUfunction,
    /// Position of its row in the catalogue ([`mhc_loader::Registry::embedded`]).
    pub slot: usize,
    pub registers: u32,
    pub local_bytes: u32,
    pub static_shared_bytes: u32,
    pub max_threads: u32,
    pub param_bytes: u32,
    /// Byte offset of each kernel parameter in the argument struct (`param_count` of them).
    pub(crate) param_offsets: [u16; MAX_PARAMS],
    pub(crate) param_count: u8,
}

/// Most kernel parameters a launch passes (our kernels take one struct; others up to this).
pub const MAX_PARAMS: usize = 16;

// SAFETY: a CUfunction is a driver handle usable from any thread once its context is current;
// the device that owns it outlives every copy (plans keep the device alive).
unsafe impl Send for Function {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Function {}

pub(crate) struct Inner {
    pub(crate) ordinal: i32,
    pub(crate) ctx: ffi::CUcontext,
    dev: ffi::CUdevice,
    pub(crate) name: String,
    pub(crate) arch: CudaArch,
    pub(crate) cc: (i32, i32),
    pub(crate) sm_count: u32,
    pub(crate) max_shared_per_block_optin: u32,
    pub(crate) l2_bytes: u32,
    pub(crate) driver_version: i32,
    /// One module per embedded image (`mhc_kernels::IMAGES`), loaded on first use.
    modules: Mutex<Vec<Option<ffi::CUmodule>>>,
    /// One function per catalogue row, resolved on first use.
    functions: Mutex<Vec<Option<Function>>>,
}

// SAFETY: the context handle is shareable across threads (the driver API is thread-safe and
// every entry point binds the context first); the caches are behind mutexes.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Inner {
    /// Binds this device's context to the calling thread.
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        ffi::bind(self.ctx)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.bind().is_ok() {
            if let Ok(mods) = self.modules.get_mut() {
                for m in mods.iter_mut().filter_map(Option::take) {
                    let _ = ffi::module_unload(m);
                }
            }
        }
        let _ = ffi::primary_ctx_release(self.dev);
    }
}

/// One CUDA GPU. Cheap to clone (shared handle). Buffers, streams and plans keep it alive.
#[derive(Clone)]
pub struct CudaDevice {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cuda:{} ({}, {}, {} SMs)", self.inner.ordinal, self.inner.name, self.inner.arch, self.inner.sm_count)
    }
}

impl CudaDevice {
    /// Opens GPU `ordinal`. A machine without libcuda gives [`Error::LibraryMissing`], one
    /// without a GPU [`Error::NoDevice`], a GPU of another architecture
    /// [`Error::UnsupportedArch`]. Never panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        ffi::open_library()?;
        let count = ffi::device_count()?;
        if count <= 0 {
            return Err(Error::NoDevice("libcuda reports no CUDA device".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::NoDevice(format!("CUDA device {ordinal} requested, {count} present")));
        }
        let ordinal = ordinal as i32;
        let dev = ffi::device_get(ordinal)?;
        let major = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let arch = CudaArch::from_compute_capability(major, minor)?;
        let sm_count = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
        let smem = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)? as u32;
        let l2 = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as u32;
        let name = ffi::device_name(dev)?;
        let driver_version = ffi::driver_version()?;
        let ctx = ffi::primary_ctx_retain(dev)?;
        let inner = Inner {
            ordinal,
            ctx,
            dev,
            name,
            arch,
            cc: (major, minor),
            sm_count,
            max_shared_per_block_optin: smem,
            l2_bytes: l2,
            driver_version,
            modules: Mutex::new(vec![None; mhc_kernels::IMAGES.len()]),
            functions: Mutex::new(vec![None; catalogue()?.variants().len()]),
        };
        inner.bind()?;
        Ok(CudaDevice { inner: Arc::new(inner) })
    }

    /// The first GPU, or the reason there is none (for tests and tools that skip without one).
    pub fn first() -> Result<Self> {
        Self::new(0)
    }

    pub fn ordinal(&self) -> usize {
        self.inner.ordinal as usize
    }
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    pub fn arch(&self) -> CudaArch {
        self.inner.arch
    }
    pub fn compute_capability(&self) -> (i32, i32) {
        self.inner.cc
    }
    pub fn sm_count(&self) -> u32 {
        self.inner.sm_count
    }
    /// Largest dynamic shared memory a block may opt into.
    pub fn max_shared_per_block(&self) -> u32 {
        self.inner.max_shared_per_block_optin
    }
    pub fn l2_bytes(&self) -> u32 {
        self.inner.l2_bytes
    }
    /// What a plan's selection reads from this device.
    pub fn limits(&self) -> DeviceLimits {
        DeviceLimits { arch: self.arch(), sm_count: self.sm_count(), max_shared_per_block: self.max_shared_per_block() }
    }
    /// Driver version as the driver encodes it (e.g. 13000 for 13.0).
    pub fn driver_version(&self) -> i32 {
        self.inner.driver_version
    }

    /// Resolves the kernel of catalogue row `slot`: loads its image once (cuModuleLoadData),
    /// looks the entry up once, and checks that its parameters tile exactly `param_bytes` (the
    /// argument block of its launcher) at the offsets the code object records and the driver
    /// reports, and that it uses no local memory. Called when a plan is built, never on the
    /// launch path.
    pub(crate) fn function(&self, slot: usize, param_bytes: usize) -> Result<Function> {
        let v: &Variant = catalogue()?.variants().get(slot).ok_or_else(|| Error::BadCodeObject {
            image: mhc_kernels::CATALOGUE_PATH.into(),
            reason: format!("no catalogue row {slot}"),
        })?;
        if let Some(f) = self.inner.functions.lock().map_err(|_| poisoned())?[slot] {
            if f.param_bytes as usize != param_bytes {
                return Err(Error::BadCodeObject {
                    image: v.entry.file.clone(),
                    reason: format!(
                        "{}: loaded for a {}-byte argument block, asked for {param_bytes}",
                        v.id(),
                        f.param_bytes
                    ),
                });
            }
            return Ok(f);
        }
        let image = v.entry.file.as_str();
        let bad = |reason: String| Error::BadCodeObject { image: image.into(), reason };
        let (index, embedded) = mhc_kernels::IMAGES
            .iter()
            .enumerate()
            .find(|(_, i)| i.path == image)
            .ok_or_else(|| bad("the image is not embedded".into()))?;
        self.inner.bind()?;
        let module = {
            let mut mods = self.inner.modules.lock().map_err(|_| poisoned())?;
            match mods[index] {
                Some(m) => m,
                None => {
                    let m = ffi::module_load(embedded.bytes).map_err(|e| match e {
                        Error::Driver { code, name, .. } => {
                            bad(format!("cuModuleLoadData failed with {code} ({})", name.unwrap_or("?")))
                        }
                        other => other,
                    })?;
                    mods[index] = Some(m);
                    m
                }
            }
        };
        let entry = v.entry.entry.as_str();
        let cname = CString::new(entry).map_err(|_| bad("entry name holds a NUL".into()))?;
        let raw =
            ffi::module_function(module, &cname).map_err(|_| bad(format!("entry {entry} not found in the image")))?;
        // The launcher's `#[repr(C)]` argument block must be the kernel's parameter buffer:
        // either one parameter of its size (our kernels) or several parameters that tile it
        // exactly, at the offsets the code object records (mhc-loader: KPARAM_INFO /
        // CBANK_PARAM_SIZE) and the driver reports (cuFuncGetParamInfo, asked only for
        // parameters that exist).
        let info = v.kernel.as_ref().ok_or_else(|| bad(format!("{entry}: the loader read no kernel information")))?;
        let mut param_offsets = [0u16; MAX_PARAMS];
        let count = info.params.len();
        let mut end = 0usize;
        let mut ok = info.kernarg_bytes as usize == param_bytes && (1..=MAX_PARAMS).contains(&count);
        for (i, prm) in info.params.iter().enumerate().take(MAX_PARAMS) {
            let (off, size) = (prm.offset as usize, prm.size as usize);
            ok &= off >= end && ffi::function_param(raw, i)? == Some((off, size));
            param_offsets[i] = off as u16;
            end = off + size;
        }
        ok &= end == param_bytes;
        if !ok {
            return Err(bad(format!(
                "{entry}: parameters {:?} ({} bytes) do not tile the {param_bytes}-byte argument block of launcher {}",
                info.params.iter().map(|p| (p.offset, p.size)).collect::<Vec<_>>(),
                info.kernarg_bytes,
                v.entry.launch
            )));
        }
        let attr = |a| ffi::function_attribute(raw, a).map(|v| v as u32);
        let f = Function {
            raw,
            slot,
            registers: attr(FA::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: attr(FA::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            static_shared_bytes: attr(FA::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            max_threads: attr(FA::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            param_bytes: param_bytes as u32,
            param_offsets,
            param_count: count as u8,
        };
        if f.local_bytes != 0 {
            return Err(bad(format!("{entry} uses {} bytes of local memory (spills)", f.local_bytes)));
        }
        let g = &v.entry.geometry;
        if g.dynamic_shared_max > 0 {
            ffi::function_set_attribute(
                raw,
                FA::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                g.dynamic_shared_max.min(self.inner.max_shared_per_block_optin) as i32,
            )?;
        }
        if g.cluster > 8 {
            // Clusters above the portable 8 CTAs (`pre_pc`: 16) must be allowed per function.
            ffi::function_set_attribute(raw, FA::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)?;
        }
        self.inner.functions.lock().map_err(|_| poisoned())?[slot] = Some(f);
        Ok(f)
    }

    /// Waits for all work on this device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.bind()?;
        ffi::ctx_synchronize()
    }
}

/// One CUDA GPU as the driver describes it, whether or not this build has kernels for it
/// ([`list_devices`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CudaDeviceInfo {
    pub ordinal: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    /// The architecture of this build's kernels for it, or why there are none.
    pub arch: std::result::Result<CudaArch, String>,
    pub sm_count: u32,
    pub memory_bytes: usize,
    /// Driver version as the driver encodes it (e.g. 13000 for 13.0).
    pub driver_version: i32,
}

/// Every CUDA GPU present, without creating a context: `Err` when libcuda cannot be opened (the
/// error says which paths were tried), an empty list when it reports none.
pub fn list_devices() -> Result<Vec<CudaDeviceInfo>> {
    ffi::open_library()?;
    let count = ffi::device_count()?.max(0) as usize;
    let driver_version = ffi::driver_version()?;
    let mut out = Vec::with_capacity(count);
    for ordinal in 0..count {
        let dev = ffi::device_get(ordinal as i32)?;
        let major = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        out.push(CudaDeviceInfo {
            ordinal,
            name: ffi::device_name(dev)?,
            compute_capability: (major, minor),
            arch: CudaArch::from_compute_capability(major, minor).map_err(|e| e.to_string()),
            sm_count: ffi::device_attribute(dev, DA::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32,
            memory_bytes: ffi::device_total_mem(dev)?,
            driver_version,
        });
    }
    Ok(out)
}

/// What a plan's selection reads from a device, so that the same selection can run without
/// one (`mhc inspect --explain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    pub arch: CudaArch,
    pub sm_count: u32,
    /// Largest dynamic shared memory a block may opt into.
    pub max_shared_per_block: u32,
}

impl DeviceLimits {
    /// The architecture's flagship part (sm_90a: H100 / H200 SXM, 132 SMs, 227 KiB per block).
    pub fn flagship(arch: CudaArch) -> Self {
        match arch {
            CudaArch::Sm90a => DeviceLimits { arch, sm_count: 132, max_shared_per_block: 227 * 1024 },
        }
    }
}

fn poisoned() -> Error {
    Error::Driver { call: "kernel cache (a thread panicked while loading)", code: -1, name: None }
}
