//! The exported `extern "C"` functions. Each one runs its body under `catch_unwind` (no panic
//! crosses into C: a caught one is `MHC_ERROR_INTERNAL`), checks every pointer it dereferences,
//! and on failure stores its message for `mhc_last_error()` on the calling thread. The ops'
//! success path allocates nothing and never synchronizes: one or two kernel launches on the
//! caller's stream, capturable into a CUDA graph.

#![allow(non_camel_case_types)]

use crate::api::{self, ApiError, ApiResult, Device, Plan, Workspace};
use crate::types::*;
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// A device of one backend (opaque). Made by `mhc_device_create`, freed by `mhc_device_destroy`.
pub struct mhc_device(Device);

/// A plan (opaque): a configuration and dtype bound to a device, its kernels selected and
/// loaded. Made by `mhc_plan_create` (not capturable: do it before capturing), freed by
/// `mhc_plan_destroy`. Its ops may be called from any thread.
pub struct mhc_plan(Plan);

/// A plan's scratch memory (opaque), zeroed once, left reusable by the kernels. It serves one
/// stream (the first one it is used on) and one thread at a time: make one per stream.
pub struct mhc_workspace(Workspace);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: String) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// Runs `body`; maps its error or panic to a status and the thread's last error.
fn guard(body: impl FnOnce() -> ApiResult<()>) -> mhc_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => mhc_status::MHC_SUCCESS,
        Ok(Err(e)) => {
            let s = e.status();
            set_last_error(e.to_string());
            s
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            set_last_error(format!("internal error (caught panic): {what}"));
            mhc_status::MHC_ERROR_INTERNAL
        }
    }
}

/// `p` as a reference, or an error naming `what`.
///
/// # Safety
/// A non-null `p` points to a valid `T` for `'a`.
unsafe fn arg<'a, T>(p: *const T, what: &str) -> ApiResult<&'a T> {
    // SAFETY: the caller's contract for non-null pointers.
    unsafe { p.as_ref() }.ok_or_else(|| ApiError::Invalid(format!("{what}: NULL")))
}

/// # Safety
/// A non-null `p` points to a valid `T` for `'a`, written by nothing else meanwhile.
unsafe fn out_arg<'a, T>(p: *mut T, what: &str) -> ApiResult<&'a mut T> {
    // SAFETY: the caller's contract for non-null pointers.
    unsafe { p.as_mut() }.ok_or_else(|| ApiError::Invalid(format!("{what}: NULL")))
}

/// The library's version, `"MAJOR.MINOR.PATCH"` (static storage).
#[no_mangle]
pub extern "C" fn mhc_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr() as *const c_char
}

/// The ABI version of the library; compare with `MHC_ABI_VERSION` from the header.
#[no_mangle]
pub extern "C" fn mhc_abi_version() -> u32 {
    MHC_ABI_VERSION
}

/// The message of the last call on this thread that failed (an empty string if none did). Valid
/// until the next failing call on this thread; copy it to keep it.
#[no_mangle]
pub extern "C" fn mhc_last_error() -> *const c_char {
    catch_unwind(|| LAST_ERROR.with(|e| e.borrow().as_ptr())).unwrap_or(c"".as_ptr())
}

/// The name of a status code (`"MHC_ERROR_SHAPE"`), or `"MHC_UNKNOWN_STATUS"` (static storage).
#[no_mangle]
pub extern "C" fn mhc_status_string(status: i32) -> *const c_char {
    api::status_of(status).map_or(c"MHC_UNKNOWN_STATUS", api::status_cname).as_ptr()
}

/// Fills `*config` with the DeepSeek-V4 defaults for `n` streams of width `c`: V4 formulation,
/// 20 Sinkhorn iterations, every epsilon 1e-6, no optional weights.
///
/// # Safety
/// `config` is NULL or points to writable `mhc_config` storage.
#[no_mangle]
pub unsafe extern "C" fn mhc_config_init(config: *mut mhc_config, n: u32, c: u32) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        *unsafe { out_arg(config, "config") }? = api::default_config(n, c);
        Ok(())
    })
}

