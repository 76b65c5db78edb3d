//! The ops of a plan: each looks its stage's bucket up by T, lets the bucket's launcher check
//! every view and build the launch, checks that no output overlaps another argument (nothing is
//! enqueued when a check fails), and enqueues exactly one kernel (`post_pre` where it has no
//! fused kernel: `post`, then `pre`, both checked before the first launch).

use super::launch::{Bucket, Launch, LaunchKind, Overlap, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::{Plan, Workspace};
use super::pre::general::PreVariant;
use super::pre::{self, Checked, PostInViews, PreCall, PreOutViews, PreParamViews, FLAG_EARLY_PARAMS};
use super::static_layer::StaticParams;
use super::stream::Stream;
use crate::device::view::{check_disjoint, post_pre_disjoint, pre_disjoint, Span};
use crate::error::{Error, Result};
use crate::plan::Slot;

/// What a `pre` call forces instead of the plan's choice (benchmarks and tests only).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Forced {
    /// CTAs of the few-token kernels.
    pub ctas: Option<usize>,
    /// CTAs per 32-token tile of the general kernel.
    pub split: Option<usize>,
    /// The general kernel's K-loop variant.
    pub tuning: Option<PreVariant>,
    /// Most clusters of the persistent-cluster kernels.
    pub clusters: Option<usize>,
    /// K splits of the GEMM kernel.
    pub gemm_splits: Option<usize>,
}

impl Plan {
    /// Checks that `ws` is this plan's workspace and serves `stream`.
    #[inline]
    pub(crate) fn check_workspace(&self, ws: &Workspace, stream: &Stream) -> Result<()> {
        ws.binding.check(self.id, stream.raw() as usize)
    }

    /// Enqueues `launch` on `stream` (on this plan's device) with the plan's overlap.
    #[inline]
    fn enqueue(&self, stream: &Stream, launch: &Launch) -> Result<()> {
        if !stream.same_device(&self.dev) {
            return Err(Error::NoDevice("the stream belongs to another device than the plan".into()));
        }
        launch.enqueue(stream, self.overlap)
    }

    /// Enqueues `out = post(x, f, h_post, h_res)` on `stream` (docs/math.md, "post").
    ///
    /// Views: `x` and `out` are T rows of `n*C` (`[T, n, C]`, strided rows), `f` T rows of `C`,
    /// all in the plan's dtype; `h_post` `[T, n]` and `h_res` `[T, n, n]` dense f32. Row starts
    /// must be aligned to the kernel's vector width (16 bytes for n <= 8). Everything is checked
    /// before the launch; on error nothing is enqueued. T = 0 enqueues nothing.
    pub fn post(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let b = self.bucket(Slot::Post, x.layout.tokens)?;
        let launch = super::post::launch(&self.ctx, b, x, f, h_post, h_res, out)?;
        check_disjoint(&[out.span("out")], &[x.span("x"), f.span("f"), h_post.span("h_post"), h_res.span("h_res")])?;
        match launch {
            Some(l) => self.enqueue(stream, &l),
            None => Ok(()),
        }
    }

    /// Enqueues `out = head(x; phi, scale, base)` on `stream` (docs/math.md, "head").
    ///
    /// Views: `x` T rows of `n*C`, `out` T rows of `C` (plan dtype, strided rows); `phi`
    /// `[n, n*C]`, `scale` `[1]`, `base` `[n]` dense f32 (`phi` 16-byte aligned). Uses
    /// `cfg.eps_norm` and `cfg.eps_hc`. T = 0 enqueues nothing.
    pub fn head(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let b = self.bucket(Slot::Head, x.layout.tokens)?;
        let launch = super::head::launch(&self.ctx, b, x, phi, scale, base, out)?;
        check_disjoint(&[out.span("out")], &[x.span("x"), phi.span("phi"), scale.span("scale"), base.span("base")])?;
        match launch {
            Some(l) => self.enqueue(stream, &l),
            None => Ok(()),
        }
    }

