//! Every call into the CUDA driver (libcuda, opened at run time through `cudarc`'s `sys`
//! layer) lives here, each `unsafe` block with its `// SAFETY:` argument. The rest of the CUDA
//! device calls these safe wrappers, which turn a driver status into [`Error::Driver`] with the
//! call's name and the driver's error name.
//!
//! `cudarc`'s dynamic loading panics when libcuda or a symbol is missing. [`open_library`] is
//! therefore called before anything else: it checks that the library opens and that every symbol
//! this module uses resolves, and returns [`Error::LibraryMissing`] otherwise, so that no later
//! call can reach cudarc's panic.

use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

pub use sys::{CUcontext, CUdevice, CUdeviceptr, CUevent, CUfunction, CUgraph, CUgraphExec, CUmodule, CUstream};

/// Every driver symbol the wrappers below call. [`open_library`] resolves all of them up front.
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxSynchronize",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuFuncGetParamInfo",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemsetD32Async",
    "cuMemsetD8_v2",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuLaunchKernel",
    "cuLaunchCooperativeKernel",
    "cuLaunchKernelEx",
    "cuOccupancyMaxActiveClusters",
    "cuGraphInstantiateWithFlags",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
];

/// Opens libcuda and resolves every symbol once per process; `cuInit(0)` on success.
/// The outcome is cached: a machine without a driver answers the same error every time.
pub fn open_library() -> Result<()> {
    static OPENED: OnceLock<Result<()>> = OnceLock::new();
    OPENED
        .get_or_init(|| {
            // SAFETY: `is_culib_present` only tries `dlopen` on the candidate names and drops
            // the handles; it neither panics nor calls into the library.
            let present = unsafe { sys::is_culib_present() };
            if !present {
                return Err(Error::LibraryMissing { tried: vec!["libcuda.so".into(), "libcuda.so.1".into()] });
            }
            // `culib()` opens the same library (now known to load) and keeps it for the process;
            // a panic here would need the library to vanish between the two opens, still caught.
            let lib = std::panic::catch_unwind(|| {
                // SAFETY: see above: the library loaded a moment ago; loading it runs only its
                // initialisers, as any CUDA program does.
                unsafe { sys::culib() }
            })
            .map_err(|_| Error::LibraryMissing { tried: vec!["libcuda.so".into()] })?;
            let missing: Vec<String> = SYMBOLS
                .iter()
                .filter(|name| {
                    // SAFETY: looking a symbol up reads the library's symbol table only; the
                    // pointer type is never called through here.
                    unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err()
                })
                .map(|name| format!("libcuda:{name}"))
                .collect();
            if !missing.is_empty() {
                return Err(Error::LibraryMissing { tried: missing });
            }
            // SAFETY: every symbol resolved above; cuInit takes a flags word that must be 0.
            check("cuInit", unsafe { sys::cuInit(0) })
        })
        .clone()
}

/// Turns a driver status into a `Result`, naming the call and the driver's error.
#[inline]
pub fn check(call: &'static str, status: sys::CUresult) -> Result<()> {
    if status == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut ptr: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static NUL-terminated string (or leaves it
    // untouched and returns an error for an unknown code); we only read it when non-null.
    let named = unsafe { sys::cuGetErrorName(status, &mut ptr) };
    let name = if named == sys::CUresult::CUDA_SUCCESS && !ptr.is_null() {
        // SAFETY: the driver's error-name strings are static and NUL-terminated.
        unsafe { CStr::from_ptr(ptr) }.to_str().ok()
    } else {
        None
    };
    Err(Error::Driver { call, code: status as i64, name })
}

pub fn driver_version() -> Result<i32> {
    let mut v = 0;
    // SAFETY: out-parameter is a valid `c_int`.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut v) })?;
    Ok(v)
}

pub fn device_count() -> Result<i32> {
    let mut n = 0;
    // SAFETY: out-parameter is a valid `c_int`.
    check("cuDeviceGetCount", unsafe { sys::cuDeviceGetCount(&mut n) })?;
    Ok(n)
}

pub fn device_get(ordinal: i32) -> Result<CUdevice> {
    let mut d = 0;
    // SAFETY: out-parameter is a valid `CUdevice`; an out-of-range ordinal is an error code.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut d, ordinal) })?;
    Ok(d)
}

pub fn device_attribute(dev: CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: `dev` came from cuDeviceGet; out-parameter is a valid `c_int`.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, attr, dev) })?;
    Ok(v)
}