/// Writes how many devices `backend` (an `mhc_backend` value) has to `*count`: 1 for the CPU,
/// 0 when the vendor library or device is missing.
///
/// # Safety
/// `count` is NULL or points to a writable `int32_t`.
#[no_mangle]
pub unsafe extern "C" fn mhc_device_count(backend: i32, count: *mut i32) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let out = unsafe { out_arg(count, "count") }?;
        *out = 0;
        *out = api::device_count(api::backend_of(backend)?)?.min(i32::MAX as usize) as i32;
        Ok(())
    })
}

/// Opens device `ordinal` of `backend` and writes its handle to `*device`. CUDA retains the
/// device's primary context (the one PyTorch and the CUDA runtime use). Errors:
/// `MHC_ERROR_LIBRARY_MISSING`, `MHC_ERROR_NO_DEVICE`, `MHC_ERROR_UNSUPPORTED_ARCH`.
///
/// # Safety
/// `device` is NULL or points to writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn mhc_device_create(backend: i32, ordinal: i32, device: *mut *mut mhc_device) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let out = unsafe { out_arg(device, "device") }?;
        *out = std::ptr::null_mut();
        let d = Device::new(api::backend_of(backend)?, ordinal)?;
        *out = Box::into_raw(Box::new(mhc_device(d)));
        Ok(())
    })
}

/// Writes a one-line description of the device (backend, ordinal, name, architecture) into
/// `buf` (`len` bytes, always NUL-terminated when `len > 0`, truncated to fit).
///
/// # Safety
/// `device` is NULL or a live handle; `buf` is NULL or `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn mhc_device_describe(device: *const mhc_device, buf: *mut c_char, len: usize) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let d = unsafe { arg(device, "device") }?;
        if buf.is_null() || len == 0 {
            return Err(ApiError::Invalid("buf: NULL or empty".into()));
        }
        let text = d.0.describe();
        let n = text.len().min(len - 1);
        // SAFETY: `buf` holds `len` bytes (this function's contract) and n < len.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
        Ok(())
    })
}

/// Frees a device handle (NULL is ignored). Plans and workspaces made from it stay valid: each
/// keeps what it needs of the device.
///
/// # Safety
/// `device` is NULL or a handle from `mhc_device_create` not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn mhc_device_destroy(device: *mut mhc_device) {
    if !device.is_null() {
        // SAFETY: this function's contract: the box was made by `mhc_device_create`.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(device) })));
    }
}

/// Makes a plan for `config` on `device` with activations stored as `dtype` (an `mhc_dtype`;
/// GPUs take bf16 or f32, the CPU also f64) for up to `max_tokens` tokens per call: validates
/// the configuration, selects every stage's kernel per token range and loads it. Loads code,
/// allocates nothing per call: do it once, before any graph capture, and keep it.
///
/// # Safety
/// `device` and `config` are NULL or valid; `plan` is NULL or writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_create(
    device: *const mhc_device,
    config: *const mhc_config,
    dtype: i32,
    max_tokens: usize,
    plan: *mut *mut mhc_plan,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let out = unsafe { out_arg(plan, "plan") }?;
        *out = std::ptr::null_mut();
        // SAFETY: this function's contract.
        let (d, cfg) = unsafe { (arg(device, "device")?, arg(config, "config")?) };
        let p = Plan::new(&d.0, cfg, dtype, max_tokens)?;
        *out = Box::into_raw(Box::new(mhc_plan(p)));
        Ok(())
    })
}

