//! The middle layer: every HIP call as a safe (or narrowly `unsafe`) function returning
//! `Result`, grouped by family (`device::`, `mem::`, `stream::`, `event::`, `module::`,
//! `graph::`, [`launch`]). Out-parameters go through locals; a status other than `hipSuccess`
//! becomes [`Error::Driver`] with the call's name and `hipGetErrorName`'s text. Every `unsafe`
//! block of the HIP device that calls the runtime is in this file.

use super::sys::{self, Hip, HipError, HIP_SUCCESS};
use crate::error::{Error, Result};
use std::ffi::{c_void, CStr};

/// The opened runtime (see [`sys::hip`]).
#[inline]
pub fn hip() -> Result<&'static Hip> {
    sys::hip()
}

/// Turns a status into a `Result`, naming the call and the runtime's error name.
#[inline]
pub fn check(hip: &Hip, call: &'static str, status: HipError) -> Result<()> {
    if status == HIP_SUCCESS {
        return Ok(());
    }
    // SAFETY: hipGetErrorName returns a pointer to a static NUL-terminated string for every
    // code (an "unknown" string for codes it does not know); it is only read when non-null.
    let ptr = unsafe { (hip.api.hipGetErrorName)(status) };
    let name = if ptr.is_null() {
        None
    } else {
        // SAFETY: see above: static, NUL-terminated, never freed.
        unsafe { CStr::from_ptr(ptr) }.to_str().ok()
    };
    Err(Error::Driver { call, code: status as i64, name })
}

pub mod device {
    use super::*;

    pub fn count(hip: &Hip) -> Result<i32> {
        let mut n = 0;
        // SAFETY: out-parameter is a valid `int`.
        let status = unsafe { (hip.api.hipGetDeviceCount)(&mut n) };
        if status == 100 {
            // hipErrorNoDevice: a runtime without GPUs is "zero devices", not a driver failure.
            return Ok(0);
        }
        check(hip, "hipGetDeviceCount", status)?;
        Ok(n)
    }

    pub fn runtime_version(hip: &Hip) -> Result<i32> {
        let mut v = 0;
        // SAFETY: out-parameter is a valid `int`.
        check(hip, "hipRuntimeGetVersion", unsafe { (hip.api.hipRuntimeGetVersion)(&mut v) })?;
        Ok(v)
    }

    /// Makes `ordinal` the calling thread's current device unless it already is.
    #[inline]
    pub fn bind(hip: &Hip, ordinal: i32) -> Result<()> {
        let mut cur = -1;
        // SAFETY: out-parameter is a valid `int`.
        check(hip, "hipGetDevice", unsafe { (hip.api.hipGetDevice)(&mut cur) })?;
        if cur != ordinal {
            // SAFETY: `ordinal` was checked against the device count when the device opened.
            check(hip, "hipSetDevice", unsafe { (hip.api.hipSetDevice)(ordinal) })?;
        }
        Ok(())
    }

    pub fn attribute(hip: &Hip, ordinal: i32, attr: i32) -> Result<i32> {
        let mut v = 0;
        // SAFETY: out-parameter valid; an unknown attribute or ordinal is an error code.
        check(hip, "hipDeviceGetAttribute", unsafe { (hip.api.hipDeviceGetAttribute)(&mut v, attr, ordinal) })?;
        Ok(v)
    }