pub fn device_name(dev: CUdevice) -> Result<String> {
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: the driver writes at most `len` bytes including the NUL into `buf`.
    check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(buf.as_mut_ptr(), buf.len() as i32, dev) })?;
    // SAFETY: the buffer is NUL-terminated by the driver (and zero-filled before).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
}

pub fn device_total_mem(dev: CUdevice) -> Result<usize> {
    let mut bytes = 0usize;
    // SAFETY: `dev` came from cuDeviceGet; out-parameter is a valid `size_t`.
    check("cuDeviceTotalMem", unsafe { sys::cuDeviceTotalMem_v2(&mut bytes, dev) })?;
    Ok(bytes)
}

pub fn primary_ctx_retain(dev: CUdevice) -> Result<CUcontext> {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: out-parameter is a valid `CUcontext`; paired with `primary_ctx_release` in Drop.
    check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
    Ok(ctx)
}

pub fn primary_ctx_release(dev: CUdevice) -> Result<()> {
    // SAFETY: called once per successful retain, when the owning device is dropped.
    check("cuDevicePrimaryCtxRelease", unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) })
}

/// Makes `ctx` current on this thread unless it already is (a thread-local read in the driver).
#[inline]
pub fn bind(ctx: CUcontext) -> Result<()> {
    let mut cur = std::ptr::null_mut();
    // SAFETY: out-parameter is a valid `CUcontext`.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut cur) })?;
    if cur != ctx {
        // SAFETY: `ctx` is a retained primary context that outlives every caller.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
    }
    Ok(())
}

pub fn ctx_synchronize() -> Result<()> {
    // SAFETY: no arguments; the caller bound the context.
    check("cuCtxSynchronize", unsafe { sys::cuCtxSynchronize() })
}

/// Loads a cubin. The driver parses the ELF from the pointer (its size is in its headers).
pub fn module_load(image: &'static [u8]) -> Result<CUmodule> {
    if image.len() < 64 || &image[..4] != b"\x7fELF" {
        return Err(Error::BadCodeObject { image: "cubin".into(), reason: "not an ELF image".into() });
    }
    let mut m = std::ptr::null_mut();
    // SAFETY: `image` is a complete ELF cubin that lives for the whole program ('static);
    // the current context was bound by the caller.
    check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut m, image.as_ptr() as *const c_void) })?;
    Ok(m)
}

pub fn module_unload(m: CUmodule) -> Result<()> {
    // SAFETY: `m` was loaded by `module_load` and is unloaded once, after its last use.
    check("cuModuleUnload", unsafe { sys::cuModuleUnload(m) })
}

pub fn module_function(m: CUmodule, name: &CStr) -> Result<CUfunction> {
    let mut f = std::ptr::null_mut();
    // SAFETY: `m` is a loaded module, `name` a NUL-terminated string.
    check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, m, name.as_ptr()) })?;
    Ok(f)
}

pub fn function_attribute(f: CUfunction, attr: sys::CUfunction_attribute) -> Result<i32> {
    let mut v = 0;
    // SAFETY: `f` is a function of a loaded module; out-parameter valid.
    check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut v, attr, f) })?;
    Ok(v)
}

pub fn function_set_attribute(f: CUfunction, attr: sys::CUfunction_attribute, value: i32) -> Result<()> {
    // SAFETY: `f` is a function of a loaded module.
    check("cuFuncSetAttribute", unsafe { sys::cuFuncSetAttribute(f, attr, value) })
}

/// `(offset, size)` of parameter `index`, or `None` past the last parameter (only ask for
/// parameters the code object says exist: past the end the driver reports an API error,
/// which compute-sanitizer lists).
pub fn function_param(f: CUfunction, index: usize) -> Result<Option<(usize, usize)>> {
    let (mut off, mut size) = (0usize, 0usize);
    // SAFETY: `f` is a function of a loaded module; out-parameters valid.
    let status = unsafe { sys::cuFuncGetParamInfo(f, index, &mut off, &mut size) };
    if status == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
        return Ok(None);
    }
    check("cuFuncGetParamInfo", status)?;
    Ok(Some((off, size)))
}

pub fn mem_alloc(bytes: usize) -> Result<CUdeviceptr> {
    let mut p = 0;
    // SAFETY: out-parameter valid; the caller's context is current; freed in Drop.
    check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut p, bytes.max(1)) })?;
    Ok(p)
}

pub fn mem_free(p: CUdeviceptr) -> Result<()> {
    // SAFETY: `p` came from `mem_alloc` and is freed exactly once.
    check("cuMemFree", unsafe { sys::cuMemFree_v2(p) })
}