/// [`mhc_plan_create`], the CUDA kernels selected with the tuned table in the file at `tuning`
/// (a NUL-terminated path: a table `mhc tune` wrote for this GPU, asm/tuning/README.md) instead
/// of the tables compiled into the library; NULL: those, as `mhc_plan_create`. A table steers
/// only a CUDA plan's choice of kernels: on the CPU and HIP it is `MHC_ERROR_UNSUPPORTED`. A
/// file that cannot be read is `MHC_ERROR_CONFIG`; entries that do not apply to this GPU
/// or whose kernels changed are skipped.
///
/// # Safety
/// As `mhc_plan_create`; `tuning` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_create_tuned(
    device: *const mhc_device,
    config: *const mhc_config,
    dtype: i32,
    max_tokens: usize,
    tuning: *const c_char,
    plan: *mut *mut mhc_plan,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let out = unsafe { out_arg(plan, "plan") }?;
        *out = std::ptr::null_mut();
        // SAFETY: this function's contract.
        let (d, cfg) = unsafe { (arg(device, "device")?, arg(config, "config")?) };
        let path = (!tuning.is_null()).then(|| {
            use std::os::unix::ffi::OsStrExt;
            // SAFETY: this function's contract: a NUL-terminated string.
            let bytes = unsafe { std::ffi::CStr::from_ptr(tuning) }.to_bytes();
            std::path::PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
        });
        let p = Plan::with_tuning(&d.0, cfg, dtype, max_tokens, path.as_deref())?;
        *out = Box::into_raw(Box::new(mhc_plan(p)));
        Ok(())
    })
}

/// Frees a plan (NULL is ignored). No op of the plan may be running or enqueued-and-unfinished
/// on a stream when it is freed.
///
/// # Safety
/// `plan` is NULL or a handle from `mhc_plan_create` not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_destroy(plan: *mut mhc_plan) {
    if !plan.is_null() {
        // SAFETY: this function's contract: the box was made by `mhc_plan_create`.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(plan) })));
    }
}

/// Writes the device bytes one workspace of `plan` holds to `*bytes` (0 on the CPU).
///
/// # Safety
/// `plan` is NULL or a live handle; `bytes` is NULL or a writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_workspace_bytes(plan: *const mhc_plan, bytes: *mut usize) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let (p, out) = unsafe { (arg(plan, "plan")?, out_arg(bytes, "bytes")?) };
        *out = p.0.workspace_bytes();
        Ok(())
    })
}

/// `MHC_SUCCESS` when `plan` has kernels for `stage` (an `mhc_stage`) at some token count,
/// else the reason (`MHC_ERROR_NO_VARIANT` with every rejected variant in the message,
/// `MHC_ERROR_UNSUPPORTED`). The CPU reference serves every stage.
///
/// # Safety
/// `plan` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_supports(plan: *const mhc_plan, stage: i32) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let p = unsafe { arg(plan, "plan") }?;
        p.0.supports(api::stage_of(stage)?)
    })
}

/// The tuned entries `plan`'s selection ignored, each with why (measured on a part with another
/// SM count, a kernel changed since, not runnable here), one a line, as a NUL-terminated string
/// in `buf` (truncated to `len - 1` bytes; `buf` may be NULL when `len` is 0); `*needed` gets the
/// bytes the whole text needs with its NUL. Empty when every entry that matched applied, and for
/// CPU and HIP plans. A plan made with a table (`mhc_plan_create_tuned`) whose entries went stale
/// runs the cost model's choice for their keys: this says which and why.
///
/// # Safety
/// `plan` is NULL or a live handle; `buf` is NULL or `len` writable bytes; `needed` is NULL or a
/// writable `size_t`.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_tuning_warnings(
    plan: *const mhc_plan,
    buf: *mut c_char,
    len: usize,
    needed: *mut usize,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let (p, needed) = unsafe { (arg(plan, "plan")?, out_arg(needed, "needed")?) };
        if buf.is_null() && len > 0 {
            return Err(ApiError::Invalid(format!("buf: NULL with len {len}")));
        }
        let text = p.0.tuning_warnings();
        *needed = text.len() + 1;
        if len > 0 {
            let n = text.len().min(len - 1);
            // SAFETY: `buf` holds `len` bytes (this function's contract) and n < len.
            unsafe {
                std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
                *buf.add(n) = 0;
            }
        }
        Ok(())
    })
}

