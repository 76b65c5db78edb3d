//! `head` (docs/math.md, DeepSeek-V4 `hc_head`): the final collapse of the n streams into one row,
//! with sigmoid weights from the same RMS-scaled projection as `pre` (M = n, one scale, no
//! Sinkhorn), and its backward. The formulation switch does not apply: both use `+ eps_hc`.

use super::check;
use super::pre::{inv_rms, Mixing, PreAcc};
use super::real::{dot, sigmoid, Real};
use crate::config::{Config, Dtype};
use crate::error::Result;
use crate::tensor::{HostData, HostDataMut, HostTensor, HostTensorMut};

/// The parameters of `head`: `phi[n, n*C]` row-major, `scale[1]`, `base[n]`.
#[derive(Debug, Clone, Copy)]
pub struct HeadParams<'a> {
    pub phi: HostData<'a>,
    pub scale: HostData<'a>,
    pub base: HostData<'a>,
}

/// Where `head-backward` writes: `dx` (T rows of n*C) and the parameter gradients.
#[derive(Debug)]
pub struct HeadGrads<'a> {
    pub dx: HostTensorMut<'a>,
    pub dphi: HostDataMut<'a>,
    pub dscale: HostDataMut<'a>,
    pub dbase: HostDataMut<'a>,
}

struct HeadModel<R> {
    n: usize,
    c: usize,
    eps_norm: R,
    eps_hc: R,
    phi: Vec<R>,
    scale: Vec<R>,
    base: Vec<R>,
}

/// One token's forward.
struct HeadState<R> {
    inv_rms: R,
    g: Vec<R>,
    z: Vec<R>,
    h: Vec<R>,
    out: Vec<R>,
}

impl<R: Real> HeadModel<R> {
    fn new(cfg: &Config, x: &HostTensor<'_>, p: &HeadParams<'_>) -> Result<(Self, usize, Dtype)> {
        cfg.validate()?;
        let (n, c, k) = (cfg.n, cfg.c, cfg.k());
        let t = x.layout.tokens;
        let act = x.data.dtype();
        let pdt = check::param_dtype(act);
        check::input("x", x, t, k, act)?;
        let phi = check::param("phi", &p.phi, n * k, &format!("[n={n}, n*C={k}]"), pdt)?;
        let scale = check::param("scale", &p.scale, 1, "[1]", pdt)?;
        let base = check::param("base", &p.base, n, &format!("[n={n}]"), pdt)?;
        let model =
            HeadModel { n, c, eps_norm: R::from_f64(cfg.eps_norm), eps_hc: R::from_f64(cfg.eps_hc), phi, scale, base };
        Ok((model, t, act))
    }

    fn mixing(&self) -> Mixing<'_, R> {
        Mixing { n: self.n, phi: &self.phi, scale: &self.scale, gamma_k: None }
    }

    fn state(&self) -> HeadState<R> {
        let n = self.n;
        HeadState {
            inv_rms: R::ZERO,
            g: vec![R::ZERO; n],
            z: vec![R::ZERO; n],
            h: vec![R::ZERO; n],
            out: vec![R::ZERO; self.c],
        }
    }

    fn forward(&self, v: &[R], st: &mut HeadState<R>) {
        let (n, c) = (self.n, self.c);
        st.inv_rms = inv_rms(v, self.eps_norm);
        self.mixing().forward(v, st.inv_rms, &self.base, &mut st.g, &mut st.z);
        for i in 0..n {
            st.h[i] = sigmoid(st.z[i]) + self.eps_hc;
        }
        for ch in 0..c {
            let mut acc = R::ZERO;
            for i in 0..n {
                acc += st.h[i] * v[i * c + ch];
            }
            st.out[ch] = acc;
        }
    }
}

/// `head` for every token of `x` (T rows of n*C): `out` is T rows of C (activation dtype).
pub fn head<R: Real>(cfg: &Config, x: &HostTensor<'_>, p: &HeadParams<'_>, out: &mut HostTensorMut<'_>) -> Result<()> {
    let (model, t, act) = HeadModel::<R>::new(cfg, x, p)?;
    check::output("out", out, t, cfg.c, act)?;
    let mut v = vec![R::ZERO; cfg.k()];
    let mut st = model.state();
    for ti in 0..t {
        check::read_row(x, ti, &mut v);
        model.forward(&v, &mut st);
        check::write_row(out, ti, &st.out);
    }
    Ok(())
}

/// The backward of [`head`] for upstream `dout` (T rows of C).
pub fn head_backward<R: Real>(
    cfg: &Config,
    x: &HostTensor<'_>,
    p: &HeadParams<'_>,
    dout: &HostTensor<'_>,
    grads: &mut HeadGrads<'_>,
) -> Result<()> {
    let (model, t, act) = HeadModel::<R>::new(cfg, x, p)?;
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    let pdt = check::param_dtype(act);
    check::input("dout", dout, t, c, act)?;
    check::output("dx", &grads.dx, t, k, act)?;
    check::param_output("dphi", &grads.dphi, n * k, &format!("[n={n}, n*C={k}]"), pdt)?;
    check::param_output("dscale", &grads.dscale, 1, "[1]", pdt)?;
    check::param_output("dbase", &grads.dbase, n, &format!("[n={n}]"), pdt)?;
    let mut acc = PreAcc {
        dphi: vec![R::ZERO; n * k],
        dscale: vec![R::ZERO; 1],
        dbase: vec![R::ZERO; n],
        dgamma_k: None,
        dgamma_f: None,
    };
    let mut v = vec![R::ZERO; k];
    let mut d = vec![R::ZERO; c];
    let mut dv = vec![R::ZERO; k];
    let mut dz = vec![R::ZERO; n];
    let mut st = model.state();
    for ti in 0..t {
        check::read_row(x, ti, &mut v);
        check::read_row(dout, ti, &mut d);
        model.forward(&v, &mut st);
        for i in 0..n {
            let dh = dot(&d, &v[i * c..(i + 1) * c]);
            for ch in 0..c {
                dv[i * c + ch] = st.h[i] * d[ch];
            }
            let s = sigmoid(st.z[i]);
            dz[i] = dh * s * (R::ONE - s);
        }
        model.mixing().backward(&v, &v, &st.g, st.inv_rms, R::ZERO, &dz, &mut acc, &mut dv);
        check::write_row(&mut grads.dx, ti, &dv);
    }
    check::write_all(&mut grads.dphi, &acc.dphi);
    check::write_all(&mut grads.dscale, &acc.dscale);
    check::write_all(&mut grads.dbase, &acc.dbase);
    Ok(())
}
