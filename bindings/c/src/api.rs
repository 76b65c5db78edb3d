//! The dispatch layer under the C ABI and the Python extension: a device, plan and workspace of
//! one of three backends (the CPU reference on host memory, CUDA, HIP), and one function per op
//! taking tensor descriptors ([`mhc_tensor`]) and a raw stream. Every descriptor is turned into
//! the backend's view (device views through `from_raw`, host tensors through slices) and the
//! core op checks it; nothing here allocates or synchronizes on a GPU op's success path.

use crate::host;
use crate::types::*;
use mhc::device::{cuda, hip};
use mhc::{Config, Dtype, Error, Formulation, Layout, Stage};
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// What a call of this layer can fail with: the core's error, or a misuse of the ABI itself.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    Core(Error),
    /// A null handle or pointer, a value out of range, a handle of another backend.
    Invalid(String),
    /// Not available on this backend in this build.
    Unsupported(String),
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiError::Core(e) => write!(f, "{e}"),
            ApiError::Invalid(s) => write!(f, "invalid argument: {s}"),
            ApiError::Unsupported(s) => write!(f, "unsupported: {s}"),
        }
    }
}

impl std::error::Error for ApiError {}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError::Core(e)
    }
}

impl ApiError {
    /// The status code of this error.
    pub fn status(&self) -> mhc_status {
        use mhc_status::*;
        match self {
            ApiError::Invalid(_) => MHC_ERROR_INVALID_ARGUMENT,
            ApiError::Unsupported(_) => MHC_ERROR_UNSUPPORTED,
            ApiError::Core(e) => match e {
                Error::NoDevice(_) => MHC_ERROR_NO_DEVICE,
                Error::LibraryMissing { .. } => MHC_ERROR_LIBRARY_MISSING,
                Error::Driver { .. } => MHC_ERROR_DRIVER,
                Error::UnsupportedArch(_) => MHC_ERROR_UNSUPPORTED_ARCH,
                Error::NoVariant { .. } => MHC_ERROR_NO_VARIANT,
                Error::Shape { .. } => MHC_ERROR_SHAPE,
                Error::Dtype { .. } => MHC_ERROR_DTYPE,
                Error::Alignment { .. } => MHC_ERROR_ALIGNMENT,
                Error::Config { .. } => MHC_ERROR_CONFIG,
                Error::Device { .. } => MHC_ERROR_WRONG_DEVICE,
                Error::Workspace(_) => MHC_ERROR_WORKSPACE,
                Error::NonFinite { .. } => MHC_ERROR_NON_FINITE,
                Error::Overlap { .. } => MHC_ERROR_INVALID_ARGUMENT,
                Error::BadCodeObject { .. } => MHC_ERROR_BAD_CODE_OBJECT,
                _ => MHC_ERROR_INTERNAL,
            },
        }
    }
}

pub type ApiResult<T> = std::result::Result<T, ApiError>;

/// Every status code, in value order.
pub const STATUSES: [mhc_status; 17] = [
    mhc_status::MHC_SUCCESS,
    mhc_status::MHC_ERROR_INVALID_ARGUMENT,
    mhc_status::MHC_ERROR_SHAPE,
    mhc_status::MHC_ERROR_DTYPE,
    mhc_status::MHC_ERROR_ALIGNMENT,
    mhc_status::MHC_ERROR_CONFIG,
    mhc_status::MHC_ERROR_NO_DEVICE,
    mhc_status::MHC_ERROR_LIBRARY_MISSING,
    mhc_status::MHC_ERROR_DRIVER,
    mhc_status::MHC_ERROR_UNSUPPORTED_ARCH,
    mhc_status::MHC_ERROR_NO_VARIANT,
    mhc_status::MHC_ERROR_WRONG_DEVICE,
    mhc_status::MHC_ERROR_WORKSPACE,
    mhc_status::MHC_ERROR_NON_FINITE,
    mhc_status::MHC_ERROR_BAD_CODE_OBJECT,
    mhc_status::MHC_ERROR_UNSUPPORTED,
    mhc_status::MHC_ERROR_INTERNAL,
];

