//! The HIP device: opens libamdhip64 (once per process), reads the architecture from
//! `gcnArchName` and the CU count, and loads each embedded gfx942 image once
//! (`hipModuleLoadData`), caching every kernel's function handle and argument layout in its
//! slot. Loading checks the kernel against the loader's metadata (arguments by name, kernarg
//! size, workgroup size) before any launch can use it.

use super::recipe::{ArgLayout, Kernel, BLOCK};
use super::result::{self, device, module};
use super::sys::{self, attr, func_attr, Hip};
use crate::error::{Error, Result};
use mhc_loader::{AmdFeatures, Arch, Vendor};
use std::ffi::CString;
use std::fmt;
use std::sync::{Arc, Mutex};

/// The architecture of a device from its `gcnArchName` (`gfx942:sramecc+:xnack-`): the name is
/// parsed by the loader (features into [`AmdFeatures`]), and must be one this build has
/// kernels for, whose code objects' XNACK/SRAMECC modes suit the device's. Anything else is
/// [`Error::UnsupportedArch`].
pub fn arch_from_gcn_name(gcn_arch_name: &str) -> Result<Arch> {
    let unsupported = |why: String| Error::UnsupportedArch(format!("{gcn_arch_name:?}: {why}"));
    let arch = Arch::parse(gcn_arch_name).map_err(|_| unsupported("not an AMD architecture mhc knows".into()))?;
    if arch.vendor() != Vendor::Amd {
        return Err(unsupported("not an AMD architecture".into()));
    }
    if arch.family() != Arch::Gfx942(AmdFeatures::ANY) {
        return Err(unsupported("this build has HIP kernels for gfx942 only".into()));
    }
    for k in Kernel::ALL {
        let (bytes, _) = k.info().map_err(|e| bad(k, e))?;
        let code = mhc_loader::parse(bytes).map_err(|e| bad(k, e.to_string()))?.arch;
        if !code.runs_on(arch) {
            return Err(unsupported(format!("{} is built for {code}, which does not load on it", k.image())));
        }
    }
    Ok(arch)
}

fn bad(k: Kernel, reason: String) -> Error {
    Error::BadCodeObject { image: k.image().into(), reason }
}

/// A loaded kernel: its function handle, argument layout and what the runtime reports about it.
/// Plain data, copied into plans; valid while its [`HipDevice`] lives (plans hold the device).
#[derive(Debug, Clone, Copy)]
pub struct Function {
    pub(crate) raw: sys::HipFunction,
    pub kernel: Kernel,
    pub layout: ArgLayout,
    pub registers: u32,
    pub shared_bytes: u32,
    /// Scratch bytes per work-item (`HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES`).
    pub local_bytes: u32,
    pub max_threads: u32,
}

// SAFETY: a hipFunction_t is a runtime handle usable from any host thread; the device that
// owns its module outlives every copy (plans keep the device alive).
unsafe impl Send for Function {}
// SAFETY: as above; the handle is never mutated.
unsafe impl Sync for Function {}

pub(crate) struct Inner {
    pub(crate) hip: &'static Hip,
    pub(crate) ordinal: i32,
    name: String,
    gcn_arch_name: String,
    arch: Arch,
    cu_count: u32,
    max_shared_per_block: u32,
    l2_bytes: u32,
    runtime_version: i32,
    /// One module per kernel slot (each gfx942 kernel has its own image), loaded on first use.
    modules: Mutex<[Option<sys::HipModule>; Kernel::ALL.len()]>,
    /// One function per kernel slot, resolved and checked on first use.
    functions: Mutex<[Option<Function>; Kernel::ALL.len()]>,
}

// SAFETY: module handles are process-wide runtime objects usable from any thread; the caches
// are behind mutexes; the device is made current on each thread before use.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Inner {
    /// Makes this device current on the calling thread.
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        device::bind(self.hip, self.ordinal)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.bind().is_ok() {
            if let Ok(mods) = self.modules.get_mut() {
                for m in mods.iter_mut().filter_map(Option::take) {
                    let _ = module::unload(self.hip, m);
                }
            }
        }
    }
}

/// One AMD GPU. Cheap to clone (shared handle). Buffers, streams and plans keep it alive.
#[derive(Clone)]
pub struct HipDevice {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for HipDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        write!(f, "hip:{} ({}, {}, {} CUs)", i.ordinal, i.name, i.gcn_arch_name, i.cu_count)
    }
}