    pub fn name(hip: &Hip, ordinal: i32) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; sys::PROPS_NAME_LEN];
        // SAFETY: the runtime writes at most `len` bytes including the NUL into `buf`.
        check(hip, "hipDeviceGetName", unsafe {
            (hip.api.hipDeviceGetName)(buf.as_mut_ptr(), buf.len() as i32, ordinal)
        })?;
        Ok(super::c_string(bytemuck_bytes(&buf)))
    }

    /// `(name, gcnArchName)` from `hipDeviceProp_tR0600` (see `sys` for the layout relied on).
    pub fn props_names(hip: &Hip, ordinal: i32) -> Result<(String, String)> {
        let mut buf = vec![0u8; sys::PROPS_BUFFER];
        // SAFETY: the buffer is zeroed and larger than the ROCm 6 struct (1472 bytes) the call
        // writes; it is only read as bytes afterwards.
        check(hip, "hipGetDevicePropertiesR0600", unsafe {
            (hip.api.hipGetDevicePropertiesR0600)(buf.as_mut_ptr() as *mut c_void, ordinal)
        })?;
        let name = super::c_string(&buf[..sys::PROPS_NAME_LEN]);
        let arch = super::c_string(&buf[sys::PROPS_GCN_ARCH_NAME..sys::PROPS_GCN_ARCH_NAME + sys::PROPS_NAME_LEN]);
        Ok((name, arch))
    }

    pub fn synchronize(hip: &Hip) -> Result<()> {
        // SAFETY: no arguments; the caller bound the device.
        check(hip, "hipDeviceSynchronize", unsafe { (hip.api.hipDeviceSynchronize)() })
    }

    fn bytemuck_bytes(buf: &[std::ffi::c_char]) -> &[u8] {
        // SAFETY: c_char and u8 have the same size and alignment; the slice is only read.
        unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, buf.len()) }
    }
}

/// The bytes before the first NUL (the whole slice without one), lossily as UTF-8.
pub fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

pub mod mem {
    use super::*;

    /// `bytes` (at least 1) of device memory on the current device; freed with [`free`].
    pub fn alloc(hip: &Hip, bytes: usize) -> Result<u64> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-parameter valid; the caller bound the device.
        check(hip, "hipMalloc", unsafe { (hip.api.hipMalloc)(&mut p, bytes.max(1)) })?;
        Ok(p as u64)
    }

    pub fn free(hip: &Hip, p: u64) -> Result<()> {
        // SAFETY: `p` came from `alloc` and is freed exactly once (DeviceBuffer's Drop).
        check(hip, "hipFree", unsafe { (hip.api.hipFree)(p as *mut c_void) })
    }

    /// Synchronous host-to-device copy.
    ///
    /// # Safety
    /// `dst` must be a device allocation of at least `src.len()` bytes.
    pub unsafe fn htod(hip: &Hip, dst: u64, src: &[u8]) -> Result<()> {
        // SAFETY: guaranteed by the caller; the source is a live slice.
        check(hip, "hipMemcpyHtoD", unsafe {
            (hip.api.hipMemcpyHtoD)(dst as *mut c_void, src.as_ptr() as *const c_void, src.len())
        })
    }

    /// Synchronous device-to-host copy (waits for prior work).
    ///
    /// # Safety
    /// `src` must be a device allocation of at least `dst.len()` bytes.
    pub unsafe fn dtoh(hip: &Hip, dst: &mut [u8], src: u64) -> Result<()> {
        // SAFETY: guaranteed by the caller; the destination is a live slice.
        check(hip, "hipMemcpyDtoH", unsafe {
            (hip.api.hipMemcpyDtoH)(dst.as_mut_ptr() as *mut c_void, src as *mut c_void, dst.len())
        })
    }

    /// Stream-ordered device-to-device copy.
    ///
    /// # Safety
    /// Both ranges must be device allocations of at least `bytes` bytes that live until the copy ran.
    pub unsafe fn dtod_async(hip: &Hip, dst: u64, src: u64, bytes: usize, s: sys::HipStream) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        check(hip, "hipMemcpyDtoDAsync", unsafe {
            (hip.api.hipMemcpyDtoDAsync)(dst as *mut c_void, src as *mut c_void, bytes, s)
        })
    }

    /// Stream-ordered fill of `words` 32-bit words.
    ///
    /// # Safety
    /// `dst` must be a 4-byte aligned device allocation of at least `4 * words` bytes.
    pub unsafe fn set_d32_async(hip: &Hip, dst: u64, word: u32, words: usize, s: sys::HipStream) -> Result<()> {
        // SAFETY: guaranteed by the caller; the value is passed as the C `int` it is declared as.
        check(hip, "hipMemsetD32Async", unsafe {
            (hip.api.hipMemsetD32Async)(dst as *mut c_void, word as i32, words, s)
        })
    }

    /// Synchronous byte fill.
    ///
    /// # Safety
    /// `dst` must be a device allocation of at least `bytes` bytes.
    pub unsafe fn set_d8(hip: &Hip, dst: u64, value: u8, bytes: usize) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        check(hip, "hipMemsetD8", unsafe { (hip.api.hipMemsetD8)(dst as *mut c_void, value, bytes) })
    }
}

