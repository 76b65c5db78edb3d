//! `mhc._native`: the native half of the `mhc` Python package. It exposes the dispatch layer of
//! `mhc-c` ([`mhc_c::api`]) to the Python half, which turns tensors into descriptors:
//!
//! - `Plan(backend, ordinal, n, c, formulation, sinkhorn_iters, eps_norm, eps_hc, eps_f,
//!   gamma_k, gamma_f, dtype, max_tokens, overlap, tuning)` (`tuning`: a table's path or None)
//!   with one method per op taking `(ptr, rows, cols, row_stride)` tuples (or `None` for an
//!   absent optional tensor) and a raw stream, and `workspace()`;
//! - `reference(stage, inputs, ...)`: the float64 reference of any stage on named arrays (f64
//!   bytes), as `mhc run` computes it, for NumPy callers.
//!
//! Errors become the classes of `mhc._errors` (each with the ABI's status name).

#![deny(unsafe_op_in_unsafe_fn)]

use mhc::runner::{Array, CpuRunner, Named, StageRunner};
use mhc::{Config, Dtype, Formulation, Stage};
use mhc_c::api::{self, ApiError, ApiResult};
use mhc_c::types::*;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::ffi::c_void;
use std::sync::Mutex;

/// The Python exception for an error of the dispatch layer: `mhc._errors._make(status, message)`.
fn py_err(py: Python<'_>, e: ApiError) -> PyErr {
    let status = api::status_name(e.status());
    let msg = e.to_string();
    match py.import("mhc._errors").and_then(|m| m.call_method1("_make", (status, msg.clone()))) {
        Ok(exc) => PyErr::from_value(exc),
        Err(_) => PyValueError::new_err(format!("{status}: {msg}")),
    }
}

fn to_py<T>(py: Python<'_>, r: ApiResult<T>) -> PyResult<T> {
    r.map_err(|e| py_err(py, e))
}

/// A tensor argument: `(ptr, rows, cols, row_stride)`.
type TensorArg = (usize, i64, i64, i64);

fn desc(t: Option<TensorArg>, dtype: Dtype) -> mhc_tensor {
    match t {
        Some((ptr, rows, cols, row_stride)) => {
            mhc_tensor { data: ptr as *mut c_void, dtype: dtype_code(dtype), rows, cols, row_stride }
        }
        None => mhc_tensor::NONE,
    }
}

/// A plan's scratch memory for one stream.
#[pyclass(module = "mhc._native", frozen)]
struct Workspace {
    inner: Mutex<api::Workspace>,
}

/// A configuration and dtype bound to a device: every stage's kernels selected and loaded.
#[pyclass(module = "mhc._native", frozen)]
struct Plan {
    inner: api::Plan,
    act: Dtype,
    param: Dtype,
}

impl Plan {
    /// Runs `f` with the workspace (locked for the call).
    fn with_ws<T>(
        &self,
        py: Python<'_>,
        ws: Option<&Workspace>,
        f: impl FnOnce(Option<&api::Workspace>) -> ApiResult<T>,
    ) -> PyResult<T> {
        match ws {
            None => to_py(py, f(None)),
            Some(w) => {
                let guard =
                    w.inner.lock().map_err(|_| PyValueError::new_err("workspace: poisoned by an earlier panic"))?;
                if guard.plan_id() != self.inner.id() {
                    return to_py(py, Err(ApiError::Core(mhc::Error::Workspace("made by another plan".into()))));
                }
                to_py(py, f(Some(&guard)))
            }
        }
    }
}