/// The name of a status code (`"MHC_ERROR_SHAPE"`), NUL-terminated.
pub fn status_cname(s: mhc_status) -> &'static std::ffi::CStr {
    use mhc_status::*;
    match s {
        MHC_SUCCESS => c"MHC_SUCCESS",
        MHC_ERROR_INVALID_ARGUMENT => c"MHC_ERROR_INVALID_ARGUMENT",
        MHC_ERROR_SHAPE => c"MHC_ERROR_SHAPE",
        MHC_ERROR_DTYPE => c"MHC_ERROR_DTYPE",
        MHC_ERROR_ALIGNMENT => c"MHC_ERROR_ALIGNMENT",
        MHC_ERROR_CONFIG => c"MHC_ERROR_CONFIG",
        MHC_ERROR_NO_DEVICE => c"MHC_ERROR_NO_DEVICE",
        MHC_ERROR_LIBRARY_MISSING => c"MHC_ERROR_LIBRARY_MISSING",
        MHC_ERROR_DRIVER => c"MHC_ERROR_DRIVER",
        MHC_ERROR_UNSUPPORTED_ARCH => c"MHC_ERROR_UNSUPPORTED_ARCH",
        MHC_ERROR_NO_VARIANT => c"MHC_ERROR_NO_VARIANT",
        MHC_ERROR_WRONG_DEVICE => c"MHC_ERROR_WRONG_DEVICE",
        MHC_ERROR_WORKSPACE => c"MHC_ERROR_WORKSPACE",
        MHC_ERROR_NON_FINITE => c"MHC_ERROR_NON_FINITE",
        MHC_ERROR_BAD_CODE_OBJECT => c"MHC_ERROR_BAD_CODE_OBJECT",
        MHC_ERROR_UNSUPPORTED => c"MHC_ERROR_UNSUPPORTED",
        MHC_ERROR_INTERNAL => c"MHC_ERROR_INTERNAL",
    }
}

/// The name of a status code (`"MHC_ERROR_SHAPE"`).
pub fn status_name(s: mhc_status) -> &'static str {
    status_cname(s).to_str().unwrap_or("MHC_UNKNOWN_STATUS")
}

/// The status of an `int32_t` value, if it is one.
pub fn status_of(code: i32) -> Option<mhc_status> {
    STATUSES.iter().copied().find(|s| *s as i32 == code)
}

/// A backend from its `mhc_backend` value.
pub fn backend_of(code: i32) -> ApiResult<mhc_backend> {
    match code {
        0 => Ok(mhc_backend::MHC_BACKEND_CPU),
        1 => Ok(mhc_backend::MHC_BACKEND_CUDA),
        2 => Ok(mhc_backend::MHC_BACKEND_HIP),
        _ => Err(ApiError::Invalid(format!("backend {code} is not MHC_BACKEND_CPU (0), _CUDA (1) or _HIP (2)"))),
    }
}

/// An overlap mode from its `mhc_overlap` value.
pub fn overlap_of(code: i32) -> ApiResult<cuda::Overlap> {
    match code {
        0 => Ok(cuda::Overlap::Off),
        1 => Ok(cuda::Overlap::Launch),
        2 => Ok(cuda::Overlap::Weights),
        _ => Err(ApiError::Invalid(format!("overlap {code} is not MHC_OVERLAP_OFF (0), _LAUNCH (1) or _WEIGHTS (2)"))),
    }
}

/// A dtype from its `mhc_dtype` value.
pub fn dtype_of(code: i32, what: &str) -> ApiResult<Dtype> {
    match code {
        0 => Ok(Dtype::F32),
        1 => Ok(Dtype::Bf16),
        2 => Ok(Dtype::F64),
        _ => Err(ApiError::Invalid(format!(
            "{what}: dtype {code} is not MHC_DTYPE_F32 (0), MHC_DTYPE_BF16 (1) or MHC_DTYPE_F64 (2)"
        ))),
    }
}

/// A stage from its `mhc_stage` value.
pub fn stage_of(code: i32) -> ApiResult<Stage> {
    Ok(match code {
        0 => Stage::Pre,
        1 => Stage::Post,
        2 => Stage::PostPre,
        3 => Stage::Head,
        4 => Stage::Expand,
        5 => Stage::Static,
        _ => return Err(ApiError::Invalid(format!("stage {code} is not an mhc_stage value (0..=5)"))),
    })
}

/// The DeepSeek-V4 defaults for `n` streams of width `c`.
pub fn default_config(n: u32, c: u32) -> mhc_config {
    let d = Config::new(n as usize, c as usize);
    mhc_config {
        n,
        c,
        formulation: mhc_formulation::MHC_FORMULATION_DEEPSEEK_V4 as i32,
        sinkhorn_iters: d.sinkhorn_iters,
        eps_norm: d.eps_norm,
        eps_hc: d.eps_hc,
        eps_f: d.eps_f,
        gamma_k: 0,
        gamma_f: 0,
    }
}

/// The core configuration of an ABI one, validated.
pub fn config_of(c: &mhc_config) -> ApiResult<Config> {
    let formulation = match c.formulation {
        0 => Formulation::DeepSeekV4,
        1 => Formulation::Paper,
        v => {
            return Err(ApiError::Invalid(format!(
                "formulation {v} is not MHC_FORMULATION_DEEPSEEK_V4 (0) or MHC_FORMULATION_PAPER (1)"
            )))
        }
    };
    let mut cfg = Config::new(c.n as usize, c.c as usize).with_formulation(formulation);
    cfg.sinkhorn_iters = c.sinkhorn_iters;
    cfg.eps_norm = c.eps_norm;
    cfg.eps_hc = c.eps_hc;
    cfg.eps_f = c.eps_f;
    cfg.gamma_k = c.gamma_k != 0;
    cfg.gamma_f = c.gamma_f != 0;
    cfg.validate()?;
    Ok(cfg)
}