pub mod stream {
    use super::*;

    pub fn create(hip: &Hip) -> Result<sys::HipStream> {
        let mut s = std::ptr::null_mut();
        // SAFETY: out-parameter valid; non-blocking: no implicit sync with the null stream.
        check(hip, "hipStreamCreateWithFlags", unsafe {
            (hip.api.hipStreamCreateWithFlags)(&mut s, sys::HIP_STREAM_NON_BLOCKING)
        })?;
        Ok(s)
    }

    pub fn destroy(hip: &Hip, s: sys::HipStream) -> Result<()> {
        // SAFETY: `s` came from `create` and is destroyed once.
        check(hip, "hipStreamDestroy", unsafe { (hip.api.hipStreamDestroy)(s) })
    }

    pub fn synchronize(hip: &Hip, s: sys::HipStream) -> Result<()> {
        // SAFETY: `s` is a live stream.
        check(hip, "hipStreamSynchronize", unsafe { (hip.api.hipStreamSynchronize)(s) })
    }
}

pub mod event {
    use super::*;

    pub fn create(hip: &Hip) -> Result<sys::HipEvent> {
        let mut e = std::ptr::null_mut();
        // SAFETY: out-parameter valid; default flags keep timing.
        check(hip, "hipEventCreate", unsafe { (hip.api.hipEventCreate)(&mut e) })?;
        Ok(e)
    }

    pub fn destroy(hip: &Hip, e: sys::HipEvent) -> Result<()> {
        // SAFETY: `e` came from `create` and is destroyed once.
        check(hip, "hipEventDestroy", unsafe { (hip.api.hipEventDestroy)(e) })
    }

    pub fn record(hip: &Hip, e: sys::HipEvent, s: sys::HipStream) -> Result<()> {
        // SAFETY: both handles are live and of the same device.
        check(hip, "hipEventRecord", unsafe { (hip.api.hipEventRecord)(e, s) })
    }

    pub fn synchronize(hip: &Hip, e: sys::HipEvent) -> Result<()> {
        // SAFETY: `e` is live.
        check(hip, "hipEventSynchronize", unsafe { (hip.api.hipEventSynchronize)(e) })
    }

    pub fn elapsed_ms(hip: &Hip, start: sys::HipEvent, end: sys::HipEvent) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: both events are live and recorded; out-parameter valid.
        check(hip, "hipEventElapsedTime", unsafe { (hip.api.hipEventElapsedTime)(&mut ms, start, end) })?;
        Ok(ms)
    }
}

pub mod module {
    use super::*;

    /// Loads a raw AMDGPU code object (docs/code-objects.md §4.2: an ELF with EM_AMDGPU and OS/ABI
    /// AMDGPU_HSA is loaded directly; its size comes from its own headers).
    pub fn load_data(hip: &Hip, image: &'static [u8]) -> Result<sys::HipModule> {
        if image.len() < 64 || &image[..4] != b"\x7fELF" || u16::from_le_bytes([image[18], image[19]]) != 224 {
            return Err(Error::BadCodeObject { image: "hsaco".into(), reason: "not an AMDGPU ELF image".into() });
        }
        let mut m = std::ptr::null_mut();
        // SAFETY: `image` is a complete code object that lives for the whole program ('static);
        // the caller bound the device the module is for.
        check(hip, "hipModuleLoadData", unsafe {
            (hip.api.hipModuleLoadData)(&mut m, image.as_ptr() as *const c_void)
        })?;
        Ok(m)
    }

    pub fn unload(hip: &Hip, m: sys::HipModule) -> Result<()> {
        // SAFETY: `m` came from `load_data` and is unloaded once, after its last use.
        check(hip, "hipModuleUnload", unsafe { (hip.api.hipModuleUnload)(m) })
    }

