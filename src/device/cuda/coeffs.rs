//! `coeffs`: docs/math.md stages 1 (after the projection) and 2 from projected logits `P[T, M]`
//! and `inv_rms[T]`: `h_pre`, `h_post`, `h_res` (Sinkhorn) per token, both formulations; or, in
//! head mode, head's `h[T, n]`. Kernels: asm/ptx/sm90/coeffs*.ptx (a token per warp, per lane
//! group, or per thread; the catalogue chooses by n and T), one parameter block for all.

use super::abi::CoeffsArgs;
use super::launch::{Bucket, Ctx, Launch, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::config::Formulation;
use crate::error::Result;

/// The coefficient stage's checks and launch. `p` `[T, M]` (M = n^2 + 2n; in head mode M = n),
/// `inv_rms` `[T]`, `scale` `[3]` (`[1]` in head mode), `base` `[M]`, all dense f32; writes
/// `h_pre` `[T, n]` and, unless head mode (`rest` = None), `h_post` `[T, n]` and `h_res`
/// `[T, n*n]`. Uses `cfg.formulation`, `cfg.sinkhorn_iters`, `cfg.eps_hc`. `None`: T = 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch(
    ctx: &Ctx,
    b: &Bucket,
    p: &DeviceTensor<'_>,
    inv_rms: &DeviceTensor<'_>,
    scale: &DeviceTensor<'_>,
    base: &DeviceTensor<'_>,
    h_pre: &DeviceTensorMut<'_>,
    rest: Option<(&DeviceTensorMut<'_>, &DeviceTensorMut<'_>)>,
) -> Result<Option<Launch>> {
    let n = ctx.cfg.n;
    let head = rest.is_none();
    let m = if head { n } else { ctx.cfg.m() };
    let t = p.layout.tokens;
    p.check_dense_f32(ctx.device, "p", t, m)?;
    inv_rms.check_dense_f32(ctx.device, "inv_rms", 1, t)?;
    scale.check_dense_f32(ctx.device, "scale", 1, if head { 1 } else { 3 })?;
    base.check_dense_f32(ctx.device, "base", 1, m)?;
    h_pre.check_dense_f32(ctx.device, "h_pre", t, n)?;
    let (hp, hr) = match rest {
        Some((h_post, h_res)) => {
            h_post.check_dense_f32(ctx.device, "h_post", t, n)?;
            h_res.check_dense_f32(ctx.device, "h_res", t, n * n)?;
            (h_post.ptr, h_res.ptr)
        }
        None => (0, 0),
    };
    if t == 0 {
        return Ok(None);
    }
    let args = CoeffsArgs {
        p: p.ptr,
        inv_rms: inv_rms.ptr,
        scale: scale.ptr,
        base: base.ptr,
        h_pre: h_pre.ptr,
        h_post: hp,
        h_res: hr,
        tokens: t as u32,
        streams: n as u32,
        iters: ctx.cfg.sinkhorn_iters,
        eps_hc: ctx.cfg.eps_hc as f32,
        flags: u32::from(ctx.cfg.formulation == Formulation::Paper) | (u32::from(head) << 1),
        p_stride: m as u32,
    };
    let grid = t.div_ceil(b.tokens_per_cta()) as u32;
    Ok(Some(Launch::new(b, grid, b.threads(), 0, &args)))
}