/// How many devices `backend` has (1 for the CPU). A machine without the vendor library has 0.
pub fn device_count(backend: mhc_backend) -> ApiResult<usize> {
    match backend {
        mhc_backend::MHC_BACKEND_CPU => Ok(1),
        mhc_backend::MHC_BACKEND_CUDA => match cuda::list_devices() {
            Ok(list) => Ok(list.len()),
            Err(Error::LibraryMissing { .. } | Error::NoDevice(_)) => Ok(0),
            Err(e) => Err(e.into()),
        },
        mhc_backend::MHC_BACKEND_HIP => match hip::device_count() {
            Ok(n) => Ok(n),
            Err(Error::LibraryMissing { .. } | Error::NoDevice(_)) => Ok(0),
            Err(e) => Err(e.into()),
        },
    }
}

enum DeviceKind {
    Cpu,
    Cuda(cuda::CudaDevice),
    Hip(hip::HipDevice),
}

/// One device of a backend. CUDA devices retain the device's primary context, the one PyTorch
/// and every runtime-API program use, so their allocations are valid for our kernels.
pub struct Device {
    kind: DeviceKind,
    ordinal: usize,
}

impl Device {
    pub fn new(backend: mhc_backend, ordinal: i32) -> ApiResult<Device> {
        let ord = usize::try_from(ordinal).map_err(|_| ApiError::Invalid(format!("device ordinal {ordinal} < 0")))?;
        let kind = match backend {
            mhc_backend::MHC_BACKEND_CPU => {
                if ord != 0 {
                    return Err(Error::NoDevice(format!("CPU device {ord} requested, the CPU is device 0")).into());
                }
                DeviceKind::Cpu
            }
            mhc_backend::MHC_BACKEND_CUDA => DeviceKind::Cuda(cuda::CudaDevice::new(ord)?),
            mhc_backend::MHC_BACKEND_HIP => DeviceKind::Hip(hip::HipDevice::new(ord)?),
        };
        Ok(Device { kind, ordinal: ord })
    }

    pub fn backend(&self) -> mhc_backend {
        match self.kind {
            DeviceKind::Cpu => mhc_backend::MHC_BACKEND_CPU,
            DeviceKind::Cuda(_) => mhc_backend::MHC_BACKEND_CUDA,
            DeviceKind::Hip(_) => mhc_backend::MHC_BACKEND_HIP,
        }
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// A one-line description: backend, ordinal, name and architecture.
    pub fn describe(&self) -> String {
        match &self.kind {
            DeviceKind::Cpu => "cpu:0 (float64 reference)".into(),
            DeviceKind::Cuda(d) => format!("{d:?}"),
            DeviceKind::Hip(d) => format!("hip:{} ({}, {})", d.ordinal(), d.name(), d.gcn_arch_name()),
        }
    }
}

// One per plan, itself behind a handle: the size of the CPU variant does not matter.
#[allow(clippy::large_enum_variant)]
enum PlanKind {
    Cpu,
    Cuda(cuda::Plan),
    Hip(Box<hip::Plan>),
}

static NEXT_PLAN: AtomicU64 = AtomicU64::new(1);

/// A configuration and dtype bound to a device, every stage's kernels selected and loaded.
pub struct Plan {
    kind: PlanKind,
    id: u64,
    cfg: Config,
    dtype: Dtype,
    max_tokens: usize,
}

enum WorkspaceKind {
    Cpu,
    Cuda(cuda::Workspace),
    Hip(hip::Workspace),
}

/// A plan's scratch memory; serves one stream.
pub struct Workspace {
    kind: WorkspaceKind,
    plan: u64,
}

impl Workspace {
    /// The id of the plan that made it.
    pub fn plan_id(&self) -> u64 {
        self.plan
    }
}

/// Runs `f` with the calling thread's CUDA stream-capture mode relaxed, as PyTorch's allocator
/// does around `cudaMalloc`: a workspace may then be made while another stream of this thread
/// is being captured (its allocation and zeroing are not captured and stay valid for replays).
fn relaxed_capture<T>(f: impl FnOnce() -> T) -> T {
    use cudarc::driver::sys;
    let mut mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
    // SAFETY: only reached with a CUDA plan, so libcuda is loaded and initialized; the call
    // swaps the thread's mode with the value behind a valid pointer.
    let swapped = unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) } == sys::CUresult::CUDA_SUCCESS;
    let out = f();
    if swapped {
        // SAFETY: as above; restores the caller's mode.
        unsafe { sys::cuThreadExchangeStreamCaptureMode(&mut mode) };
    }
    out
}

impl Plan {
    /// Validates the configuration and selects and loads every stage's kernels (the CPU
    /// backend checks the configuration only). Do this outside stream capture and keep it.
    pub fn new(dev: &Device, cfg: &mhc_config, dtype: i32, max_tokens: usize) -> ApiResult<Plan> {
        Self::with_tuning(dev, cfg, dtype, max_tokens, None)
    }

