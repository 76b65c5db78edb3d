//! `post` (docs/math.md stage 4, the residual merge), its backward, and `post_pre` (layer l's post
//! then layer l+1's pre).

use super::check;
use super::pre::{self, PreModel, PreOutputs, PreParams};
use super::real::{dot, Real};
use crate::config::{Config, Dtype, Formulation};
use crate::error::Result;
use crate::tensor::{HostTensor, HostTensorMut};

/// The inputs of `post`: `x` (T rows of n*C) and `f` (T rows of C), activations of one dtype;
/// `h_post` (T rows of n) and `h_res` (T rows of n*n), coefficients (f32, or f64 next to f64).
#[derive(Debug, Clone, Copy)]
pub struct PostInputs<'a> {
    pub x: HostTensor<'a>,
    pub f: HostTensor<'a>,
    pub h_post: HostTensor<'a>,
    pub h_res: HostTensor<'a>,
}

/// Where `post-backward` writes: `dx` (T rows of n*C), `df` (T rows of C), `dh_post` (T rows
/// of n), `dh_res` (T rows of n*n).
#[derive(Debug)]
pub struct PostGrads<'a> {
    pub dx: HostTensorMut<'a>,
    pub df: HostTensorMut<'a>,
    pub dh_post: HostTensorMut<'a>,
    pub dh_res: HostTensorMut<'a>,
}

/// Index into `h_res` of the weight that output stream `o` gives input stream `j`: V4 applies
/// `h_res` transposed (`x'[o] = sum_j h_res[j][o] x[j]`), the paper does not
/// (`x'[o] = sum_j h_res[o][j] x[j]`).
#[inline]
fn res_index(formulation: Formulation, n: usize, o: usize, j: usize) -> usize {
    match formulation {
        Formulation::DeepSeekV4 => j * n + o,
        Formulation::Paper => o * n + j,
    }
}

/// Validates `post`'s inputs; returns (T, activation dtype).
fn check_inputs(cfg: &Config, inp: &PostInputs<'_>) -> Result<(usize, Dtype)> {
    cfg.validate()?;
    let (n, c) = (cfg.n, cfg.c);
    let t = inp.x.layout.tokens;
    let act = inp.x.data.dtype();
    let pdt = check::param_dtype(act);
    check::input("x", &inp.x, t, cfg.k(), act)?;
    check::input("f", &inp.f, t, c, act)?;
    check::coef_input("h_post", &inp.h_post, t, n, pdt)?;
    check::coef_input("h_res", &inp.h_res, t, n * n, pdt)?;
    Ok((t, act))
}

/// One token's rows.
struct PostToken<R> {
    x: Vec<R>,
    f: Vec<R>,
    h_post: Vec<R>,
    h_res: Vec<R>,
}

impl<R: Real> PostToken<R> {
    fn new(n: usize, c: usize) -> Self {
        PostToken {
            x: vec![R::ZERO; n * c],
            f: vec![R::ZERO; c],
            h_post: vec![R::ZERO; n],
            h_res: vec![R::ZERO; n * n],
        }
    }
    fn read(&mut self, inp: &PostInputs<'_>, ti: usize) {
        check::read_row(&inp.x, ti, &mut self.x);
        check::read_row(&inp.f, ti, &mut self.f);
        check::read_row(&inp.h_post, ti, &mut self.h_post);
        check::read_row(&inp.h_res, ti, &mut self.h_res);
    }
}

fn run<R: Real>(cfg: &Config, inp: &PostInputs<'_>, t: usize, out: &mut HostTensorMut<'_>) {
    let (n, c) = (cfg.n, cfg.c);
    let mut tok = PostToken::<R>::new(n, c);
    let mut o = vec![R::ZERO; n * c];
    for ti in 0..t {
        tok.read(inp, ti);
        for s in 0..n {
            for ch in 0..c {
                let mut acc = tok.h_post[s] * tok.f[ch];
                for j in 0..n {
                    acc += tok.h_res[res_index(cfg.formulation, n, s, j)] * tok.x[j * c + ch];
                }
                o[s * c + ch] = acc;
            }
        }
        check::write_row(out, ti, &o);
    }
}