/// Synchronous host-to-device copy of `bytes` bytes.
///
/// # Safety
/// `dst` must be a device allocation of at least `bytes` bytes and `src` valid for `bytes` reads.
pub unsafe fn memcpy_htod(dst: CUdeviceptr, src: *const u8, bytes: usize) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above).
    check("cuMemcpyHtoD", unsafe { sys::cuMemcpyHtoD_v2(dst, src as *const c_void, bytes) })
}

/// Synchronous device-to-host copy.
///
/// # Safety
/// `src` must be a device allocation of at least `bytes` bytes and `dst` valid for `bytes` writes.
pub unsafe fn memcpy_dtoh(dst: *mut u8, src: CUdeviceptr, bytes: usize) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above).
    check("cuMemcpyDtoH", unsafe { sys::cuMemcpyDtoH_v2(dst as *mut c_void, src, bytes) })
}

/// Stream-ordered device-to-device copy.
///
/// # Safety
/// Both ranges must be device allocations of at least `bytes` bytes that live until the copy ran.
pub unsafe fn memcpy_dtod_async(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, s: CUstream) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above).
    check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, s) })
}

/// Stream-ordered fill of `words` 32-bit words.
///
/// # Safety
/// `dst` must be a device allocation of at least `4 * words` bytes, 4-byte aligned.
pub unsafe fn memset_d32_async(dst: CUdeviceptr, value: u32, words: usize, s: CUstream) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above).
    check("cuMemsetD32Async", unsafe { sys::cuMemsetD32Async(dst, value, words, s) })
}

/// Synchronous byte fill.
///
/// # Safety
/// `dst` must be a device allocation of at least `bytes` bytes.
pub unsafe fn memset_d8(dst: CUdeviceptr, value: u8, bytes: usize) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above).
    check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(dst, value, bytes) })
}

pub fn stream_create() -> Result<CUstream> {
    let mut s = std::ptr::null_mut();
    // SAFETY: out-parameter valid; flags = CU_STREAM_NON_BLOCKING (no implicit sync with the
    // legacy default stream).
    check("cuStreamCreate", unsafe {
        sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32)
    })?;
    Ok(s)
}

pub fn stream_destroy(s: CUstream) -> Result<()> {
    // SAFETY: `s` came from `stream_create` and is destroyed once.
    check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(s) })
}

pub fn stream_synchronize(s: CUstream) -> Result<()> {
    // SAFETY: `s` is a live stream.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(s) })
}

pub fn stream_begin_capture(s: CUstream) -> Result<()> {
    // SAFETY: `s` is a live stream; thread-local mode only forbids unsafe calls on this thread.
    check("cuStreamBeginCapture", unsafe {
        sys::cuStreamBeginCapture_v2(s, sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
    })
}

pub fn stream_end_capture(s: CUstream) -> Result<CUgraph> {
    let mut g = std::ptr::null_mut();
    // SAFETY: `s` is a capturing stream; out-parameter valid.
    check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(s, &mut g) })?;
    Ok(g)
}

pub fn event_create() -> Result<CUevent> {
    let mut e = std::ptr::null_mut();
    // SAFETY: out-parameter valid; default flags keep timing enabled.
    check("cuEventCreate", unsafe { sys::cuEventCreate(&mut e, 0) })?;
    Ok(e)
}

pub fn event_destroy(e: CUevent) -> Result<()> {
    // SAFETY: `e` came from `event_create` and is destroyed once.
    check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(e) })
}

pub fn event_record(e: CUevent, s: CUstream) -> Result<()> {
    // SAFETY: both handles are live and of the same context.
    check("cuEventRecord", unsafe { sys::cuEventRecord(e, s) })
}

pub fn event_synchronize(e: CUevent) -> Result<()> {
    // SAFETY: `e` is live.
    check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(e) })
}

pub fn event_elapsed_ms(start: CUevent, end: CUevent) -> Result<f32> {
    let mut ms = 0f32;
    // SAFETY: both events are live and were recorded; out-parameter valid.
    check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime(&mut ms, start, end) })?;
    Ok(ms)
}

/// How a kernel is launched (the kernel table and the plan decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchMode {
    /// The whole grid resident at once, or an error (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): kernels
    /// with a grid-wide arrival.
    pub cooperative: bool,
    /// Programmatic dependent launch (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`):
    /// the driver may schedule this grid before the stream's previous kernel has finished; the
    /// kernel's own `griddepcontrol.wait` then holds it until that kernel's writes are visible.
    /// Only for kernels that execute that wait before their first dependent global access.
    pub programmatic: bool,
}