    /// [`Plan::new`], the CUDA kernels selected with the tuned table in the file `tuning` (one
    /// `mhc tune` wrote for this GPU) instead of the compiled-in tables; `None`: those. A table
    /// steers only a CUDA plan's choice of kernels: for the CPU reference and HIP it is refused.
    /// A file that cannot be read is an error; entries that do not apply are skipped, as
    /// [`mhc::Tuning::from_file`] says.
    pub fn with_tuning(
        dev: &Device,
        cfg: &mhc_config,
        dtype: i32,
        max_tokens: usize,
        tuning: Option<&std::path::Path>,
    ) -> ApiResult<Plan> {
        let config = config_of(cfg)?;
        let dtype = dtype_of(dtype, "plan")?;
        if max_tokens == 0 || max_tokens > i32::MAX as usize {
            return Err(
                Error::Config { what: "max_tokens", reason: format!("must be in 1..2^31, got {max_tokens}") }.into()
            );
        }
        let tuning = match (tuning, &dev.kind) {
            (None, _) => mhc::Tuning::Embedded,
            (Some(path), DeviceKind::Cuda(_)) => mhc::Tuning::from_file(path)?,
            (Some(_), _) => {
                return Err(ApiError::Unsupported(
                    "a tuned table steers the kernel choice of CUDA plans; this device's plans take none".into(),
                ))
            }
        };
        let kind = match &dev.kind {
            DeviceKind::Cpu => PlanKind::Cpu,
            DeviceKind::Cuda(d) => PlanKind::Cuda(cuda::Plan::with_tuning(d, config, dtype, max_tokens, &tuning)?),
            DeviceKind::Hip(d) => PlanKind::Hip(Box::new(hip::Plan::new(d, config, dtype, max_tokens)?)),
        };
        Ok(Plan { kind, id: NEXT_PLAN.fetch_add(1, Ordering::Relaxed), cfg: config, dtype, max_tokens })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }
    pub fn id(&self) -> u64 {
        self.id
    }
    pub fn backend(&self) -> mhc_backend {
        match self.kind {
            PlanKind::Cpu => mhc_backend::MHC_BACKEND_CPU,
            PlanKind::Cuda(_) => mhc_backend::MHC_BACKEND_CUDA,
            PlanKind::Hip(_) => mhc_backend::MHC_BACKEND_HIP,
        }
    }

    /// The tuned entries this plan's selection ignored, each with why (an entry measured on a
    /// part with another SM count, whose kernel changed, or that cannot run here), one a line;
    /// empty when every entry that matched applied, and for the CPU and HIP plans.
    pub fn tuning_warnings(&self) -> String {
        match &self.kind {
            PlanKind::Cuda(p) => p.tuning_warnings().join("\n"),
            PlanKind::Cpu | PlanKind::Hip(_) => String::new(),
        }
    }

    /// How the plan's CUDA launches overlap the kernel before them on the stream (the HIP and
    /// CPU backends have no dependent launch: no effect there).
    pub fn set_overlap(&mut self, overlap: cuda::Overlap) {
        if let PlanKind::Cuda(p) = &mut self.kind {
            p.set_overlap(overlap);
        }
    }

    /// Bytes of device memory a workspace of this plan holds.
    pub fn workspace_bytes(&self) -> usize {
        match &self.kind {
            PlanKind::Cpu => 0,
            PlanKind::Cuda(p) => p.workspace_bytes(),
            PlanKind::Hip(p) => p.workspace_bytes(),
        }
    }

    /// `Ok` when the plan has kernels for `stage` (the CPU reference serves every stage), else
    /// why not.
    pub fn supports(&self, stage: Stage) -> ApiResult<()> {
        match &self.kind {
            PlanKind::Cpu => Ok(()),
            PlanKind::Cuda(p) => Ok(p.supports(stage)?),
            PlanKind::Hip(p) => Ok(p.supports(stage)?),
        }
    }

    /// A new workspace (device memory, zeroed once). Allocates and synchronizes: not for the
    /// launch path. On CUDA it may be called while another stream of the thread is captured.
    pub fn new_workspace(&self) -> ApiResult<Workspace> {
        let kind = match &self.kind {
            PlanKind::Cpu => WorkspaceKind::Cpu,
            PlanKind::Cuda(p) => WorkspaceKind::Cuda(relaxed_capture(|| p.new_workspace())?),
            PlanKind::Hip(p) => WorkspaceKind::Hip(p.new_workspace()?),
        };
        Ok(Workspace { kind, plan: self.id })
    }
}

// ---------------------------------------------------------------------------------------------
// Descriptors to views.

/// The layout and element count of a descriptor.
fn layout(t: &mhc_tensor, what: &'static str) -> ApiResult<(Layout, usize)> {
    let dim = |v: i64, name: &str| {
        usize::try_from(v).map_err(|_| ApiError::Core(Error::shape(what, format!("{name} >= 0"), v)))
    };
    let l = Layout {
        tokens: dim(t.rows, "rows")?,
        row_len: dim(t.cols, "cols")?,
        row_stride: dim(t.row_stride, "row_stride")?,
    };
    let len =
        l.required_len().ok_or_else(|| Error::shape(what, "a layout that fits in memory", "an overflowing stride"))?;
    Ok((l, len))
}

