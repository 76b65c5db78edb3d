//! The `#[repr(C)]` types of the ABI: status codes, enumerations (passed as `int32_t` so that an
//! out-of-range value from C is an error, never undefined behaviour), the layer configuration and
//! the tensor descriptor, and the argument blocks of `pre` / `post_pre` / `static_layer`.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// The ABI version of this header and library. A program compiled against one version checks
/// `mhc_abi_version() == MHC_ABI_VERSION` at start-up: the value changes whenever a function's
/// signature or a struct's layout does.
pub const MHC_ABI_VERSION: u32 = 1;

/// What a call returned. `MHC_SUCCESS` is 0; every other value comes with a message from
/// `mhc_last_error()` on the same thread.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_status {
    /// The call did what it says.
    MHC_SUCCESS = 0,
    /// A null handle or pointer, an enumeration value out of range, a negative size, a handle of
    /// another backend, or an output overlapping another argument.
    MHC_ERROR_INVALID_ARGUMENT = 1,
    /// A tensor's rows, row length or row stride does not fit the operation.
    MHC_ERROR_SHAPE = 2,
    /// A tensor's dtype is not the one the plan expects.
    MHC_ERROR_DTYPE = 3,
    /// A pointer or row stride is not aligned as the kernel needs.
    MHC_ERROR_ALIGNMENT = 4,
    /// A configuration value is out of range (n, C, iterations, epsilons, max tokens).
    MHC_ERROR_CONFIG = 5,
    /// No device of that backend or ordinal.
    MHC_ERROR_NO_DEVICE = 6,
    /// The vendor library (libcuda, libamdhip64) or one of its symbols is missing.
    MHC_ERROR_LIBRARY_MISSING = 7,
    /// A driver call failed (the message names it and its code).
    MHC_ERROR_DRIVER = 8,
    /// The device's architecture has no kernels in this build.
    MHC_ERROR_UNSUPPORTED_ARCH = 9,
    /// No kernel variant serves this stage, shape and dtype (the message lists why each was
    /// rejected).
    MHC_ERROR_NO_VARIANT = 10,
    /// A tensor or workspace on another device than the plan's.
    MHC_ERROR_WRONG_DEVICE = 11,
    /// A workspace of another plan, or one already serving another stream.
    MHC_ERROR_WORKSPACE = 12,
    /// A parameter holds NaN or infinity (CPU reference only: the GPU kernels read parameters on
    /// the device and never check them on the host).
    MHC_ERROR_NON_FINITE = 13,
    /// An embedded code object is malformed.
    MHC_ERROR_BAD_CODE_OBJECT = 14,
    /// The operation is not available on this backend in this build.
    MHC_ERROR_UNSUPPORTED = 15,
    /// A defect inside the library (a caught panic); the message says where.
    MHC_ERROR_INTERNAL = 16,
}

/// Where a device's plans run.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_backend {
    /// The float64 reference on host memory: every op runs synchronously on the calling thread
    /// and ignores the stream argument.
    MHC_BACKEND_CPU = 0,
    /// NVIDIA GPUs through libcuda (the primary context of the device, shared with every
    /// framework on it); streams are `CUstream` / `cudaStream_t`.
    MHC_BACKEND_CUDA = 1,
    /// AMD GPUs through libamdhip64; streams are `hipStream_t`.
    MHC_BACKEND_HIP = 2,
}

/// How a CUDA plan's launches overlap the kernel before them on the stream
/// (`mhc_plan_set_overlap`; the HIP and CPU backends have no dependent launch and ignore it).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_overlap {
    /// Plain launches: a kernel starts when the previous one has completed.
    MHC_OVERLAP_OFF = 0,
    /// Programmatic dependent launch (the default): a kernel's CTAs start while the previous
    /// kernel drains and wait for it before touching memory; results are those of plain launches.
    MHC_OVERLAP_LAUNCH = 1,
    /// As `MHC_OVERLAP_LAUNCH`, and the caller promises that no kernel still running when a call
    /// is launched writes the layer's weights (`phi`, `gamma_k`, `scale`, `base`), as in
    /// inference: the persistent-cluster `pre` / `post_pre` kernels then load phi before the
    /// previous kernel has finished. Broken, the promise gives results from stale weights.
    MHC_OVERLAP_WEIGHTS = 2,
}

/// Storage type of a tensor. Activations (`x`, `f`, `a`, `y`, `out`) are stored in the plan's
/// dtype; parameters and coefficients are `MHC_DTYPE_F32` (`MHC_DTYPE_F64` when the plan's
/// dtype is f64, which only the CPU backend takes).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_dtype {
    MHC_DTYPE_F32 = 0,
    MHC_DTYPE_BF16 = 1,
    MHC_DTYPE_F64 = 2,
}

/// Which published mHC formulation a plan computes (docs/math.md, stage 2).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_formulation {
    /// DeepSeek-V4 as shipped: `h_pre = sigmoid + eps`, softmax start, `h_res` applied
    /// transposed in `post`.
    MHC_FORMULATION_DEEPSEEK_V4 = 0,
    /// The mHC paper.
    MHC_FORMULATION_PAPER = 1,
}

