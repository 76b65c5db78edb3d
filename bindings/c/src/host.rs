//! The CPU backend: the float64 reference (`mhc::reference`, f64 arithmetic) on host pointers,
//! with the same descriptors and the same checks as the device ops (activations in the plan's
//! dtype; parameters and coefficients dense f32, f64 for an f64 plan; the same rows and
//! columns), so a program switches backends without changing a call. Every op runs on the
//! calling thread and returns when its outputs are written; a failing call writes nothing.

use crate::api::{dtype_of, ApiError, ApiResult};
use crate::types::*;
use half::bf16;
use mhc::reference::{self, param_dtype};
use mhc::{Config, Dtype, Error, HostData, HostDataMut, HostTensor, HostTensorMut, Layout};

/// A descriptor checked against what the op expects: its layout, dtype and byte range.
struct Desc<'d> {
    t: &'d mhc_tensor,
    what: &'static str,
    dtype: Dtype,
    layout: Layout,
    len: usize,
}

impl Desc<'_> {
    fn bytes(&self) -> (usize, usize) {
        let start = self.t.data as usize;
        (start, start + self.len * self.dtype.size())
    }
}

/// Checks `t` as `rows x cols` of `dtype` (dense when `dense`), its pointer non-null and aligned
/// to its element size whenever it spans elements.
fn desc<'d>(
    t: &'d mhc_tensor,
    what: &'static str,
    dtype: Dtype,
    rows: usize,
    cols: usize,
    dense: bool,
) -> ApiResult<Desc<'d>> {
    let got = dtype_of(t.dtype, what)?;
    if got != dtype {
        return Err(Error::Dtype { tensor: what, expected: dtype, got }.into());
    }
    let dim = |v: i64, name: &str| {
        usize::try_from(v).map_err(|_| ApiError::Core(Error::shape(what, format!("{name} >= 0"), v)))
    };
    let layout = Layout {
        tokens: dim(t.rows, "rows")?,
        row_len: dim(t.cols, "cols")?,
        row_stride: dim(t.row_stride, "row_stride")?,
    };
    let len = layout
        .required_len()
        .ok_or_else(|| ApiError::Core(Error::shape(what, "a layout that fits in memory", "an overflowing stride")))?;
    layout.check(what, rows, cols, len)?;
    if dense && rows > 1 && layout.row_stride != cols {
        return Err(Error::shape(what, format!("dense rows (row_stride {cols})"), layout.row_stride).into());
    }
    if len > 0 {
        if t.data.is_null() {
            return Err(ApiError::Invalid(format!("{what}: NULL data for {rows} x {cols} elements")));
        }
        if (t.data as usize) % dtype.size() != 0 {
            return Err(Error::Alignment { tensor: what, required: dtype.size() }.into());
        }
        if len.checked_mul(dtype.size()).is_none_or(|b| b > isize::MAX as usize) {
            return Err(Error::shape(what, "a buffer that fits in memory", format!("{len} elements")).into());
        }
    }
    Ok(Desc { t, what, dtype, layout, len })
}

/// Outputs overlap neither each other nor an input (the reference reads inputs while it writes).
fn no_overlap(inputs: &[&Desc<'_>], outputs: &[&Desc<'_>]) -> ApiResult<()> {
    for (i, o) in outputs.iter().enumerate() {
        let (a0, a1) = o.bytes();
        if a0 == a1 {
            continue;
        }
        for other in inputs.iter().chain(outputs[i + 1..].iter()) {
            let (b0, b1) = other.bytes();
            if b0 < a1 && a0 < b1 {
                return Err(Error::Overlap { tensor: o.what, other: other.what }.into());
            }
        }
    }
    Ok(())
}

/// The host data behind a checked descriptor.
///
/// # Safety
/// The descriptor's memory is readable host memory of `len` elements that nothing writes while
/// the returned slice lives.
unsafe fn data<'a>(d: &Desc<'_>) -> HostData<'a> {
    if d.len == 0 {
        return match d.dtype {
            Dtype::F32 => HostData::F32(&[]),
            Dtype::Bf16 => HostData::Bf16(&[]),
            Dtype::F64 => HostData::F64(&[]),
        };
    }
    let p = d.t.data as *const u8;
    // SAFETY: non-null and aligned (checked by `desc`), `len` elements readable (the caller's
    // contract); bf16 is a plain 16-bit value like the caller's storage.
    unsafe {
        match d.dtype {
            Dtype::F32 => HostData::F32(std::slice::from_raw_parts(p as *const f32, d.len)),
            Dtype::Bf16 => HostData::Bf16(std::slice::from_raw_parts(p as *const bf16, d.len)),
            Dtype::F64 => HostData::F64(std::slice::from_raw_parts(p as *const f64, d.len)),
        }
    }
}