/// Sets how `plan`'s launches overlap the kernel before them on the stream (an `mhc_overlap`;
/// `MHC_OVERLAP_LAUNCH` unless set). CUDA plans only: the HIP and CPU backends accept the value
/// and have no dependent launch. Not while another thread enqueues a call of the plan.
///
/// # Safety
/// `plan` is NULL or a live handle no other thread is using.
#[no_mangle]
pub unsafe extern "C" fn mhc_plan_set_overlap(plan: *mut mhc_plan, overlap: i32) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let p = unsafe { out_arg(plan, "plan") }?;
        p.0.set_overlap(api::overlap_of(overlap)?);
        Ok(())
    })
}

/// Makes a workspace for `plan` (device memory, zeroed once; allocates and synchronizes, so do
/// it outside the launch path). On CUDA this may be called while another stream of the thread
/// is being captured. A workspace serves one stream: make one per stream.
///
/// # Safety
/// `plan` is NULL or a live handle; `workspace` is NULL or writable storage for a handle.
#[no_mangle]
pub unsafe extern "C" fn mhc_workspace_create(plan: *const mhc_plan, workspace: *mut *mut mhc_workspace) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        let out = unsafe { out_arg(workspace, "workspace") }?;
        *out = std::ptr::null_mut();
        // SAFETY: this function's contract.
        let p = unsafe { arg(plan, "plan") }?;
        *out = Box::into_raw(Box::new(mhc_workspace(p.0.new_workspace()?)));
        Ok(())
    })
}

/// Frees a workspace (NULL is ignored). No op using it may be unfinished on its stream.
///
/// # Safety
/// `workspace` is NULL or a handle from `mhc_workspace_create` not yet destroyed.
#[no_mangle]
pub unsafe extern "C" fn mhc_workspace_destroy(workspace: *mut mhc_workspace) {
    if !workspace.is_null() {
        // SAFETY: this function's contract: the box was made by `mhc_workspace_create`.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(workspace) })));
    }
}

/// # Safety
/// A non-null `ws` is a live handle used by this thread only.
unsafe fn ws_arg<'a>(ws: *const mhc_workspace) -> Option<&'a Workspace> {
    // SAFETY: the caller's contract.
    unsafe { ws.as_ref() }.map(|w| &w.0)
}

/// Enqueues `pre` (docs/math.md stages 1-3) on `stream`: `x` (`hc_residual [T, n, C]`, rows
/// `T`, cols `n*C`, plan dtype, strided rows) and `params` (`hc_fn`, `hc_scale`, `hc_base`) into
/// `out` (`a` = the layer input, `h_post` = post mix, `h_res` = comb mix `[T, n, n]`, `h_pre`,
/// `inv_rms`). `workspace` is this plan's, used on this stream only. Checks everything before
/// launching; on error nothing is enqueued. CUDA: one launch (no allocation, no sync,
/// capturable). CPU: computes before returning; `stream` is ignored.
///
/// # Safety
/// Handles are live; every present tensor addresses memory of the plan's device (host memory
/// for the CPU) spanning its rows; outputs overlap nothing else; `stream` is NULL or a stream of
/// the device's primary context.
#[no_mangle]
pub unsafe extern "C" fn mhc_pre(
    plan: *const mhc_plan,
    workspace: *const mhc_workspace,
    stream: *mut c_void,
    x: *const mhc_tensor,
    params: *const mhc_pre_params,
    out: *const mhc_pre_outputs,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let (p, x, params, out) = (arg(plan, "plan")?, arg(x, "x")?, arg(params, "params")?, arg(out, "out")?);
            api::pre(&p.0, ws_arg(workspace), stream, x, params, out)
        }
    })
}

/// Enqueues `post` (docs/math.md stage 4) on `stream`: `out = h_post * f + h_res-mix of x`;
/// `x`, `out` rows `T`, cols `n*C`; `f` rows `T`, cols `C` (plan dtype, strided rows); `h_post`
/// `T x n`, `h_res` `T x n*n` (dense f32). `out` must not overlap the inputs.
///
/// # Safety
/// As `mhc_pre`.
#[no_mangle]
pub unsafe extern "C" fn mhc_post(
    plan: *const mhc_plan,
    stream: *mut c_void,
    x: *const mhc_tensor,
    f: *const mhc_tensor,
    h_post: *const mhc_tensor,
    h_res: *const mhc_tensor,
    out: *const mhc_tensor,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let p = arg(plan, "plan")?;
            let (x, f, hp, hr, o) =
                (arg(x, "x")?, arg(f, "f")?, arg(h_post, "h_post")?, arg(h_res, "h_res")?, arg(out, "out")?);
            api::post(&p.0, stream, x, f, hp, hr, o)
        }
    })
}