/// `post` (docs/math.md stage 4): `out[t][o] = h_post[t][o] f[t] + sum_j w(o, j) x[t][j]` with
/// `w(o, j) = h_res[j][o]` (V4) or `h_res[o][j]` (Paper). `out` is T rows of n*C in the
/// activation dtype. Validates everything before writing.
pub fn post<R: Real>(cfg: &Config, inp: &PostInputs<'_>, out: &mut HostTensorMut<'_>) -> Result<()> {
    let (t, act) = check_inputs(cfg, inp)?;
    check::output("out", out, t, cfg.k(), act)?;
    run::<R>(cfg, inp, t, out);
    Ok(())
}

/// The backward of [`post`] for upstream `dout` (T rows of n*C): `df = sum_o h_post[o] dout[o]`,
/// `dh_post[o] = dout[o] . f`, `dx[j] = sum_o w(o, j) dout[o]`, `dh_res[w(o, j)] = dout[o] . x[j]`.
pub fn post_backward<R: Real>(
    cfg: &Config,
    inp: &PostInputs<'_>,
    dout: &HostTensor<'_>,
    grads: &mut PostGrads<'_>,
) -> Result<()> {
    let (t, act) = check_inputs(cfg, inp)?;
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    let pdt = check::param_dtype(act);
    check::input("dout", dout, t, k, act)?;
    check::output("dx", &grads.dx, t, k, act)?;
    check::output("df", &grads.df, t, c, act)?;
    check::output("dh_post", &grads.dh_post, t, n, pdt)?;
    check::output("dh_res", &grads.dh_res, t, n * n, pdt)?;
    let mut tok = PostToken::<R>::new(n, c);
    let mut d = vec![R::ZERO; k];
    let (mut dx, mut df) = (vec![R::ZERO; k], vec![R::ZERO; c]);
    let (mut dhp, mut dhr) = (vec![R::ZERO; n], vec![R::ZERO; n * n]);
    for ti in 0..t {
        tok.read(inp, ti);
        check::read_row(dout, ti, &mut d);
        for ch in 0..c {
            let mut acc = R::ZERO;
            for o in 0..n {
                acc += tok.h_post[o] * d[o * c + ch];
            }
            df[ch] = acc;
        }
        for o in 0..n {
            dhp[o] = dot(&d[o * c..(o + 1) * c], &tok.f);
            for j in 0..n {
                dhr[res_index(cfg.formulation, n, o, j)] = dot(&d[o * c..(o + 1) * c], &tok.x[j * c..(j + 1) * c]);
            }
        }
        for j in 0..n {
            for ch in 0..c {
                let mut acc = R::ZERO;
                for o in 0..n {
                    acc += tok.h_res[res_index(cfg.formulation, n, o, j)] * d[o * c + ch];
                }
                dx[j * c + ch] = acc;
            }
        }
        check::write_row(&mut grads.dx, ti, &dx);
        check::write_row(&mut grads.df, ti, &df);
        check::write_row(&mut grads.dh_post, ti, &dhp);
        check::write_row(&mut grads.dh_res, ti, &dhr);
    }
    Ok(())
}

/// `post_pre`: [`post`] of layer l into `out`, then [`pre`](super::pre::pre) of layer l+1 (with
/// `params`) reading `out` as stored, so the result equals calling the two in turn in every
/// storage type. Everything is validated before anything is written.
pub fn post_pre<R: Real>(
    cfg: &Config,
    inp: &PostInputs<'_>,
    params: &PreParams<'_>,
    out: &mut HostTensorMut<'_>,
    pre_out: &mut PreOutputs<'_>,
) -> Result<()> {
    let (t, act) = check_inputs(cfg, inp)?;
    check::output("out", out, t, cfg.k(), act)?;
    let model = PreModel::<R>::new(cfg, params, act)?;
    pre::check_outputs(cfg, pre_out, t, act)?;
    run::<R>(cfg, inp, t, out);
    let x_next = HostTensor { data: out.data.as_data(), layout: out.layout };
    pre::run(&model, &x_next, pre_out);
    Ok(())
}