/// The writable host data behind a checked output descriptor.
///
/// # Safety
/// As [`data`], writable, and no other slice (input or output) overlaps it ([`no_overlap`]).
unsafe fn data_mut<'a>(d: &Desc<'_>) -> HostDataMut<'a> {
    if d.len == 0 {
        return match d.dtype {
            Dtype::F32 => HostDataMut::F32(&mut []),
            Dtype::Bf16 => HostDataMut::Bf16(&mut []),
            Dtype::F64 => HostDataMut::F64(&mut []),
        };
    }
    let p = d.t.data as *mut u8;
    // SAFETY: as `data`, and exclusive (the caller's contract, checked by `no_overlap`).
    unsafe {
        match d.dtype {
            Dtype::F32 => HostDataMut::F32(std::slice::from_raw_parts_mut(p as *mut f32, d.len)),
            Dtype::Bf16 => HostDataMut::Bf16(std::slice::from_raw_parts_mut(p as *mut bf16, d.len)),
            Dtype::F64 => HostDataMut::F64(std::slice::from_raw_parts_mut(p as *mut f64, d.len)),
        }
    }
}

/// # Safety
/// As [`data`].
unsafe fn tensor<'a>(d: &Desc<'_>) -> HostTensor<'a> {
    // SAFETY: the caller's contract.
    HostTensor { data: unsafe { data(d) }, layout: d.layout }
}

/// # Safety
/// As [`data_mut`].
unsafe fn tensor_mut<'a>(d: &Desc<'_>) -> HostTensorMut<'a> {
    // SAFETY: the caller's contract.
    HostTensorMut { data: unsafe { data_mut(d) }, layout: d.layout }
}

/// The token count of `x` (its rows), within the plan's `max_tokens`.
fn tokens(x: &mhc_tensor, what: &'static str, max_tokens: usize) -> ApiResult<usize> {
    let t = usize::try_from(x.rows).map_err(|_| ApiError::Core(Error::shape(what, "rows >= 0", x.rows)))?;
    if t > max_tokens {
        return Err(Error::shape(what, format!("at most {max_tokens} rows (the plan's max_tokens)"), t).into());
    }
    Ok(t)
}

/// The checked parameters of `pre` and their descriptors.
struct PreParamDescs<'d> {
    phi: Desc<'d>,
    scale: Desc<'d>,
    base: Desc<'d>,
    gamma_k: Option<Desc<'d>>,
    gamma_f: Option<Desc<'d>>,
}

fn pre_params<'d>(cfg: &Config, pdt: Dtype, p: &'d mhc_pre_params) -> ApiResult<PreParamDescs<'d>> {
    let (c, k, m) = (cfg.c, cfg.k(), cfg.m());
    let optional = |t: &'d mhc_tensor, what: &'static str, wanted: bool, len: usize| -> ApiResult<Option<Desc<'d>>> {
        match (t.is_present(), wanted) {
            (true, true) => desc(t, what, pdt, 1, len, true).map(Some),
            (false, false) => Ok(None),
            (true, false) => {
                Err(Error::shape(what, "absent (the configuration has no such weight)", "a tensor").into())
            }
            (false, true) => {
                Err(Error::shape(what, format!("1 x {len} (the configuration asks for it)"), "NULL").into())
            }
        }
    };
    Ok(PreParamDescs {
        phi: desc(&p.phi, "phi", pdt, m, k, true)?,
        scale: desc(&p.scale, "scale", pdt, 1, 3, true)?,
        base: desc(&p.base, "base", pdt, 1, m, true)?,
        gamma_k: optional(&p.gamma_k, "gamma_k", cfg.gamma_k, k)?,
        gamma_f: optional(&p.gamma_f, "gamma_f", cfg.gamma_f, c)?,
    })
}

impl PreParamDescs<'_> {
    fn all(&self) -> Vec<&Desc<'_>> {
        let mut v = vec![&self.phi, &self.scale, &self.base];
        v.extend(self.gamma_k.iter());
        v.extend(self.gamma_f.iter());
        v
    }
    /// # Safety
    /// As [`data`].
    unsafe fn views(&self) -> reference::PreParams<'_> {
        // SAFETY: the caller's contract.
        unsafe {
            reference::PreParams {
                phi: data(&self.phi),
                scale: data(&self.scale),
                base: data(&self.base),
                gamma_k: self.gamma_k.as_ref().map(|d| data(d)),
                gamma_f: self.gamma_f.as_ref().map(|d| data(d)),
            }
        }
    }
}

