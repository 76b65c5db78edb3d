//! `coeffs`: MATH.md stages 1 (after the projection) and 2 from projected logits `P[T, M]` and
//! `inv_rms[T]`: `h_pre`, `h_post`, `h_res` (Sinkhorn) per token, both formulations; or, in head
//! mode, head's `h[T, n]`. Kernel: asm/ptx/sm90/coeffs.ptx (mhc-loader issue), one warp per token.

use super::kernels::CoeffsArgs;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::{Formulation, Stage};
use crate::error::{Error, Result};

impl Plan {
    /// Enqueues the coefficient stage. `p` `[T, M]` (M = n^2 + 2n; in head mode M = n), `inv_rms`
    /// `[T]`, `scale` `[3]` (`[1]` in head mode), `base` `[M]`, all dense f32; writes `h_pre`
    /// `[T, n]` and, unless `head`, `h_post` `[T, n]` and `h_res` `[T, n*n]` (pass `None` in head
    /// mode). Uses `cfg.formulation`, `cfg.sinkhorn_iters`, `cfg.eps_hc`.
    #[allow(clippy::too_many_arguments)]
    pub fn coeffs(
        &self,
        stream: &Stream,
        p: &DeviceTensor<'_>,
        inv_rms: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        h_pre: &mut DeviceTensorMut<'_>,
        rest: Option<(&mut DeviceTensorMut<'_>, &mut DeviceTensorMut<'_>)>,
    ) -> Result<()> {
        let n = self.cfg.n;
        let head = rest.is_none();
        let m = if head { n } else { self.cfg.m() };
        let t = p.layout.tokens;
        let b = self.bucket(Stage::Sinkhorn, t)?;
        if !matches!(n, 1 | 2 | 4 | 8 | 16 | 32) {
            return Err(Error::NoVariant {
                stage: "coeffs".into(),
                arch: self.dev.arch().name().into(),
                shape: format!("n={n}"),
                rejected: vec!["mhc_coeffs: n must be 1, 2, 4, 8, 16 or 32".into()],
            });
        }
        p.check_dense_f32("p", t, m)?;
        inv_rms.check_dense_f32("inv_rms", 1, t)?;
        scale.check_dense_f32("scale", 1, if head { 1 } else { 3 })?;
        base.check_dense_f32("base", 1, m)?;
        h_pre.check_dense_f32("h_pre", t, n)?;
        let (hp, hr) = match rest {
            Some((h_post, h_res)) => {
                h_post.check_dense_f32("h_post", t, n)?;
                h_res.check_dense_f32("h_res", t, n * n)?;
                (h_post.ptr, h_res.ptr)
            }
            None => (0, 0),
        };
        if t == 0 {
            return Ok(());
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
            iters: self.cfg.sinkhorn_iters,
            eps_hc: self.cfg.eps_hc as f32,
            flags: u32::from(self.cfg.formulation == Formulation::Paper) | (u32::from(head) << 1),
            p_stride: m as u32,
        };
        let grid = t.div_ceil(4) as u32;
        self.launch(stream, b, grid, b.desc.threads, 0, &args)
    }
}