/// One kernel launch: `cuLaunchKernel`, `cuLaunchCooperativeKernel`, or `cuLaunchKernelEx`
/// with the attributes of `mode` when it asks for a programmatic dependent launch.
///
/// # Safety
/// `params` must point to one pointer per kernel parameter, each to a value of that parameter's
/// size, and every device address inside those values must be valid for what the kernel reads
/// and writes with the given grid.
#[inline]
pub unsafe fn launch(
    f: CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    s: CUstream,
    params: *mut *mut c_void,
    mode: LaunchMode,
) -> Result<()> {
    let ((gx, gy, gz), (bx, by, bz)) = (grid, block);
    if mode.programmatic {
        // A fixed array of attributes (no allocation on the launch path); the union is written
        // through the member its attribute id names.
        let mut attrs: [sys::CUlaunchAttribute; 2] = [
            sys::CUlaunchAttribute {
                id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                pad: [0; 4],
                value: sys::CUlaunchAttributeValue { pad: [0; 64] },
            },
            sys::CUlaunchAttribute {
                id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
                pad: [0; 4],
                value: sys::CUlaunchAttributeValue { pad: [0; 64] },
            },
        ];
        attrs[0].value.programmaticStreamSerializationAllowed = 1;
        attrs[1].value.cooperative = 1;
        let cfg = sys::CUlaunchConfig {
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: shared_bytes,
            hStream: s,
            attrs: attrs.as_mut_ptr(),
            numAttrs: if mode.cooperative { 2 } else { 1 },
        };
        // SAFETY: `cfg` is fully initialised and its attribute array outlives the call; the
        // parameter pointers are guaranteed by the caller (see above); `extra` is unused.
        let st = unsafe { sys::cuLaunchKernelEx(&cfg, f, params, std::ptr::null_mut()) };
        return check("cuLaunchKernelEx", st);
    }
    // SAFETY: guaranteed by the caller (see above); the two entry points take the same
    // arguments (cuLaunchKernel's `extra` is unused: null).
    let (name, status) = unsafe {
        if mode.cooperative {
            let st = sys::cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params);
            ("cuLaunchCooperativeKernel", st)
        } else {
            let st = sys::cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared_bytes, s, params, std::ptr::null_mut());
            ("cuLaunchKernel", st)
        }
    };
    check(name, status)
}

/// How many clusters of `f` (its `.reqnctapercluster` size) the device runs at once with `block`
/// threads per CTA and `shared_bytes` of dynamic shared memory (persistent cluster kernels size
/// their grid with it).
pub fn occupancy_max_active_clusters(f: CUfunction, block: u32, shared_bytes: u32, cluster: u32) -> Result<i32> {
    let mut n = 0i32;
    let cfg = sys::CUlaunchConfig {
        gridDimX: cluster,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: block,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: shared_bytes,
        hStream: std::ptr::null_mut(),
        attrs: std::ptr::null_mut(),
        numAttrs: 0,
    };
    // SAFETY: `cfg` is a fully initialised launch configuration without attributes (the
    // kernel's compiled-in cluster size applies); the driver only reads it and writes `n`.
    check("cuOccupancyMaxActiveClusters", unsafe { sys::cuOccupancyMaxActiveClusters(&mut n, f, &cfg) })?;
    Ok(n)
}

pub fn graph_instantiate(g: CUgraph) -> Result<CUgraphExec> {
    let mut e = std::ptr::null_mut();
    // SAFETY: `g` is a live graph; out-parameter valid.
    check("cuGraphInstantiate", unsafe { sys::cuGraphInstantiateWithFlags(&mut e, g, 0) })?;
    Ok(e)
}

pub fn graph_launch(e: CUgraphExec, s: CUstream) -> Result<()> {
    // SAFETY: both handles are live and of the same context.
    check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(e, s) })
}

pub fn graph_exec_destroy(e: CUgraphExec) -> Result<()> {
    // SAFETY: `e` came from `graph_instantiate` and is destroyed once.
    check("cuGraphExecDestroy", unsafe { sys::cuGraphExecDestroy(e) })
}

pub fn graph_destroy(g: CUgraph) -> Result<()> {
    // SAFETY: `g` came from `stream_end_capture` and is destroyed once.
    check("cuGraphDestroy", unsafe { sys::cuGraphDestroy(g) })
}