struct PreOutDescs<'d> {
    a: Desc<'d>,
    y: Option<Desc<'d>>,
    h_pre: Desc<'d>,
    h_post: Desc<'d>,
    h_res: Desc<'d>,
    inv_rms: Desc<'d>,
}

fn pre_outs<'d>(cfg: &Config, dt: Dtype, pdt: Dtype, t: usize, o: &'d mhc_pre_outputs) -> ApiResult<PreOutDescs<'d>> {
    let (n, c) = (cfg.n, cfg.c);
    let y = match (o.y.is_present(), cfg.gamma_f) {
        (true, true) => Some(desc(&o.y, "y", dt, t, c, false)?),
        (false, false) => None,
        (true, false) => return Err(Error::shape("y", "absent (the configuration has no gamma_f)", "a tensor").into()),
        (false, true) => {
            return Err(Error::shape("y", format!("{t} x {c} (the configuration has gamma_f)"), "NULL").into())
        }
    };
    Ok(PreOutDescs {
        a: desc(&o.a, "a", dt, t, c, false)?,
        y,
        h_pre: desc(&o.h_pre, "h_pre", pdt, t, n, true)?,
        h_post: desc(&o.h_post, "h_post", pdt, t, n, true)?,
        h_res: desc(&o.h_res, "h_res", pdt, t, n * n, true)?,
        inv_rms: desc(&o.inv_rms, "inv_rms", pdt, t, 1, true)?,
    })
}

impl PreOutDescs<'_> {
    fn all(&self) -> Vec<&Desc<'_>> {
        let mut v = vec![&self.a];
        v.extend(self.y.iter());
        v.extend([&self.h_pre, &self.h_post, &self.h_res, &self.inv_rms]);
        v
    }
    /// # Safety
    /// As [`data_mut`].
    unsafe fn views(&self) -> reference::PreOutputs<'_> {
        // SAFETY: the caller's contract.
        unsafe {
            reference::PreOutputs {
                a: tensor_mut(&self.a),
                y: self.y.as_ref().map(|d| tensor_mut(d)),
                h_pre: tensor_mut(&self.h_pre),
                h_post: tensor_mut(&self.h_post),
                h_res: tensor_mut(&self.h_res),
                inv_rms: tensor_mut(&self.inv_rms),
            }
        }
    }
}

/// # Safety
/// Every present descriptor addresses host memory spanning its rows (readable; writable for
/// outputs), not written by anyone else during the call.
pub unsafe fn pre(
    cfg: &Config,
    dt: Dtype,
    max_tokens: usize,
    x: &mhc_tensor,
    p: &mhc_pre_params,
    o: &mhc_pre_outputs,
) -> ApiResult<()> {
    let (pdt, t) = (param_dtype(dt), tokens(x, "x", max_tokens)?);
    let x = desc(x, "x", dt, t, cfg.k(), false)?;
    let params = pre_params(cfg, pdt, p)?;
    let outs = pre_outs(cfg, dt, pdt, t, o)?;
    let mut inputs = params.all();
    inputs.push(&x);
    no_overlap(&inputs, &outs.all())?;
    // SAFETY: every descriptor checked (dtype, shape, alignment, no overlapping output); the
    // memory is the caller's word.
    unsafe { Ok(reference::pre::<f64>(cfg, &tensor(&x), &params.views(), &mut outs.views())?) }
}

/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn post(
    cfg: &Config,
    dt: Dtype,
    max_tokens: usize,
    x: &mhc_tensor,
    f: &mhc_tensor,
    h_post: &mhc_tensor,
    h_res: &mhc_tensor,
    out: &mhc_tensor,
) -> ApiResult<()> {
    let (pdt, t) = (param_dtype(dt), tokens(x, "x", max_tokens)?);
    let (n, c) = (cfg.n, cfg.c);
    let x = desc(x, "x", dt, t, n * c, false)?;
    let f = desc(f, "f", dt, t, c, false)?;
    let hp = desc(h_post, "h_post", pdt, t, n, true)?;
    let hr = desc(h_res, "h_res", pdt, t, n * n, true)?;
    let o = desc(out, "out", dt, t, n * c, false)?;
    no_overlap(&[&x, &f, &hp, &hr], &[&o])?;
    // SAFETY: as in `pre`.
    unsafe {
        let inp = reference::PostInputs { x: tensor(&x), f: tensor(&f), h_post: tensor(&hp), h_res: tensor(&hr) };
        Ok(reference::post::<f64>(cfg, &inp, &mut tensor_mut(&o))?)
    }
}

