//! Raw HIP runtime entry points (`libamdhip64`), opened at run time with `libloading`: the
//! bottom of the sys -> result -> safe layering (docs/architecture.md, "A vendor's part"). Nothing here is
//! needed to build: a machine without ROCm compiles and tests everything else and gets
//! [`Error::LibraryMissing`] from [`hip`].
//!
//! # Symbol resolution
//!
//! The library is opened on the first [`hip`] call (never at process start) and every symbol in
//! [`Api`] is resolved then, once, into a table of function pointers kept for the process. A
//! missing symbol is an `Err` naming every missing one (not a panic, and not a late failure in
//! the middle of a launch sequence). Resolving the ~35 names costs microseconds, once; it buys
//! infallible calls afterwards, so the launch path never looks a symbol up or takes a lock.
//! The graph entry points ([`GraphApi`]) are resolved the same way but are optional: a runtime
//! without them still runs every op, and only stream capture reports what is missing.
//!
//! # ABI assumptions (ROCm 6.x, `hip_runtime_api.h`)
//!
//! - `hipError_t`, `hipDeviceAttribute_t`, `hipFunction_attribute` and
//!   `hipStreamCaptureMode` are C enums passed as `int`; handles are opaque pointers;
//!   `hipDeviceptr_t` is `void*`.
//! - The device-attribute numbers below are those of ROCm >= 6.0 (the CUDA-compatible block
//!   starting at 0, AMD-specific ones at 10000); ROCm 5 numbered them differently, which is why
//!   the library must export `hipGetDevicePropertiesR0600` (ROCm 6's symbol) to be accepted.
//! - `gcnArchName` has no attribute: it is read from `hipDeviceProp_tR0600`, a `char[256]` at
//!   byte [`PROPS_GCN_ARCH_NAME`]; the struct is written into a larger zeroed buffer
//!   ([`PROPS_BUFFER`]) so a runtime with a longer struct cannot overrun it, and the device
//!   layer cross-checks the layout (the `name` field at offset 0 must equal `hipDeviceGetName`).

use crate::error::{Error, Result};
use libloading::Library;
use std::ffi::{c_char, c_float, c_int, c_uint, c_void};
use std::sync::OnceLock;

pub type HipError = c_int;
pub type HipDeviceptr = *mut c_void;
pub type HipStream = *mut c_void;
pub type HipEvent = *mut c_void;
pub type HipModule = *mut c_void;
pub type HipFunction = *mut c_void;
pub type HipGraph = *mut c_void;
pub type HipGraphExec = *mut c_void;

pub const HIP_SUCCESS: HipError = 0;

/// `hipDeviceAttribute_t` values used (ROCm 6 numbering).
pub mod attr {
    use std::ffi::c_int;
    pub const L2_CACHE_SIZE: c_int = 19;
    pub const MAX_THREADS_PER_BLOCK: c_int = 56;
    pub const MULTIPROCESSOR_COUNT: c_int = 63;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: c_int = 74;
    pub const WARP_SIZE: c_int = 87;
}

/// `hipFunction_attribute` values used (same order as CUDA's `CUfunction_attribute`).
pub mod func_attr {
    use std::ffi::c_int;
    pub const MAX_THREADS_PER_BLOCK: c_int = 0;
    pub const SHARED_SIZE_BYTES: c_int = 1;
    pub const LOCAL_SIZE_BYTES: c_int = 3;
    pub const NUM_REGS: c_int = 4;
}

/// `hipStreamNonBlocking`: no implicit synchronisation with the null stream.
pub const HIP_STREAM_NON_BLOCKING: c_uint = 1;
/// `hipStreamCaptureModeThreadLocal`.
pub const HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL: c_int = 1;

/// Byte offset of `gcnArchName` (`char[256]`) in `hipDeviceProp_tR0600`.
pub const PROPS_GCN_ARCH_NAME: usize = 1160;
/// Length of the `name` and `gcnArchName` fields.
pub const PROPS_NAME_LEN: usize = 256;
/// Bytes handed to `hipGetDevicePropertiesR0600` (the ROCm 6 struct is 1472 bytes).
pub const PROPS_BUFFER: usize = 4096;