/// A read-only CUDA view of a descriptor.
///
/// # Safety
/// `t.data` must be a device address of the plan's context valid for the elements the
/// descriptor spans, for as long as the launch that reads it may run.
unsafe fn cuda_view<'a>(t: &mhc_tensor, what: &'static str) -> ApiResult<cuda::DeviceTensor<'a>> {
    let (l, len) = layout(t, what)?;
    let dt = dtype_of(t.dtype, what)?;
    // SAFETY: the caller vouches for the memory (this function's contract).
    Ok(unsafe { cuda::DeviceTensor::from_raw(t.data as u64, len, dt, l) })
}

/// A writable CUDA view of a descriptor.
///
/// # Safety
/// As [`cuda_view`], valid for writes, and no other access to the range while the launch runs.
unsafe fn cuda_view_mut<'a>(t: &mhc_tensor, what: &'static str) -> ApiResult<cuda::DeviceTensorMut<'a>> {
    let (l, len) = layout(t, what)?;
    let dt = dtype_of(t.dtype, what)?;
    // SAFETY: the caller vouches for the memory (this function's contract).
    Ok(unsafe { cuda::DeviceTensorMut::from_raw(t.data as u64, len, dt, l) })
}

/// A read-only HIP view of a descriptor.
///
/// # Safety
/// As [`cuda_view`], for the HIP device.
unsafe fn hip_view<'a>(t: &mhc_tensor, what: &'static str) -> ApiResult<hip::DeviceTensor<'a>> {
    let (l, len) = layout(t, what)?;
    let dt = dtype_of(t.dtype, what)?;
    // SAFETY: the caller vouches for the memory (this function's contract).
    Ok(unsafe { hip::DeviceTensor::from_raw(t.data as u64, len, dt, l) })
}

/// A writable HIP view of a descriptor.
///
/// # Safety
/// As [`cuda_view_mut`], for the HIP device.
unsafe fn hip_view_mut<'a>(t: &mhc_tensor, what: &'static str) -> ApiResult<hip::DeviceTensorMut<'a>> {
    let (l, len) = layout(t, what)?;
    let dt = dtype_of(t.dtype, what)?;
    // SAFETY: the caller vouches for the memory (this function's contract).
    Ok(unsafe { hip::DeviceTensorMut::from_raw(t.data as u64, len, dt, l) })
}

fn opt<T>(t: &mhc_tensor, f: impl FnOnce(&mhc_tensor) -> ApiResult<T>) -> ApiResult<Option<T>> {
    if t.is_present() {
        f(t).map(Some)
    } else {
        Ok(None)
    }
}

/// The caller's stream on the plan's CUDA device (borrowed, never destroyed).
///
/// # Safety
/// `raw` is a stream of the device's primary context (null: the legacy default stream).
unsafe fn cuda_stream(p: &cuda::Plan, raw: *mut c_void) -> cuda::Stream {
    // SAFETY: this function's contract.
    unsafe { cuda::Stream::from_raw(p.device(), raw) }
}

/// # Safety
/// `raw` is a `hipStream_t` of the plan's device (or null) that outlives the op's work.
unsafe fn hip_stream(p: &hip::Plan, raw: *mut c_void) -> ApiResult<hip::Stream> {
    // SAFETY: this function's contract.
    Ok(unsafe { hip::Stream::from_raw(p.device(), raw) })
}

fn cuda_ws<'a>(ws: Option<&'a Workspace>, plan: &Plan) -> ApiResult<&'a cuda::Workspace> {
    match ws.map(|w| (&w.kind, w.plan)) {
        Some((WorkspaceKind::Cuda(w), _)) => Ok(w),
        Some(_) => Err(ApiError::Invalid("workspace: not a CUDA workspace".into())),
        None => Err(ApiError::Invalid(format!("workspace: NULL (plan {} needs one)", plan.id))),
    }
}

fn hip_ws<'a>(ws: Option<&'a Workspace>, plan: &Plan) -> ApiResult<&'a hip::Workspace> {
    match ws.map(|w| &w.kind) {
        Some(WorkspaceKind::Hip(w)) => Ok(w),
        Some(_) => Err(ApiError::Invalid("workspace: not a HIP workspace".into())),
        None => Err(ApiError::Invalid(format!("workspace: NULL (plan {} needs one)", plan.id))),
    }
}

fn cpu_ws(ws: Option<&Workspace>, plan: &Plan) -> ApiResult<()> {
    match ws {
        Some(Workspace { kind: WorkspaceKind::Cpu, plan: id }) if *id == plan.id => Ok(()),
        Some(Workspace { kind: WorkspaceKind::Cpu, .. }) => {
            Err(Error::Workspace("made by another plan: use this plan's workspace".into()).into())
        }
        Some(_) => Err(ApiError::Invalid("workspace: not a CPU workspace".into())),
        None => Err(ApiError::Invalid("workspace: NULL (the plan's ops that take one need it)".into())),
    }
}