#[pymethods]
impl Plan {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        backend: i32,
        ordinal: i32,
        n: u32,
        c: u32,
        formulation: i32,
        sinkhorn_iters: u32,
        eps_norm: f64,
        eps_hc: f64,
        eps_f: f64,
        gamma_k: bool,
        gamma_f: bool,
        dtype: i32,
        max_tokens: usize,
        overlap: i32,
        tuning: Option<String>,
    ) -> PyResult<Self> {
        let cfg = mhc_config {
            n,
            c,
            formulation,
            sinkhorn_iters,
            eps_norm,
            eps_hc,
            eps_f,
            gamma_k: gamma_k as u8,
            gamma_f: gamma_f as u8,
        };
        let overlap = to_py(py, api::overlap_of(overlap))?;
        let mut plan =
            to_py(py, api::backend_of(backend).and_then(|b| api::Device::new(b, ordinal))).and_then(|dev| {
                let table = tuning.as_deref().map(std::path::Path::new);
                to_py(py, api::Plan::with_tuning(&dev, &cfg, dtype, max_tokens, table))
            })?;
        plan.set_overlap(overlap);
        let act = plan.dtype();
        Ok(Plan { param: mhc::reference::param_dtype(act), act, inner: plan })
    }

    /// A new workspace (allocates and zeroes device memory once; serves one stream).
    fn workspace(&self, py: Python<'_>) -> PyResult<Workspace> {
        Ok(Workspace { inner: Mutex::new(to_py(py, self.inner.new_workspace())?) })
    }

    fn workspace_bytes(&self) -> usize {
        self.inner.workspace_bytes()
    }

    /// The tuned entries this plan's selection ignored, each with why (an empty list when every
    /// entry that matched applied, and for CPU and HIP plans).
    fn tuning_warnings(&self) -> Vec<String> {
        self.inner.tuning_warnings().lines().map(str::to_string).collect()
    }

    fn max_tokens(&self) -> usize {
        self.inner.max_tokens()
    }

    /// `None` when the plan serves `stage` (an `mhc_stage` value), else the reason.
    fn supports(&self, py: Python<'_>, stage: i32) -> PyResult<Option<String>> {
        let stage = to_py(py, api::stage_of(stage))?;
        Ok(self.inner.supports(stage).err().map(|e| e.to_string()))
    }

    fn __repr__(&self) -> String {
        let c = self.inner.config();
        format!(
            "Plan(backend={:?}, n={}, C={}, {}, dtype={}, max_tokens={})",
            self.inner.backend(),
            c.n,
            c.c,
            c.formulation,
            self.act,
            self.inner.max_tokens()
        )
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ws, stream, x, phi, scale, base, gamma_k, gamma_f, a, y, h_pre, h_post, h_res, inv_rms))]
    fn pre(
        &self,
        py: Python<'_>,
        ws: Option<&Workspace>,
        stream: usize,
        x: TensorArg,
        phi: TensorArg,
        scale: TensorArg,
        base: TensorArg,
        gamma_k: Option<TensorArg>,
        gamma_f: Option<TensorArg>,
        a: TensorArg,
        y: Option<TensorArg>,
        h_pre: TensorArg,
        h_post: TensorArg,
        h_res: TensorArg,
        inv_rms: TensorArg,
    ) -> PyResult<()> {
        let (act, par) = (self.act, self.param);
        let params = pre_params(par, phi, scale, base, gamma_k, gamma_f);
        let out = pre_outs(act, par, a, y, h_pre, h_post, h_res, inv_rms);
        let x = desc(Some(x), act);
        // SAFETY: the Python half passes live tensors of the plan's device with the shapes and
        // strides it read from them; outputs are freshly allocated.
        self.with_ws(py, ws, |ws| unsafe { api::pre(&self.inner, ws, stream as *mut c_void, &x, &params, &out) })
    }

    #[allow(clippy::too_many_arguments)]
    fn post(
        &self,
        py: Python<'_>,
        stream: usize,
        x: TensorArg,
        f: TensorArg,
        h_post: TensorArg,
        h_res: TensorArg,
        out: TensorArg,
    ) -> PyResult<()> {
        let (act, par) = (self.act, self.param);
        let (x, f, o) = (desc(Some(x), act), desc(Some(f), act), desc(Some(out), act));
        let (hp, hr) = (desc(Some(h_post), par), desc(Some(h_res), par));
        // SAFETY: as in `pre`.
        to_py(py, unsafe { api::post(&self.inner, stream as *mut c_void, &x, &f, &hp, &hr, &o) })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ws, stream, x, f, h_post, h_res, x_out, phi, scale, base, gamma_k, gamma_f, a, y, h_pre, h_post_out, h_res_out, inv_rms))]
    fn post_pre(
        &self,
        py: Python<'_>,
        ws: Option<&Workspace>,
        stream: usize,
        x: TensorArg,
        f: TensorArg,
        h_post: TensorArg,
        h_res: TensorArg,
        x_out: TensorArg,
        phi: TensorArg,
        scale: TensorArg,
        base: TensorArg,
        gamma_k: Option<TensorArg>,
        gamma_f: Option<TensorArg>,
        a: TensorArg,
        y: Option<TensorArg>,
        h_pre: TensorArg,
        h_post_out: TensorArg,
        h_res_out: TensorArg,
        inv_rms: TensorArg,
    ) -> PyResult<()> {
        let (act, par) = (self.act, self.param);
        let post =
            mhc_post_inputs { f: desc(Some(f), act), h_post: desc(Some(h_post), par), h_res: desc(Some(h_res), par) };
        let params = pre_params(par, phi, scale, base, gamma_k, gamma_f);
        let out = pre_outs(act, par, a, y, h_pre, h_post_out, h_res_out, inv_rms);
        let (x, xo) = (desc(Some(x), act), desc(Some(x_out), act));
        // SAFETY: as in `pre`.
        self.with_ws(py, ws, |ws| unsafe {
            api::post_pre(&self.inner, ws, stream as *mut c_void, &x, &post, &xo, &params, &out)
        })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ws, stream, x, phi, scale, base, out))]
    fn head(
        &self,
        py: Python<'_>,
        ws: Option<&Workspace>,
        stream: usize,
        x: TensorArg,
        phi: TensorArg,
        scale: TensorArg,
        base: TensorArg,
        out: TensorArg,
    ) -> PyResult<()> {
        let (act, par) = (self.act, self.param);
        let (x, o) = (desc(Some(x), act), desc(Some(out), act));
        let (phi, scale, base) = (desc(Some(phi), par), desc(Some(scale), par), desc(Some(base), par));
        // SAFETY: as in `pre`.
        self.with_ws(py, ws, |ws| unsafe {
            api::head(&self.inner, ws, stream as *mut c_void, &x, &phi, &scale, &base, &o)
        })
    }

    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (ws, stream, x, h_pre_logits, h_post_logits, h_res_logits, gamma, out))]
    fn static_layer(
        &self,
        py: Python<'_>,
        ws: Option<&Workspace>,
        stream: usize,
        x: TensorArg,
        h_pre_logits: TensorArg,
        h_post_logits: TensorArg,
        h_res_logits: TensorArg,
        gamma: TensorArg,
        out: TensorArg,
    ) -> PyResult<()> {
        let (act, par) = (self.act, self.param);
        let (x, o) = (desc(Some(x), act), desc(Some(out), act));
        let p = mhc_static_params {
            h_pre_logits: desc(Some(h_pre_logits), par),
            h_post_logits: desc(Some(h_post_logits), par),
            h_res_logits: desc(Some(h_res_logits), par),
            gamma: desc(Some(gamma), par),
        };
        // SAFETY: as in `pre`.
        self.with_ws(py, ws, |ws| unsafe { api::static_layer(&self.inner, ws, stream as *mut c_void, &x, &p, &o) })
    }

    fn expand(&self, py: Python<'_>, stream: usize, e: TensorArg, out: TensorArg) -> PyResult<()> {
        let (e, o) = (desc(Some(e), self.act), desc(Some(out), self.act));
        // SAFETY: as in `pre`.
        to_py(py, unsafe { api::expand(&self.inner, stream as *mut c_void, &e, &o) })
    }
}