/// Declares a table of entry points and its resolver; each field is named as its C symbol.
macro_rules! entry_points {
    ($(#[$doc:meta])* $table:ident { $( $name:ident : fn($($arg:ty),*) -> $ret:ty; )* }) => {
        $(#[$doc])*
        #[allow(non_snake_case)]
        pub struct $table {
            $( pub $name: unsafe extern "C" fn($($arg),*) -> $ret, )*
        }

        impl $table {
            /// The C symbol of every entry, in declaration order (tests check error messages
            /// against it).
            #[allow(dead_code)]
            pub const SYMBOLS: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Resolves every entry in `lib`, or names every one that is missing.
            #[allow(non_snake_case)]
            fn resolve(lib: &Library) -> std::result::Result<Self, Vec<String>> {
                let mut missing = Vec::new();
                $(
                    // SAFETY: looking a symbol up only reads the library's symbol table; the
                    // pointer is typed with the C prototype of `hip_runtime_api.h` (ROCm 6) and
                    // is only called through the `result` layer.
                    let $name = match unsafe {
                        lib.get::<unsafe extern "C" fn($($arg),*) -> $ret>(stringify!($name))
                    } {
                        Ok(sym) => Some(*sym),
                        Err(_) => {
                            missing.push(stringify!($name).to_string());
                            None
                        }
                    };
                )*
                Ok($table {
                    $( $name: match $name {
                        Some(f) => f,
                        None => return Err(missing),
                    }, )*
                })
            }
        }
    };
}

entry_points! {
    /// The entry points every device needs.
    Api {
        hipInit: fn(c_uint) -> HipError;
        hipRuntimeGetVersion: fn(*mut c_int) -> HipError;
        hipGetErrorName: fn(HipError) -> *const c_char;
        hipGetDeviceCount: fn(*mut c_int) -> HipError;
        hipGetDevice: fn(*mut c_int) -> HipError;
        hipSetDevice: fn(c_int) -> HipError;
        hipDeviceGetAttribute: fn(*mut c_int, c_int, c_int) -> HipError;
        hipDeviceGetName: fn(*mut c_char, c_int, c_int) -> HipError;
        hipGetDevicePropertiesR0600: fn(*mut c_void, c_int) -> HipError;
        hipDeviceSynchronize: fn() -> HipError;
        hipMalloc: fn(*mut *mut c_void, usize) -> HipError;
        hipFree: fn(*mut c_void) -> HipError;
        hipMemcpyHtoD: fn(HipDeviceptr, *const c_void, usize) -> HipError;
        hipMemcpyDtoH: fn(*mut c_void, HipDeviceptr, usize) -> HipError;
        hipMemcpyDtoDAsync: fn(HipDeviceptr, HipDeviceptr, usize, HipStream) -> HipError;
        hipMemsetD32Async: fn(HipDeviceptr, c_int, usize, HipStream) -> HipError;
        hipMemsetD8: fn(HipDeviceptr, u8, usize) -> HipError;
        hipStreamCreateWithFlags: fn(*mut HipStream, c_uint) -> HipError;
        hipStreamDestroy: fn(HipStream) -> HipError;
        hipStreamSynchronize: fn(HipStream) -> HipError;
        hipEventCreate: fn(*mut HipEvent) -> HipError;
        hipEventDestroy: fn(HipEvent) -> HipError;
        hipEventRecord: fn(HipEvent, HipStream) -> HipError;
        hipEventSynchronize: fn(HipEvent) -> HipError;
        hipEventElapsedTime: fn(*mut c_float, HipEvent, HipEvent) -> HipError;
        hipModuleLoadData: fn(*mut HipModule, *const c_void) -> HipError;
        hipModuleUnload: fn(HipModule) -> HipError;
        hipModuleGetFunction: fn(*mut HipFunction, HipModule, *const c_char) -> HipError;
        hipFuncGetAttribute: fn(*mut c_int, c_int, HipFunction) -> HipError;
        hipModuleLaunchKernel: fn(
            HipFunction, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, HipStream,
            *mut *mut c_void, *mut *mut c_void
        ) -> HipError;
    }
}

entry_points! {
    /// Stream capture and graphs (optional: only [`super::Stream::begin_capture`] needs them).
    GraphApi {
        hipStreamBeginCapture: fn(HipStream, c_int) -> HipError;
        hipStreamEndCapture: fn(HipStream, *mut HipGraph) -> HipError;
        hipGraphInstantiate: fn(*mut HipGraphExec, HipGraph, *mut c_void, *mut c_char, usize) -> HipError;
        hipGraphLaunch: fn(HipGraphExec, HipStream) -> HipError;
        hipGraphExecDestroy: fn(HipGraphExec) -> HipError;
        hipGraphDestroy: fn(HipGraph) -> HipError;
    }
}

/// The opened runtime: the library (kept open for the process) and its resolved entry points.
pub struct Hip {
    /// The candidate that opened.
    pub path: String,
    pub api: Api,
    /// The graph entry points, or the names of those missing.
    pub graph: std::result::Result<GraphApi, Vec<String>>,
    _lib: Library,
}

/// Environment variable naming the one library path to open (tests, unusual installs).
pub const LIBRARY_ENV: &str = "MHC_HIP_LIBRARY";

/// The names and paths tried, in order: `$MHC_HIP_LIBRARY` alone when set; otherwise the
/// loader's search path (`libamdhip64.so`, then the ROCm 7/6/5 sonames; ROCm 5 then fails on its
/// missing `hipGetDevicePropertiesR0600`, which names the problem), then `$ROCM_PATH/lib`
/// and `/opt/rocm/lib`.
pub fn candidates(env_library: Option<&str>, rocm_path: Option<&str>) -> Vec<String> {
    if let Some(p) = env_library.filter(|p| !p.is_empty()) {
        return vec![p.to_string()];
    }
    let mut list: Vec<String> = ["libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for root in rocm_path.filter(|p| !p.is_empty()).into_iter().chain(["/opt/rocm"]) {
        let p = format!("{}/lib/libamdhip64.so", root.trim_end_matches('/'));
        if !list.contains(&p) {
            list.push(p);
        }
    }
    list
}

/// Opens the first loadable candidate and resolves [`Api`]. No candidate loads:
/// [`Error::LibraryMissing`] with every candidate tried; a symbol missing: the same error
/// listing `<library>:<symbol>` for each missing one.
pub fn open(candidates: &[String]) -> Result<Hip> {
    for path in candidates {
        // SAFETY: loading libamdhip64 runs its initialisers, as any HIP program does; nothing
        // of it is called before its symbols are resolved below.
        let Ok(lib) = (unsafe { Library::new(path.as_str()) }) else { continue };
        let api = Api::resolve(&lib).map_err(|missing| Error::LibraryMissing {
            tried: missing.into_iter().map(|s| format!("{path}:{s}")).collect(),
        })?;
        let graph = GraphApi::resolve(&lib);
        return Ok(Hip { path: path.clone(), api, graph, _lib: lib });
    }
    Err(Error::LibraryMissing { tried: candidates.to_vec() })
}

/// The process's HIP runtime, opened and initialised (`hipInit(0)`) on first use; the outcome,
/// success or error, is kept, so a machine without ROCm answers the same error every time.
pub fn hip() -> Result<&'static Hip> {
    static HIP: OnceLock<Result<Hip>> = OnceLock::new();
    HIP.get_or_init(|| {
        let env = std::env::var(LIBRARY_ENV).ok();
        let rocm = std::env::var("ROCM_PATH").ok();
        let hip = open(&candidates(env.as_deref(), rocm.as_deref()))?;
        // SAFETY: hipInit takes a flags word that must be 0; the symbol resolved above.
        let status = unsafe { (hip.api.hipInit)(0) };
        if status != HIP_SUCCESS {
            return Err(Error::Driver { call: "hipInit", code: status as i64, name: None });
        }
        Ok(hip)
    })
    .as_ref()
    .map_err(Clone::clone)
}