fn poisoned() -> Error {
    Error::NoDevice("a HIP device cache lock was poisoned by a panic".into())
}

/// How many HIP devices the runtime reports: `Err` when libamdhip64 cannot be opened (the
/// error lists the paths tried).
pub fn device_count() -> Result<usize> {
    let hip = result::hip()?;
    Ok(device::count(hip)?.max(0) as usize)
}

impl HipDevice {
    /// Opens GPU `ordinal`. No libamdhip64: [`Error::LibraryMissing`] with the paths tried; no
    /// GPU: [`Error::NoDevice`]; a GPU without kernels in this build: [`Error::UnsupportedArch`].
    /// Never panics.
    pub fn new(ordinal: usize) -> Result<Self> {
        let hip = result::hip()?;
        let count = device::count(hip)?;
        if count <= 0 {
            return Err(Error::NoDevice("libamdhip64 reports no HIP device".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::NoDevice(format!("HIP device {ordinal} requested, {count} present")));
        }
        let ordinal = ordinal as i32;
        device::bind(hip, ordinal)?;
        let name = device::name(hip, ordinal)?;
        let (props_name, gcn_arch_name) = device::props_names(hip, ordinal)?;
        // The gcnArchName offset is an ABI assumption (sys.rs); `name` sits at offset 0 of the
        // same struct, so a disagreement means the struct is not the one we think it is.
        if props_name != name {
            return Err(Error::LibraryMissing {
                tried: vec![format!(
                    "{}: hipGetDevicePropertiesR0600 layout differs from ROCm 6 (name {props_name:?} vs {name:?})",
                    hip.path
                )],
            });
        }
        let arch = arch_from_gcn_name(&gcn_arch_name)?;
        let cu_count = device::attribute(hip, ordinal, attr::MULTIPROCESSOR_COUNT)? as u32;
        let warp = device::attribute(hip, ordinal, attr::WARP_SIZE)?;
        if warp != 64 {
            return Err(Error::UnsupportedArch(format!("{gcn_arch_name}: wave size {warp}, the kernels need 64")));
        }
        let max_shared_per_block = device::attribute(hip, ordinal, attr::MAX_SHARED_MEMORY_PER_BLOCK)? as u32;
        let l2_bytes = device::attribute(hip, ordinal, attr::L2_CACHE_SIZE)? as u32;
        let max_threads = device::attribute(hip, ordinal, attr::MAX_THREADS_PER_BLOCK)?;
        if max_threads < BLOCK as i32 {
            return Err(Error::UnsupportedArch(format!("{gcn_arch_name}: {max_threads} threads per block")));
        }
        let runtime_version = device::runtime_version(hip)?;
        let inner = Inner {
            hip,
            ordinal,
            name,
            gcn_arch_name,
            arch,
            cu_count,
            max_shared_per_block,
            l2_bytes,
            runtime_version,
            modules: Mutex::new([None; Kernel::ALL.len()]),
            functions: Mutex::new([None; Kernel::ALL.len()]),
        };
        Ok(HipDevice { inner: Arc::new(inner) })
    }

    /// The first GPU, or the reason there is none.
    pub fn first() -> Result<Self> {
        Self::new(0)
    }

    pub fn ordinal(&self) -> usize {
        self.inner.ordinal as usize
    }
    /// The marketing name (`AMD Instinct MI300X`).
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// `gcnArchName` as the runtime reports it (`gfx942:sramecc+:xnack-`).
    pub fn gcn_arch_name(&self) -> &str {
        &self.inner.gcn_arch_name
    }
    /// The architecture with its XNACK/SRAMECC modes.
    pub fn arch(&self) -> Arch {
        self.inner.arch
    }
    /// Compute units (`hipDeviceAttributeMultiprocessorCount`).
    pub fn cu_count(&self) -> u32 {
        self.inner.cu_count
    }
    pub fn max_shared_per_block(&self) -> u32 {
        self.inner.max_shared_per_block
    }
    pub fn l2_bytes(&self) -> u32 {
        self.inner.l2_bytes
    }
    /// `hipRuntimeGetVersion` (e.g. 60342134 for ROCm 6.3).
    pub fn runtime_version(&self) -> i32 {
        self.inner.runtime_version
    }
    /// The library that was opened.
    pub fn library_path(&self) -> &str {
        &self.inner.hip.path
    }

    /// Resolves `kernel`: loads its image once (`hipModuleLoadData`), looks the function up
    /// once, resolves its argument layout by name against the loader's metadata (every field
    /// known, every argument set, sizes equal, the kernarg size the metadata's) and checks that
    /// it runs 256-work-item workgroups within the device's LDS. Called when a plan is built,
    /// never on the launch path.
    pub fn function(&self, kernel: Kernel) -> Result<Function> {
        let slot = kernel.slot();
        if let Some(f) = self.inner.functions.lock().map_err(|_| poisoned())?[slot] {
            return Ok(f);
        }
        let hip = self.inner.hip;
        let (bytes, info) = kernel.info().map_err(|e| bad(kernel, e))?;
        let layout = ArgLayout::resolve(kernel, &info, kernel.fields()).map_err(|e| bad(kernel, e))?;
        if info.max_threads < BLOCK {
            return Err(bad(kernel, format!("max_flat_workgroup_size {} < {BLOCK}", info.max_threads)));
        }
        if info.shared_bytes > self.inner.max_shared_per_block {
            return Err(bad(
                kernel,
                format!("{} LDS bytes > the device's {}", info.shared_bytes, self.inner.max_shared_per_block),
            ));
        }
        self.inner.bind()?;
        let m = {
            let mut mods = self.inner.modules.lock().map_err(|_| poisoned())?;
            match mods[slot] {
                Some(m) => m,
                None => {
                    let m = module::load_data(hip, bytes).map_err(|e| match e {
                        Error::Driver { code, name, .. } => {
                            bad(kernel, format!("hipModuleLoadData failed with {code} ({})", name.unwrap_or("?")))
                        }
                        other => other,
                    })?;
                    mods[slot] = Some(m);
                    m
                }
            }
        };
        let cname = CString::new(kernel.entry()).map_err(|_| bad(kernel, "entry name holds a NUL".into()))?;
        let raw = module::get_function(hip, m, &cname)
            .map_err(|e| bad(kernel, format!("{} not found in the loaded module: {e}", kernel.entry())))?;
        let get = |a| module::function_attribute(hip, raw, a).map(|v| v.max(0) as u32);
        let f = Function {
            raw,
            kernel,
            layout,
            registers: get(func_attr::NUM_REGS)?,
            shared_bytes: get(func_attr::SHARED_SIZE_BYTES)?,
            local_bytes: get(func_attr::LOCAL_SIZE_BYTES)?,
            max_threads: get(func_attr::MAX_THREADS_PER_BLOCK)?,
        };
        // The runtime's own figures are recorded, not enforced: the code object (parsed and
        // cross-checked against its descriptor by the loader) is the source of truth, and
        // ROCclr derives MAX_THREADS_PER_BLOCK from occupancy, not from the workgroup limit.
        self.inner.functions.lock().map_err(|_| poisoned())?[slot] = Some(f);
        Ok(f)
    }

    /// Loads and checks every gfx942 kernel (tests and `mhc inspect`).
    pub fn load_all(&self) -> Result<Vec<Function>> {
        Kernel::ALL.iter().map(|&k| self.function(k)).collect()
    }

    /// Waits for all work on this device.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.bind()?;
        device::synchronize(self.inner.hip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mhc_loader::FeatureMode;

    #[test]
    fn gcn_arch_names_parse_into_arch_and_flags() {
        let a = arch_from_gcn_name("gfx942:sramecc+:xnack-").unwrap();
        assert_eq!(a, Arch::Gfx942(AmdFeatures { sramecc: FeatureMode::On, xnack: FeatureMode::Off }));
        assert_eq!(a.target_id(), "gfx942:sramecc+:xnack-");
        // Features may come in either order or be absent (any); xnack+ devices load "any" code.
        assert_eq!(arch_from_gcn_name("gfx942:xnack-:sramecc+").unwrap(), a);
        assert_eq!(arch_from_gcn_name("gfx942").unwrap(), Arch::Gfx942(AmdFeatures::ANY));
        assert!(arch_from_gcn_name("gfx942:xnack+").is_ok());
        for other in ["gfx90a:sramecc+:xnack-", "gfx950", "gfx1100", "sm_90a", "", "gfx942:foo+", "gfx942:xnack"] {
            match arch_from_gcn_name(other) {
                Err(Error::UnsupportedArch(msg)) => assert!(msg.contains(&format!("{other:?}")), "{msg}"),
                r => panic!("{other:?}: {r:?}"),
            }
        }
        assert!(matches!(arch_from_gcn_name("gfx90a"), Err(Error::UnsupportedArch(m)) if m.contains("gfx942 only")));
    }
}