    /// Enqueues `out = static_layer(x; h_pre_logits, h_post_logits, h_res_logits, gamma)`
    /// (docs/math.md, "static layer").
    ///
    /// Views: `x`, `out` T rows of `n*C` (plan dtype, strided rows); `h_pre_logits` `[n]`,
    /// `h_post_logits` `[n]`, `h_res_logits` `[n, n]`, `gamma` `[C]` dense f32. Uses
    /// `cfg.sinkhorn_iters`, `cfg.eps_hc` and `cfg.eps_f` (the RMSNorm epsilon).
    #[allow(clippy::too_many_arguments)]
    pub fn static_layer(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        h_pre_logits: &DeviceTensor<'_>,
        h_post_logits: &DeviceTensor<'_>,
        h_res_logits: &DeviceTensor<'_>,
        gamma: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let b = self.bucket(Slot::Static, x.layout.tokens)?;
        let p = StaticParams { h_pre_logits, h_post_logits, h_res_logits, gamma };
        let launch = super::static_layer::launch(&self.ctx, b, x, &p, out)?;
        let inputs = [
            x.span("x"),
            h_pre_logits.span("h_pre_logits"),
            h_post_logits.span("h_post_logits"),
            h_res_logits.span("h_res_logits"),
            gamma.span("gamma"),
        ];
        check_disjoint(&[out.span("out")], &inputs)?;
        match launch {
            Some(l) => self.enqueue(stream, &l),
            None => Ok(()),
        }
    }

    /// Enqueues `out[t][i][:] = e[t][:]` for every stream i (docs/math.md, "expand"). `e` T rows
    /// of C, `out` T rows of `n*C`, plan dtype, rows 16-byte aligned.
    pub fn expand(&self, stream: &Stream, e: &DeviceTensor<'_>, out: &mut DeviceTensorMut<'_>) -> Result<()> {
        let b = self.bucket(Slot::Expand, e.layout.tokens)?;
        let launch = super::expand::launch(&self.ctx, b, e, out)?;
        check_disjoint(&[out.span("out")], &[e.span("e")])?;
        match launch {
            Some(l) => self.enqueue(stream, &l),
            None => Ok(()),
        }
    }