    /// The kernel `name` (the runtime resolves `<name>.kd`).
    pub fn get_function(hip: &Hip, m: sys::HipModule, name: &CStr) -> Result<sys::HipFunction> {
        let mut f = std::ptr::null_mut();
        // SAFETY: `m` is a loaded module, `name` NUL-terminated.
        check(hip, "hipModuleGetFunction", unsafe { (hip.api.hipModuleGetFunction)(&mut f, m, name.as_ptr()) })?;
        Ok(f)
    }

    pub fn function_attribute(hip: &Hip, f: sys::HipFunction, attr: i32) -> Result<i32> {
        let mut v = 0;
        // SAFETY: `f` is a function of a loaded module; out-parameter valid.
        check(hip, "hipFuncGetAttribute", unsafe { (hip.api.hipFuncGetAttribute)(&mut v, attr, f) })?;
        Ok(v)
    }
}

/// One kernel launch: `params` holds one pointer per explicit kernel argument, in the order of
/// the code object's `.args`, each to a value of that argument's size.
///
/// # Safety
/// `params` must be as described, and every device address in the argument values must be
/// valid for what the kernel reads and writes with this grid.
#[inline]
#[allow(clippy::too_many_arguments)]
pub unsafe fn launch(
    hip: &Hip,
    f: sys::HipFunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    s: sys::HipStream,
    params: &mut [*mut c_void],
) -> Result<()> {
    // SAFETY: guaranteed by the caller (see above); `extra` is null (arguments via params).
    let status = unsafe {
        (hip.api.hipModuleLaunchKernel)(
            f,
            grid[0],
            grid[1],
            grid[2],
            block[0],
            block[1],
            block[2],
            shared_bytes,
            s,
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    check(hip, "hipModuleLaunchKernel", status)
}

pub mod graph {
    use super::*;
    use crate::device::hip::sys::GraphApi;

    fn api(hip: &Hip) -> Result<&GraphApi> {
        hip.graph.as_ref().map_err(|missing| Error::LibraryMissing {
            tried: missing.iter().map(|s| format!("{}:{s}", hip.path)).collect(),
        })
    }

    pub fn begin_capture(hip: &Hip, s: sys::HipStream) -> Result<()> {
        let g = api(hip)?;
        // SAFETY: `s` is a live stream; thread-local mode only restricts this thread.
        check(hip, "hipStreamBeginCapture", unsafe {
            (g.hipStreamBeginCapture)(s, sys::HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        })
    }

    pub fn end_capture(hip: &Hip, s: sys::HipStream) -> Result<sys::HipGraph> {
        let g = api(hip)?;
        let mut graph = std::ptr::null_mut();
        // SAFETY: `s` is capturing; out-parameter valid.
        check(hip, "hipStreamEndCapture", unsafe { (g.hipStreamEndCapture)(s, &mut graph) })?;
        Ok(graph)
    }

    pub fn instantiate(hip: &Hip, graph: sys::HipGraph) -> Result<sys::HipGraphExec> {
        let g = api(hip)?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: `graph` is live; no error node or log buffer is requested (null, 0).
        check(hip, "hipGraphInstantiate", unsafe {
            (g.hipGraphInstantiate)(&mut exec, graph, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        })?;
        Ok(exec)
    }

    pub fn launch(hip: &Hip, exec: sys::HipGraphExec, s: sys::HipStream) -> Result<()> {
        let g = api(hip)?;
        // SAFETY: both handles are live and of the same device.
        check(hip, "hipGraphLaunch", unsafe { (g.hipGraphLaunch)(exec, s) })
    }

    pub fn exec_destroy(hip: &Hip, exec: sys::HipGraphExec) -> Result<()> {
        let g = api(hip)?;
        // SAFETY: `exec` came from `instantiate` and is destroyed once.
        check(hip, "hipGraphExecDestroy", unsafe { (g.hipGraphExecDestroy)(exec) })
    }

    pub fn destroy(hip: &Hip, graph: sys::HipGraph) -> Result<()> {
        let g = api(hip)?;
        // SAFETY: `graph` came from `end_capture` and is destroyed once.
        check(hip, "hipGraphDestroy", unsafe { (g.hipGraphDestroy)(graph) })
    }
}
