//! Stage 2's doubly-stochastic projection (docs/math.md): the start matrix from the residual logits,
//! the alternating normalizations, and their exact reverse.
//!
//! Matrices are `n x n`, row-major (`S[i][j]` at `i*n + j`).

use super::check;
use super::real::Real;
use crate::config::{check_iters, Config, Formulation, MAX_N};
use crate::error::{Error, Result};
use crate::tensor::{HostTensor, HostTensorMut};

/// Which sums a normalization divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// `S[i][j] /= rowsum(S)[i] + eps`.
    Row,
    /// `S[i][j] /= colsum(S)[j] + eps`.
    Col,
}

/// The normalizations in the order they are applied: V4 is one column step then `iters-1`
/// (row, column) pairs; Paper is `iters` (column, row) pairs. Lazy: nothing is allocated,
/// whatever `iters`.
pub fn steps(formulation: Formulation, iters: u32) -> impl DoubleEndedIterator<Item = Axis> + Clone {
    let (first, pair, pairs) = match formulation {
        Formulation::DeepSeekV4 => (Some(Axis::Col), [Axis::Row, Axis::Col], iters.saturating_sub(1)),
        Formulation::Paper => (None, [Axis::Col, Axis::Row], iters),
    };
    first.into_iter().chain((0..pairs).flat_map(move |_| pair))
}