fn pre_params(
    par: Dtype,
    phi: TensorArg,
    scale: TensorArg,
    base: TensorArg,
    gamma_k: Option<TensorArg>,
    gamma_f: Option<TensorArg>,
) -> mhc_pre_params {
    mhc_pre_params {
        phi: desc(Some(phi), par),
        scale: desc(Some(scale), par),
        base: desc(Some(base), par),
        gamma_k: desc(gamma_k, par),
        gamma_f: desc(gamma_f, par),
    }
}

#[allow(clippy::too_many_arguments)]
fn pre_outs(
    act: Dtype,
    par: Dtype,
    a: TensorArg,
    y: Option<TensorArg>,
    h_pre: TensorArg,
    h_post: TensorArg,
    h_res: TensorArg,
    inv_rms: TensorArg,
) -> mhc_pre_outputs {
    mhc_pre_outputs {
        a: desc(Some(a), act),
        y: desc(y, act),
        h_pre: desc(Some(h_pre), par),
        h_post: desc(Some(h_post), par),
        h_res: desc(Some(h_res), par),
        inv_rms: desc(Some(inv_rms), par),
    }
}

/// The float64 reference of `stage` on named arrays: `inputs` maps each name to
/// `(shape, f64 little-endian bytes)`; returns the outputs the same way. `dtype` is the storage
/// the reference emulates (`"f32"`, `"bf16"`, `"f64"`): inputs are rounded to it once, outputs
/// are what it stores.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (stage, inputs, n, c, dtype, formulation, sinkhorn_iters, eps_norm, eps_hc, eps_f))]
fn reference<'py>(
    py: Python<'py>,
    stage: &str,
    inputs: &Bound<'py, PyDict>,
    n: usize,
    c: usize,
    dtype: &str,
    formulation: &str,
    sinkhorn_iters: u32,
    eps_norm: f64,
    eps_hc: f64,
    eps_f: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let core = |e: mhc::Error| py_err(py, ApiError::Core(e));
    let stage: Stage = stage.parse().map_err(core)?;
    let dtype: Dtype = dtype.parse().map_err(core)?;
    let formulation: Formulation = formulation.parse().map_err(core)?;
    let mut cfg = Config::new(n, c).with_formulation(formulation);
    cfg.sinkhorn_iters = sinkhorn_iters;
    cfg.eps_norm = eps_norm;
    cfg.eps_hc = eps_hc;
    cfg.eps_f = eps_f;
    let mut named = Named::new();
    for (k, v) in inputs.iter() {
        let name: String = k.extract()?;
        let (shape, data): (Vec<usize>, Vec<u8>) = v.extract()?;
        if data.len() % 8 != 0 || data.len() / 8 != shape.iter().product::<usize>() {
            return Err(py_err(
                py,
                ApiError::Core(mhc::Error::shape(
                    "inputs",
                    format!("{name}: 8 bytes per element of {shape:?}"),
                    data.len(),
                )),
            ));
        }
        let values = data.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect();
        named.insert(name, Array::new(shape, values));
    }
    let out = py.detach(|| CpuRunner.run(stage, &cfg, dtype, &named)).map_err(core)?;
    let dict = PyDict::new(py);
    for (name, arr) in out {
        let bytes: Vec<u8> = arr.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        dict.set_item(name, (arr.shape, PyBytes::new(py, &bytes)))?;
    }
    Ok(dict)
}

/// Devices of `backend` (an `mhc_backend` value): 1 for the CPU, 0 without the vendor library.
#[pyfunction]
fn device_count(py: Python<'_>, backend: i32) -> PyResult<usize> {
    to_py(py, api::backend_of(backend).and_then(api::device_count))
}

/// The library version.
#[pyfunction]
fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// The C ABI version this extension was built with.
#[pyfunction]
fn abi_version() -> u32 {
    MHC_ABI_VERSION
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add_class::<Workspace>()?;
    m.add_function(wrap_pyfunction!(reference, m)?)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(abi_version, m)?)?;
    Ok(())
}