    /// Enqueues the coefficient stage (docs/math.md, stages 1 after the projection and 2). `p`
    /// `[T, M]` (M = n^2 + 2n; in head mode M = n), `inv_rms` `[T]`, `scale` `[3]` (`[1]` in
    /// head mode), `base` `[M]`, all dense f32; writes `h_pre` `[T, n]` and, unless `rest` is
    /// `None` (head mode), `h_post` `[T, n]` and `h_res` `[T, n*n]`. Uses `cfg.formulation`,
    /// `cfg.sinkhorn_iters`, `cfg.eps_hc`.
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
        let b = self.bucket(Slot::Coeffs, p.layout.tokens)?;
        let rest = rest.as_ref().map(|(a, b)| (&**a, &**b));
        let launch = super::coeffs::launch(&self.ctx, b, p, inv_rms, scale, base, h_pre, rest)?;
        let outputs = [
            h_pre.span("h_pre"),
            rest.map_or(Span::NONE, |r| r.0.span("h_post")),
            rest.map_or(Span::NONE, |r| r.1.span("h_res")),
        ];
        check_disjoint(&outputs, &[p.span("p"), inv_rms.span("inv_rms"), scale.span("scale"), base.span("base")])?;
        match launch {
            Some(l) => self.enqueue(stream, &l),
            None => Ok(()),
        }
    }

    /// Enqueues `pre` (docs/math.md, stages 1-3) on `stream`: one launch.
    ///
    /// `x` is T rows of `n*C` (`[T, n, C]`, strided rows) in the plan's dtype; rows and the base
    /// must be 16-byte aligned. `ws` is this plan's workspace ([`Plan::new_workspace`]); calls
    /// that share a workspace must be ordered on one stream. Everything is checked before the
    /// launch; on error nothing is enqueued. T = 0 enqueues nothing.
    pub fn pre(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
    ) -> Result<()> {
        let b = self.bucket(Slot::Pre, x.layout.tokens)?;
        self.check_workspace(ws, stream)?;
        let chk = self.check_pre(ws, x, params, out)?;
        pre_disjoint(x, params, out)?;
        if chk.t == 0 {
            return Ok(());
        }
        let l = self.pre_launch(b, ws, x, params, out, &chk, Forced::default())?;
        self.enqueue(stream, &l)
    }

    /// [`pre::check`] of a call's `pre` side with this plan's configuration, and
    /// [`FLAG_EARLY_PARAMS`] where the plan's overlap promises that the weights are not written
    /// by a kernel that may still run ([`Overlap::Weights`]).
    pub(crate) fn check_pre(
        &self,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &PreOutViews<'_>,
    ) -> Result<Checked> {
        let mut chk = pre::check(self.ctx.device, &self.ctx.cfg, self.ctx.dtype, &self.ws, ws.bytes(), x, params, out)?;
        if self.overlap == Overlap::Weights {
            chk.flags |= FLAG_EARLY_PARAMS;
        }
        Ok(chk)
    }

    /// The launch of a `pre` call on bucket `b` that [`pre::check`] accepted (T > 0).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn pre_launch(
        &self,
        b: &Bucket,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &PreOutViews<'_>,
        chk: &Checked,
        forced: Forced,
    ) -> Result<Launch> {
        let call = &PreCall { ctx: &self.ctx, b, lay: &self.ws, wsp: ws.device_ptr(), x, params, out, chk };
        match b.kind {
            LaunchKind::PreCluster | LaunchKind::PreClusterTma | LaunchKind::PreClusterPair => {
                pre::cluster::launch(call, forced.clusters)
            }
            LaunchKind::PreGemm => pre::gemm::launch(call, forced.gemm_splits),
            LaunchKind::PreLogitClusters => {
                let (args, grid, shared) = pre::lc::args(call, false)?;
                Ok(Launch::new(b, grid, b.threads(), shared, &args))
            }
            LaunchKind::PreDecode | LaunchKind::PreMid => pre::decode::launch(call, forced.ctas, None),
            LaunchKind::Pre => pre::general::launch(call, None, forced.split, forced.tuning),
            other => Err(Error::BadCodeObject {
                image: b.variant.entry.file.clone(),
                reason: format!("{}: launcher {} is not a pre launcher", b.variant.id(), other.name()),
            }),
        }
    }

    /// The fused `post_pre` kernel this plan runs at `tokens` tokens, if any (else `post`, then
    /// `pre`).
    pub(crate) fn fused_post_pre(&self, tokens: usize) -> Option<&Bucket> {
        self.bucket(Slot::PostPre, tokens).ok()
    }

    /// Whether `post_pre` at `tokens` tokens runs one fused kernel (else `post`, then `pre`).
    pub fn post_pre_is_fused(&self, tokens: usize) -> bool {
        self.fused_post_pre(tokens).is_some()
    }

    /// Enqueues `x_out = post(x, f, h_post, h_res)` followed by `pre(x_out)` (layer l+1's
    /// parameters `params`, outputs `out`) on `stream` (docs/math.md, "fused post+pre"), in one
    /// launch where the plan has a fused kernel for T ([`Plan::post_pre_is_fused`]): at few
    /// tokens the mid kernel with post folded into its load phase (the outputs of `post` then
    /// `pre`, bit for bit), at many the persistent-cluster kernel (x' computed in its
    /// shared-memory ring on the tensor cores, stored and projected, never read back). Else the
    /// `post` kernel, then the `pre` kernel on the stored `x'` (two launches, one call: everything
    /// is checked before the first; the results are those of `post` then `pre`, bit for bit).
    /// `x_out` must not overlap `x`. Checks as [`Plan::post`] and [`Plan::pre`]; on error
    /// nothing is enqueued.
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
    ) -> Result<()> {
        let (cfg, dt) = (&self.ctx.cfg, self.ctx.dtype);
        let t = x.layout.tokens;
        pre::check_post_side(self.ctx.device, cfg, dt, x, post, x_out)?;
        self.check_workspace(ws, stream)?;
        let post_bucket = self.bucket(Slot::Post, t)?;
        let post_launch = super::post::launch(&self.ctx, post_bucket, x, &post.f, &post.h_post, &post.h_res, x_out)?;
        post_pre_disjoint(x, post, x_out, params, out)?;
        if let Some(b) = self.fused_post_pre(t) {
            pre::fits_u32("x_out", t, x_out.layout.row_stride, cfg.n * cfg.c)?;
            pre::fits_u32("f", t, post.f.layout.row_stride, cfg.c)?;
            let chk = self.check_pre(ws, x, params, out)?;
            if t == 0 {
                return Ok(());
            }
            let call = PreCall { ctx: &self.ctx, b, lay: &self.ws, wsp: ws.device_ptr(), x, params, out, chk: &chk };
            let l = pre::post_pre_launch(&call, post, x_out)?;
            return self.enqueue(stream, &l);
        }
        let pre_bucket = self.bucket(Slot::Pre, t)?;
        let chk = self.check_pre(ws, &x_out.as_view(), params, out)?;
        let Some(post_launch) = post_launch else { return Ok(()) };
        let pre_launch = self.pre_launch(pre_bucket, ws, &x_out.as_view(), params, out, &chk, Forced::default())?;
        self.enqueue(stream, &post_launch)?;
        self.enqueue(stream, &pre_launch)
    }
}