// ---------------------------------------------------------------------------------------------
// Ops. Each is `unsafe`: the descriptors' pointers and the stream are the caller's word.

/// `pre` (docs/math.md stages 1-3): `x` `T x n*C` (plan dtype, strided rows) into `out`.
///
/// # Safety
/// Every present descriptor addresses memory of the plan's device (host memory for the CPU
/// backend) spanning its rows; outputs overlap nothing else; `stream` is a stream of that
/// device (ignored on the CPU).
pub unsafe fn pre(
    plan: &Plan,
    ws: Option<&Workspace>,
    stream: *mut c_void,
    x: &mhc_tensor,
    params: &mhc_pre_params,
    out: &mhc_pre_outputs,
) -> ApiResult<()> {
    match &plan.kind {
        PlanKind::Cpu => {
            cpu_ws(ws, plan)?;
            // SAFETY: this function's contract.
            unsafe { host::pre(plan.config(), plan.dtype, plan.max_tokens, x, params, out) }
        }
        PlanKind::Cuda(p) => {
            let ws = cuda_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor and the stream.
            unsafe {
                let (x, params, mut o) = (cuda_view(x, "x")?, cuda_params(params)?, cuda_outs(out)?);
                Ok(p.pre(&cuda_stream(p, stream), ws, &x, &params, &mut o)?)
            }
        }
        PlanKind::Hip(p) => {
            let ws = hip_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor.
            unsafe {
                let (x, params, mut o) = (hip_view(x, "x")?, hip_params(params)?, hip_outs(out)?);
                Ok(p.pre(&hip_stream(p, stream)?, ws, &x, &params, &mut o)?)
            }
        }
    }
}

/// `pre`'s parameter and output views of one GPU backend from their descriptors: the CUDA and HIP
/// views are distinct types with the same fields, built the same way.
macro_rules! pre_views {
    ($params:ident, $outs:ident, $backend:ident, $view:ident, $view_mut:ident) => {
        /// # Safety
        /// As [`pre`].
        unsafe fn $params<'a>(p: &mhc_pre_params) -> ApiResult<$backend::PreParamViews<'a>> {
            // SAFETY: the caller's contract.
            unsafe {
                Ok($backend::PreParamViews {
                    phi: $view(&p.phi, "phi")?,
                    scale: $view(&p.scale, "scale")?,
                    base: $view(&p.base, "base")?,
                    gamma_k: opt(&p.gamma_k, |t| $view(t, "gamma_k"))?,
                    gamma_f: opt(&p.gamma_f, |t| $view(t, "gamma_f"))?,
                })
            }
        }

        /// # Safety
        /// As [`pre`].
        unsafe fn $outs<'a>(o: &mhc_pre_outputs) -> ApiResult<$backend::PreOutViews<'a>> {
            // SAFETY: the caller's contract.
            unsafe {
                Ok($backend::PreOutViews {
                    a: $view_mut(&o.a, "a")?,
                    y: opt(&o.y, |t| $view_mut(t, "y"))?,
                    h_pre: $view_mut(&o.h_pre, "h_pre")?,
                    h_post: $view_mut(&o.h_post, "h_post")?,
                    h_res: $view_mut(&o.h_res, "h_res")?,
                    inv_rms: $view_mut(&o.inv_rms, "inv_rms")?,
                })
            }
        }
    };
}

pre_views!(cuda_params, cuda_outs, cuda, cuda_view, cuda_view_mut);
pre_views!(hip_params, hip_outs, hip, hip_view, hip_view_mut);

/// `post` (docs/math.md stage 4): `out = h_post * f + h_res-mix of x`; `x`, `out` `T x n*C`,
/// `f` `T x C` (plan dtype), `h_post` `T x n`, `h_res` `T x n*n` (dense f32).
///
/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn post(
    plan: &Plan,
    stream: *mut c_void,
    x: &mhc_tensor,
    f: &mhc_tensor,
    h_post: &mhc_tensor,
    h_res: &mhc_tensor,
    out: &mhc_tensor,
) -> ApiResult<()> {
    match &plan.kind {
        // SAFETY: this function's contract.
        PlanKind::Cpu => unsafe { host::post(plan.config(), plan.dtype, plan.max_tokens, x, f, h_post, h_res, out) },
        // SAFETY: this function's contract covers every descriptor and the stream.
        PlanKind::Cuda(p) => unsafe {
            let mut o = cuda_view_mut(out, "out")?;
            let (x, f) = (cuda_view(x, "x")?, cuda_view(f, "f")?);
            let (hp, hr) = (cuda_view(h_post, "h_post")?, cuda_view(h_res, "h_res")?);
            Ok(p.post(&cuda_stream(p, stream), &x, &f, &hp, &hr, &mut o)?)
        },
        // SAFETY: this function's contract covers every descriptor.
        PlanKind::Hip(p) => unsafe {
            let mut o = hip_view_mut(out, "out")?;
            let (x, f) = (hip_view(x, "x")?, hip_view(f, "f")?);
            let (hp, hr) = (hip_view(h_post, "h_post")?, hip_view(h_res, "h_res")?);
            Ok(p.post(&hip_stream(p, stream)?, &x, &f, &hp, &hr, &mut o)?)
        },
    }
}