/// The stages a plan may serve (`mhc_plan_supports`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mhc_stage {
    MHC_STAGE_PRE = 0,
    MHC_STAGE_POST = 1,
    MHC_STAGE_POST_PRE = 2,
    MHC_STAGE_HEAD = 3,
    MHC_STAGE_EXPAND = 4,
    MHC_STAGE_STATIC = 5,
}

/// A layer's configuration. Fill it with `mhc_config_init` (the DeepSeek-V4 defaults) and change
/// fields after.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_config {
    /// Residual streams (`hc_mult`), 1..=32.
    pub n: u32,
    /// Hidden size C.
    pub c: u32,
    /// An `mhc_formulation` value.
    pub formulation: i32,
    /// Sinkhorn iterations (`sinkhorn_repeat`, `hc_sinkhorn_iters`), >= 1.
    pub sinkhorn_iters: u32,
    /// Epsilon inside the RMS of the mixing logits (`rms_eps`, `norm_eps`).
    pub eps_norm: f64,
    /// Epsilon of the coefficients and of every Sinkhorn denominator (`hc_eps`).
    pub eps_hc: f64,
    /// Epsilon of the optional RMSNorm that begins the sublayer (`gamma_f`).
    pub eps_f: f64,
    /// Nonzero: `pre` multiplies `x` by a weight `gamma_k[n*C]` before the projection.
    pub gamma_k: u8,
    /// Nonzero: `pre` also applies the RMSNorm with weight `gamma_f[C]`, writing `y`.
    pub gamma_f: u8,
}

/// A tensor: `rows` rows of `cols` elements of `dtype`, `row_stride` elements apart
/// (`row_stride >= cols`; the memory holds `(rows - 1) * row_stride + cols` elements). A residual
/// state `[T, n, C]` is `rows = T`, `cols = n * C` (its token stride as `row_stride`); a layer
/// input `[T, C]` is `rows = T`, `cols = C`; parameters and coefficients are dense
/// (`row_stride == cols`) with the rows and columns each op lists. Device pointers for the GPU
/// backends, host pointers for the CPU backend. `data == NULL` marks an absent optional tensor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_tensor {
    pub data: *mut c_void,
    /// An `mhc_dtype` value.
    pub dtype: i32,
    pub rows: i64,
    pub cols: i64,
    pub row_stride: i64,
}

/// The parameters of `pre` (and of the pre half of `post_pre`), all dense f32: `phi` (`hc_fn`)
/// `M x n*C` with `M = n*n + 2n`; `scale` (`hc_scale`) `1 x 3`; `base` (`hc_base`) `1 x M`;
/// `gamma_k` `1 x n*C` and `gamma_f` `1 x C` present exactly when the configuration asks for
/// them (`data == NULL` otherwise).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_pre_params {
    pub phi: mhc_tensor,
    pub scale: mhc_tensor,
    pub base: mhc_tensor,
    pub gamma_k: mhc_tensor,
    pub gamma_f: mhc_tensor,
}

/// Where `pre` writes: `a` (the layer input) `T x C` and `y` `T x C` (present exactly when the
/// configuration has `gamma_f`) in the plan's dtype, strided rows; `h_pre`, `h_post` `T x n`,
/// `h_res` `T x n*n` (`comb[t][j][k]` row-major) and `inv_rms` `T x 1`, dense f32.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_pre_outputs {
    pub a: mhc_tensor,
    pub y: mhc_tensor,
    pub h_pre: mhc_tensor,
    pub h_post: mhc_tensor,
    pub h_res: mhc_tensor,
    pub inv_rms: mhc_tensor,
}

/// Layer l's side of `post_pre`: the sublayer output `f` `T x C` (plan dtype) and layer l's
/// `h_post` `T x n` and `h_res` `T x n*n` (dense f32), as its `pre` wrote them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_post_inputs {
    pub f: mhc_tensor,
    pub h_post: mhc_tensor,
    pub h_res: mhc_tensor,
}

/// The static layer's parameters, dense f32: `h_pre_logits` and `h_post_logits` `1 x n`,
/// `h_res_logits` `n x n`, `gamma` `1 x C`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mhc_static_params {
    pub h_pre_logits: mhc_tensor,
    pub h_post_logits: mhc_tensor,
    pub h_res_logits: mhc_tensor,
    pub gamma: mhc_tensor,
}

impl mhc_tensor {
    /// An absent optional tensor.
    pub const NONE: mhc_tensor = mhc_tensor { data: std::ptr::null_mut(), dtype: 0, rows: 0, cols: 0, row_stride: 0 };

    /// Dense `rows x cols` elements of `dtype` at `data`.
    pub fn dense(data: *mut c_void, dtype: mhc::Dtype, rows: usize, cols: usize) -> Self {
        mhc_tensor { data, dtype: dtype_code(dtype), rows: rows as i64, cols: cols as i64, row_stride: cols as i64 }
    }

    pub fn is_present(&self) -> bool {
        !self.data.is_null()
    }
}

/// The `mhc_dtype` value of a dtype.
pub const fn dtype_code(d: mhc::Dtype) -> i32 {
    match d {
        mhc::Dtype::F32 => mhc_dtype::MHC_DTYPE_F32 as i32,
        mhc::Dtype::Bf16 => mhc_dtype::MHC_DTYPE_BF16 as i32,
        mhc::Dtype::F64 => mhc_dtype::MHC_DTYPE_F64 as i32,
    }
}