/// Checks what [`forward`] and [`backward`] are given: `n` in 1..=32, `iters` in
/// 1..=[`MAX_SINKHORN_ITERS`](crate::config::MAX_SINKHORN_ITERS), `eps` in the range of
/// [`Config::check_eps`], and every slice of exactly `n * n` elements.
fn check_args<R: Real>(iters: u32, eps: R, n: usize, slices: &[(&'static str, usize)]) -> Result<()> {
    if n == 0 || n > MAX_N {
        return Err(Error::Config { what: "n", reason: format!("must be in 1..={MAX_N}, got {n}") });
    }
    check_iters(iters)?;
    Config::check_eps("eps_hc", eps.to_f64())?;
    let nn = n * n;
    for &(what, len) in slices {
        if len != nn {
            return Err(Error::shape(what, format!("n*n = {nn} elements"), format!("{len} elements")));
        }
    }
    Ok(())
}

/// `sums[l]` = sum of line `l` (row `l` for [`Axis::Row`], column `l` for [`Axis::Col`]), in
/// index order.
fn line_sums<R: Real>(s: &[R], n: usize, axis: Axis, sums: &mut [R]) {
    for (l, out) in sums.iter_mut().enumerate().take(n) {
        let mut acc = R::ZERO;
        for e in 0..n {
            acc += s[at(n, axis, l, e)];
        }
        *out = acc;
    }
}

/// Index of element `e` of line `l`.
#[inline]
fn at(n: usize, axis: Axis, l: usize, e: usize) -> usize {
    match axis {
        Axis::Row => l * n + e,
        Axis::Col => e * n + l,
    }
}

fn normalize<R: Real>(s: &mut [R], n: usize, axis: Axis, eps: R, sums: &mut [R]) {
    line_sums(s, n, axis, sums);
    for l in 0..n {
        let d = sums[l] + eps;
        for e in 0..n {
            s[at(n, axis, l, e)] /= d;
        }
    }
}

/// The start matrix `S0` from the logits `z`: V4 `softmax_row(Z) + eps`; Paper
/// `exp(Z - max_col(Z))`.
pub fn start<R: Real>(formulation: Formulation, z: &[R], n: usize, eps: R, s0: &mut [R]) {
    match formulation {
        Formulation::DeepSeekV4 => {
            for i in 0..n {
                let row = &z[i * n..(i + 1) * n];
                let m = row.iter().copied().fold(row[0], R::max);
                let mut sum = R::ZERO;
                for j in 0..n {
                    let e = (row[j] - m).exp();
                    s0[i * n + j] = e;
                    sum += e;
                }
                for j in 0..n {
                    s0[i * n + j] = s0[i * n + j] / sum + eps;
                }
            }
        }
        Formulation::Paper => {
            for j in 0..n {
                let m = (0..n).map(|i| z[i * n + j]).fold(z[j], R::max);
                for i in 0..n {
                    s0[i * n + j] = (z[i * n + j] - m).exp();
                }
            }
        }
    }
}

/// `h = Sinkhorn(start(z))` for one token: the start matrix then [`steps`], each denominator
/// `sum + eps`. `z` and `h` hold exactly `n * n` elements; `n`, `iters` and `eps` are bounded as
/// in [`Config::validate`]. Anything else is an `Err` and `h` is not written.
pub fn forward<R: Real>(formulation: Formulation, iters: u32, eps: R, z: &[R], n: usize, h: &mut [R]) -> Result<()> {
    check_args(iters, eps, n, &[("z", z.len()), ("h", h.len())])?;
    forward_unchecked(formulation, iters, eps, z, n, h);
    Ok(())
}

/// [`forward`] for callers that validated the configuration and sized the slices.
pub(crate) fn forward_unchecked<R: Real>(formulation: Formulation, iters: u32, eps: R, z: &[R], n: usize, h: &mut [R]) {
    let mut sums = vec![R::ZERO; n];
    start(formulation, z, n, eps, h);
    for axis in steps(formulation, iters) {
        normalize(h, n, axis, eps, &mut sums);
    }
}

/// `dz` from `dh` for one token, through the exact reverse of [`forward`]: the iterates are
/// recomputed from the start matrix; each step `Y = R / (sums(R) + eps)` is reversed as
/// `dR = (dY - sum_line(dY * Y)) / (sums(R) + eps)`; then the start is reversed (V4: softmax
/// row backward; Paper: `dZ = dS * S0` plus the gradient through the column max, which is
/// O(eps) but part of the exact derivative of the forward). `z`, `dh` and `dz` hold exactly
/// `n * n` elements; `n`, `iters` and `eps` are bounded as in [`Config::validate`]. Anything else
/// is an `Err` and `dz` is not written.
pub fn backward<R: Real>(
    formulation: Formulation,
    iters: u32,
    eps: R,
    z: &[R],
    n: usize,
    dh: &[R],
    dz: &mut [R],
) -> Result<()> {
    check_args(iters, eps, n, &[("z", z.len()), ("dh", dh.len()), ("dz", dz.len())])?;
    backward_unchecked(formulation, iters, eps, z, n, dh, dz);
    Ok(())
}

/// [`backward`] for callers that validated the configuration and sized the slices.
pub(crate) fn backward_unchecked<R: Real>(
    formulation: Formulation,
    iters: u32,
    eps: R,
    z: &[R],
    n: usize,
    dh: &[R],
    dz: &mut [R],
) {
    let nn = n * n;
    let steps: Vec<Axis> = steps(formulation, iters).collect();
    let mut s0 = vec![R::ZERO; nn];
    start(formulation, z, n, eps, &mut s0);
    // The input of every step (the reference keeps them; kernels recompute them on chip).
    let mut iterates = Vec::with_capacity(steps.len());
    let mut s = s0.clone();
    let mut sums = vec![R::ZERO; n];
    for &axis in &steps {
        iterates.push(s.clone());
        normalize(&mut s, n, axis, eps, &mut sums);
    }
    let mut dy = dh[..nn].to_vec();
    for (&axis, r) in steps.iter().zip(&iterates).rev() {
        line_sums(r, n, axis, &mut sums);
        for l in 0..n {
            let d = sums[l] + eps;
            let mut inner = R::ZERO;
            for e in 0..n {
                let idx = at(n, axis, l, e);
                inner += dy[idx] * (r[idx] / d);
            }
            for e in 0..n {
                let idx = at(n, axis, l, e);
                dy[idx] = (dy[idx] - inner) / d;
            }
        }
    }
    // dy is now dS0.
    match formulation {
        Formulation::DeepSeekV4 => {
            // S0 = p + eps with p = softmax_row(z): dz = p * (dS - sum_j p dS).
            for i in 0..n {
                let mut inner = R::ZERO;
                for j in 0..n {
                    inner += (s0[i * n + j] - eps) * dy[i * n + j];
                }
                for j in 0..n {
                    let p = s0[i * n + j] - eps;
                    dz[i * n + j] = p * (dy[i * n + j] - inner);
                }
            }
        }
        Formulation::Paper => {
            for j in 0..n {
                let mut argmax = 0;
                let mut total = R::ZERO;
                for i in 0..n {
                    if z[i * n + j] > z[argmax * n + j] {
                        argmax = i;
                    }
                    let g = dy[i * n + j] * s0[i * n + j];
                    dz[i * n + j] = g;
                    total += g;
                }
                // S0[i][j] = exp(z[i][j] - z[argmax][j]): the max row receives -sum_i dS*S0.
                dz[argmax * n + j] -= total;
            }
        }
    }
}

/// The `sinkhorn` stage: `h_res[t] = Sinkhorn(start(logits[t]))` for every token, with the
/// formulation, iterations and `eps_hc` of `cfg` (`cfg.c` is not used). `logits` and `h_res`
/// are `T` rows of `n*n`, f32 or f64 (the same for both).
pub fn sinkhorn<R: Real>(cfg: &Config, logits: &HostTensor<'_>, h_res: &mut HostTensorMut<'_>) -> Result<()> {
    cfg.validate()?;
    let (n, t) = (cfg.n, logits.layout.tokens);
    let pdt = check::param_dtype(logits.data.dtype());
    check::coef_input("logits", logits, t, n * n, pdt)?;
    check::output("h_res", h_res, t, n * n, pdt)?;
    let eps = R::from_f64(cfg.eps_hc);
    let mut z = vec![R::ZERO; n * n];
    let mut h = vec![R::ZERO; n * n];
    for ti in 0..t {
        check::read_row(logits, ti, &mut z);
        forward_unchecked(cfg.formulation, cfg.sinkhorn_iters, eps, &z, n, &mut h);
        check::write_row(h_res, ti, &h);
    }
    Ok(())
}