/// `post_pre` (docs/math.md "fused post+pre"): layer l's `post` into `x_out`, then layer l+1's
/// `pre` on it. `x_out` must not overlap `x`.
///
/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn post_pre(
    plan: &Plan,
    ws: Option<&Workspace>,
    stream: *mut c_void,
    x: &mhc_tensor,
    post: &mhc_post_inputs,
    x_out: &mhc_tensor,
    params: &mhc_pre_params,
    out: &mhc_pre_outputs,
) -> ApiResult<()> {
    match &plan.kind {
        PlanKind::Cpu => {
            cpu_ws(ws, plan)?;
            // SAFETY: this function's contract.
            unsafe { host::post_pre(plan.config(), plan.dtype, plan.max_tokens, x, post, x_out, params, out) }
        }
        PlanKind::Cuda(p) => {
            let ws = cuda_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor and the stream.
            unsafe {
                let x = cuda_view(x, "x")?;
                let pin = cuda::PostInViews {
                    f: cuda_view(&post.f, "f")?,
                    h_post: cuda_view(&post.h_post, "h_post")?,
                    h_res: cuda_view(&post.h_res, "h_res")?,
                };
                let mut xo = cuda_view_mut(x_out, "x_out")?;
                let (params, mut o) = (cuda_params(params)?, cuda_outs(out)?);
                Ok(p.post_pre(&cuda_stream(p, stream), ws, &x, &pin, &mut xo, &params, &mut o)?)
            }
        }
        PlanKind::Hip(p) => {
            let ws = hip_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor.
            unsafe {
                let x = hip_view(x, "x")?;
                let pin = hip::PostInViews {
                    f: hip_view(&post.f, "f")?,
                    h_post: hip_view(&post.h_post, "h_post")?,
                    h_res: hip_view(&post.h_res, "h_res")?,
                };
                let mut xo = hip_view_mut(x_out, "x_out")?;
                let (params, mut o) = (hip_params(params)?, hip_outs(out)?);
                Ok(p.post_pre(&hip_stream(p, stream)?, ws, &x, &pin, &mut xo, &params, &mut o)?)
            }
        }
    }
}

/// `head` (docs/math.md "head"): `x` `T x n*C` into `out` `T x C`; `phi` `n x n*C`, `scale`
/// `1 x 1`, `base` `1 x n` dense f32. The workspace is needed on HIP only (may be `None`
/// elsewhere).
///
/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn head(
    plan: &Plan,
    ws: Option<&Workspace>,
    stream: *mut c_void,
    x: &mhc_tensor,
    phi: &mhc_tensor,
    scale: &mhc_tensor,
    base: &mhc_tensor,
    out: &mhc_tensor,
) -> ApiResult<()> {
    match &plan.kind {
        // SAFETY: this function's contract.
        PlanKind::Cpu => unsafe { host::head(plan.config(), plan.dtype, plan.max_tokens, x, phi, scale, base, out) },
        // SAFETY: this function's contract covers every descriptor and the stream.
        PlanKind::Cuda(p) => unsafe {
            let mut o = cuda_view_mut(out, "out")?;
            let (x, phi) = (cuda_view(x, "x")?, cuda_view(phi, "phi")?);
            let (scale, base) = (cuda_view(scale, "scale")?, cuda_view(base, "base")?);
            Ok(p.head(&cuda_stream(p, stream), &x, &phi, &scale, &base, &mut o)?)
        },
        PlanKind::Hip(p) => {
            let ws = hip_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor.
            unsafe {
                let mut o = hip_view_mut(out, "out")?;
                let (x, phi) = (hip_view(x, "x")?, hip_view(phi, "phi")?);
                let (scale, base) = (hip_view(scale, "scale")?, hip_view(base, "base")?);
                Ok(p.head(&hip_stream(p, stream)?, ws, &x, &phi, &scale, &base, &mut o)?)
            }
        }
    }
}