/// Enqueues the layer boundary on `stream`: layer l's `post` (`x`, `post`: its sublayer output
/// and coefficients) into `x_out`, then layer l+1's `pre` (`params`) on `x_out` into `out`. One
/// fused pass where the plan has one, else two launches (checked before the first). `x_out`
/// must not overlap `x`.
///
/// # Safety
/// As `mhc_pre`.
#[no_mangle]
pub unsafe extern "C" fn mhc_post_pre(
    plan: *const mhc_plan,
    workspace: *const mhc_workspace,
    stream: *mut c_void,
    x: *const mhc_tensor,
    post: *const mhc_post_inputs,
    x_out: *const mhc_tensor,
    params: *const mhc_pre_params,
    out: *const mhc_pre_outputs,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let p = arg(plan, "plan")?;
            let (x, post, xo) = (arg(x, "x")?, arg(post, "post")?, arg(x_out, "x_out")?);
            let (params, out) = (arg(params, "params")?, arg(out, "out")?);
            api::post_pre(&p.0, ws_arg(workspace), stream, x, post, xo, params, out)
        }
    })
}

/// Enqueues `head` (the final stream collapse, DeepSeek-V4 `hc_head`) on `stream`: `x` rows
/// `T`, cols `n*C` into `out` rows `T`, cols `C`; `phi` `n x n*C`, `scale` `1 x 1`, `base`
/// `1 x n` (dense f32). `workspace` may be NULL except on HIP.
///
/// # Safety
/// As `mhc_pre`.
#[no_mangle]
pub unsafe extern "C" fn mhc_head(
    plan: *const mhc_plan,
    workspace: *const mhc_workspace,
    stream: *mut c_void,
    x: *const mhc_tensor,
    phi: *const mhc_tensor,
    scale: *const mhc_tensor,
    base: *const mhc_tensor,
    out: *const mhc_tensor,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let p = arg(plan, "plan")?;
            let (x, phi, s, b, o) =
                (arg(x, "x")?, arg(phi, "phi")?, arg(scale, "scale")?, arg(base, "base")?, arg(out, "out")?);
            api::head(&p.0, ws_arg(workspace), stream, x, phi, s, b, o)
        }
    })
}

/// Enqueues the static layer (mHC.cu parity: coefficients from per-layer logits, RMSNorm with
/// `gamma` as the sublayer) on `stream`: `x`, `out` rows `T`, cols `n*C`. `workspace` may be
/// NULL except on HIP.
///
/// # Safety
/// As `mhc_pre`.
#[no_mangle]
pub unsafe extern "C" fn mhc_static_layer(
    plan: *const mhc_plan,
    workspace: *const mhc_workspace,
    stream: *mut c_void,
    x: *const mhc_tensor,
    params: *const mhc_static_params,
    out: *const mhc_tensor,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let p = arg(plan, "plan")?;
            let (x, params, o) = (arg(x, "x")?, arg(params, "params")?, arg(out, "out")?);
            api::static_layer(&p.0, ws_arg(workspace), stream, x, params, o)
        }
    })
}

/// Enqueues `expand` (the first layer's residual from the embedding) on `stream`: `e` rows `T`,
/// cols `C` copied into each of the n streams of `out` (rows `T`, cols `n*C`).
///
/// # Safety
/// As `mhc_pre`.
#[no_mangle]
pub unsafe extern "C" fn mhc_expand(
    plan: *const mhc_plan,
    stream: *mut c_void,
    e: *const mhc_tensor,
    out: *const mhc_tensor,
) -> mhc_status {
    guard(|| {
        // SAFETY: this function's contract.
        unsafe {
            let p = arg(plan, "plan")?;
            api::expand(&p.0, stream, arg(e, "e")?, arg(out, "out")?)
        }
    })
}