/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn post_pre(
    cfg: &Config,
    dt: Dtype,
    max_tokens: usize,
    x: &mhc_tensor,
    post: &mhc_post_inputs,
    x_out: &mhc_tensor,
    p: &mhc_pre_params,
    o: &mhc_pre_outputs,
) -> ApiResult<()> {
    let (pdt, t) = (param_dtype(dt), tokens(x, "x", max_tokens)?);
    let (n, c) = (cfg.n, cfg.c);
    let x = desc(x, "x", dt, t, n * c, false)?;
    let f = desc(&post.f, "f", dt, t, c, false)?;
    let hp = desc(&post.h_post, "h_post", pdt, t, n, true)?;
    let hr = desc(&post.h_res, "h_res", pdt, t, n * n, true)?;
    let xo = desc(x_out, "x_out", dt, t, n * c, false)?;
    let params = pre_params(cfg, pdt, p)?;
    let outs = pre_outs(cfg, dt, pdt, t, o)?;
    let mut inputs = params.all();
    inputs.extend([&x, &f, &hp, &hr]);
    let mut outputs = outs.all();
    outputs.push(&xo);
    no_overlap(&inputs, &outputs)?;
    // SAFETY: as in `pre`.
    unsafe {
        let inp = reference::PostInputs { x: tensor(&x), f: tensor(&f), h_post: tensor(&hp), h_res: tensor(&hr) };
        Ok(reference::post_pre::<f64>(cfg, &inp, &params.views(), &mut tensor_mut(&xo), &mut outs.views())?)
    }
}

/// # Safety
/// As [`pre`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn head(
    cfg: &Config,
    dt: Dtype,
    max_tokens: usize,
    x: &mhc_tensor,
    phi: &mhc_tensor,
    scale: &mhc_tensor,
    base: &mhc_tensor,
    out: &mhc_tensor,
) -> ApiResult<()> {
    let (pdt, t) = (param_dtype(dt), tokens(x, "x", max_tokens)?);
    let (n, c) = (cfg.n, cfg.c);
    let x = desc(x, "x", dt, t, n * c, false)?;
    let phi = desc(phi, "phi", pdt, n, n * c, true)?;
    let scale = desc(scale, "scale", pdt, 1, 1, true)?;
    let base = desc(base, "base", pdt, 1, n, true)?;
    let o = desc(out, "out", dt, t, c, false)?;
    no_overlap(&[&x, &phi, &scale, &base], &[&o])?;
    // SAFETY: as in `pre`.
    unsafe {
        let hp = reference::HeadParams { phi: data(&phi), scale: data(&scale), base: data(&base) };
        Ok(reference::head::<f64>(cfg, &tensor(&x), &hp, &mut tensor_mut(&o))?)
    }
}

/// # Safety
/// As [`pre`].
pub unsafe fn static_layer(
    cfg: &Config,
    dt: Dtype,
    max_tokens: usize,
    x: &mhc_tensor,
    p: &mhc_static_params,
    out: &mhc_tensor,
) -> ApiResult<()> {
    let (pdt, t) = (param_dtype(dt), tokens(x, "x", max_tokens)?);
    let (n, c) = (cfg.n, cfg.c);
    let x = desc(x, "x", dt, t, n * c, false)?;
    let hp = desc(&p.h_pre_logits, "h_pre_logits", pdt, 1, n, true)?;
    let hpo = desc(&p.h_post_logits, "h_post_logits", pdt, 1, n, true)?;
    let hr = desc(&p.h_res_logits, "h_res_logits", pdt, n, n, true)?;
    let g = desc(&p.gamma, "gamma", pdt, 1, c, true)?;
    let o = desc(out, "out", dt, t, n * c, false)?;
    no_overlap(&[&x, &hp, &hpo, &hr, &g], &[&o])?;
    // SAFETY: as in `pre`.
    unsafe {
        let sp = reference::StaticParams {
            h_pre_logits: data(&hp),
            h_post_logits: data(&hpo),
            h_res_logits: data(&hr),
            gamma: data(&g),
        };
        Ok(reference::static_layer::<f64>(cfg, &tensor(&x), &sp, &mut tensor_mut(&o))?)
    }
}

/// # Safety
/// As [`pre`].
pub unsafe fn expand(cfg: &Config, dt: Dtype, max_tokens: usize, e: &mhc_tensor, out: &mhc_tensor) -> ApiResult<()> {
    let t = tokens(e, "e", max_tokens)?;
    let e = desc(e, "e", dt, t, cfg.c, false)?;
    let o = desc(out, "out", dt, t, cfg.k(), false)?;
    no_overlap(&[&e], &[&o])?;
    // SAFETY: as in `pre`.
    unsafe { Ok(reference::expand(cfg, &tensor(&e), &mut tensor_mut(&o))?) }
}