/// The static layer (docs/math.md "static layer"): `x`, `out` `T x n*C`. The workspace is
/// needed on HIP only.
///
/// # Safety
/// As [`pre`].
pub unsafe fn static_layer(
    plan: &Plan,
    ws: Option<&Workspace>,
    stream: *mut c_void,
    x: &mhc_tensor,
    params: &mhc_static_params,
    out: &mhc_tensor,
) -> ApiResult<()> {
    match &plan.kind {
        // SAFETY: this function's contract.
        PlanKind::Cpu => unsafe { host::static_layer(plan.config(), plan.dtype, plan.max_tokens, x, params, out) },
        // SAFETY: this function's contract covers every descriptor and the stream.
        PlanKind::Cuda(p) => unsafe {
            let mut o = cuda_view_mut(out, "out")?;
            let x = cuda_view(x, "x")?;
            let (hp, hpo) =
                (cuda_view(&params.h_pre_logits, "h_pre_logits")?, cuda_view(&params.h_post_logits, "h_post_logits")?);
            let (hr, g) = (cuda_view(&params.h_res_logits, "h_res_logits")?, cuda_view(&params.gamma, "gamma")?);
            Ok(p.static_layer(&cuda_stream(p, stream), &x, &hp, &hpo, &hr, &g, &mut o)?)
        },
        PlanKind::Hip(p) => {
            let ws = hip_ws(ws, plan)?;
            // SAFETY: this function's contract covers every descriptor.
            unsafe {
                let mut o = hip_view_mut(out, "out")?;
                let x = hip_view(x, "x")?;
                let (hp, hpo) = (
                    hip_view(&params.h_pre_logits, "h_pre_logits")?,
                    hip_view(&params.h_post_logits, "h_post_logits")?,
                );
                let (hr, g) = (hip_view(&params.h_res_logits, "h_res_logits")?, hip_view(&params.gamma, "gamma")?);
                Ok(p.static_layer(&hip_stream(p, stream)?, ws, &x, &hp, &hpo, &hr, &g, &mut o)?)
            }
        }
    }
}

/// `expand` (docs/math.md "expand"): `e` `T x C` copied into each of `out`'s n streams
/// (`T x n*C`), plan dtype.
///
/// # Safety
/// As [`pre`].
pub unsafe fn expand(plan: &Plan, stream: *mut c_void, e: &mhc_tensor, out: &mhc_tensor) -> ApiResult<()> {
    match &plan.kind {
        // SAFETY: this function's contract.
        PlanKind::Cpu => unsafe { host::expand(plan.config(), plan.dtype, plan.max_tokens, e, out) },
        // SAFETY: this function's contract covers every descriptor and the stream.
        PlanKind::Cuda(p) => unsafe {
            let mut o = cuda_view_mut(out, "out")?;
            let e = cuda_view(e, "e")?;
            Ok(p.expand(&cuda_stream(p, stream), &e, &mut o)?)
        },
        PlanKind::Hip(p) => {
            // SAFETY: this function's contract covers every descriptor.
            unsafe {
                let mut o = hip_view_mut(out, "out")?;
                let e = hip_view(e, "e")?;
                Ok(p.expand(&hip_stream(p, stream)?, &e, &mut o)?)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_cross_threads() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Device>();
        sync::<Device>();
        send::<Plan>();
        sync::<Plan>();
        send::<Workspace>();
    }

    #[test]
    fn every_core_error_has_its_status() {
        let cases = [
            (Error::NoDevice("x".into()), mhc_status::MHC_ERROR_NO_DEVICE),
            (Error::shape("x", 1, 2), mhc_status::MHC_ERROR_SHAPE),
            (Error::Dtype { tensor: "x", expected: Dtype::F32, got: Dtype::Bf16 }, mhc_status::MHC_ERROR_DTYPE),
            (Error::Alignment { tensor: "x", required: 16 }, mhc_status::MHC_ERROR_ALIGNMENT),
            (Error::Workspace("w".into()), mhc_status::MHC_ERROR_WORKSPACE),
            (Error::NonFinite { tensor: "phi", index: 3 }, mhc_status::MHC_ERROR_NON_FINITE),
            (Error::Overlap { tensor: "out", other: "x" }, mhc_status::MHC_ERROR_INVALID_ARGUMENT),
        ];
        for (e, s) in cases {
            assert_eq!(ApiError::Core(e).status(), s);
        }
        assert_eq!(ApiError::Invalid("x".into()).status(), mhc_status::MHC_ERROR_INVALID_ARGUMENT);
        assert_eq!(status_name(mhc_status::MHC_ERROR_NO_VARIANT), "MHC_ERROR_NO_VARIANT");
    }

    #[test]
    fn a_cpu_plan_checks_its_configuration() {
        let dev = Device::new(mhc_backend::MHC_BACKEND_CPU, 0).unwrap();
        let mut cfg = default_config(4, 64);
        assert!(Plan::new(&dev, &cfg, 0, 16).is_ok());
        cfg.n = 0;
        assert_eq!(Plan::new(&dev, &cfg, 0, 16).err().unwrap().status(), mhc_status::MHC_ERROR_CONFIG);
        let cfg = default_config(4, 64);
        assert_eq!(Plan::new(&dev, &cfg, 7, 16).err().unwrap().status(), mhc_status::MHC_ERROR_INVALID_ARGUMENT);
        assert_eq!(Plan::new(&dev, &cfg, 0, 0).err().unwrap().status(), mhc_status::MHC_ERROR_CONFIG);
        assert!(Device::new(mhc_backend::MHC_BACKEND_CPU, 1).is_err());
    }
}
