//! `post_pre` (MATH.md "Fused post+pre"): layer l's post `x' = h_post f + h_res-mix(x)` and
//! layer l+1's `pre` on `x'`.
//!
//! [`Plan::post_pre`] runs, where the plan has it for T (bf16, n = 4, C % 128 == 0 up to 4096, no
//! gamma_f, T >= 65: where the persistent-cluster kernel serves `pre`), the fused entry of
//! pre_pc.ptx: one launch that computes `x'` in its shared-memory ring, stores it and runs `pre`
//! on it, so `x'` is never read back (pre_pc.rs). Its `x'` comes from the tensor cores (about 0.1%
//! of the stored bf16 values one rounding step from the post kernel's) and its `pre` outputs are
//! the `pre` kernel's on that `x'` (H100, n = 4, C = 4096, T = 8192: 277 us against 438 for the
//! pair). Elsewhere it enqueues
//! the `post` kernel, then the `pre` kernel on the stored `x'` (two launches, one call:
//! everything is checked before the first; graph-capturable), whose results are those of `post`
//! then `pre`, bit for bit, by construction.
//!
//! The fused kernel (one launch, the `pre` family's entries `mhc_post_pre_sm90_*`: its producer
//! computes each 8-channel chunk of `x'` from `x` and `f`, stores it and feeds the same rounded
//! values to the projection, so `x'` is never read back for the logits) stays available as
//! [`Plan::post_pre_fused`]. It is not the default because it measured slower than the pair at
//! every shape (H200, bf16, 2026-11-22, us): n = 4 C = 4096 T = 8192 fused 504 vs 145 + 234;
//! T = 1 in a graph 19.5 vs 1.45 + 6.5 (the pair gets the decode `pre` kernel); n = 8 T = 8192
//! 2611 vs 95 + 526; n = 32 T = 8192 297,557 vs 1,140 + 12,216 (the fused producer recomputes
//! x' for each of the 34 logit groups). bf16 with n <= 4 uses the batched producer.

use super::kernels::PreFamily;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::{Plan, Workspace};
use super::pre::{fits_u32, PostIn, PreKernel, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::config::Stage;
use crate::error::Result;

/// Layer l's side of `post_pre` (see [`crate::device::view::PostInViews`]); `f` rows 16-byte aligned.
pub type PostInViews<'a> = crate::device::view::PostInViews<'a, super::memory::DeviceBuffer>;

impl Plan {
    /// Enqueues `x_out = post(x, f, h_post, h_res)` followed by `pre(x_out)` (layer l+1's
    /// parameters `params`, outputs `out`) on `stream`: the fused persistent-cluster kernel
    /// where the plan has it for T ([`Plan::post_pre_uses_cluster_kernel`]), else the `post`
    /// kernel, then the `pre` kernel (module docs). `x_out` must not overlap `x`. Checks as
    /// [`Plan::post`] and [`Plan::pre`]; on error nothing is enqueued.
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
        self.post_pre_inputs(x, post, x_out)?;
        let prepared = self.post_prepared(x, &post.f, &post.h_post, &post.h_res, x_out)?;
        let t = x.layout.tokens;
        if self.post_pre_uses_cluster_kernel(t) {
            fits_u32("x_out", t, x_out.layout.row_stride, self.cfg.n * self.cfg.c)?;
            fits_u32("f", t, post.f.layout.row_stride, self.cfg.c)?;
            let (b, chk) = self.pre_checked(Stage::PostPre, ws, x, params, out)?;
            return self.post_pre_pc_launch(stream, x, post, x_out, params, out, b, &chk);
        }
        let (b, chk) = self.pre_checked(Stage::Pre, ws, &x_out.as_view(), params, out)?;
        let Some(p) = prepared else { return Ok(()) };
        self.launch(stream, p.bucket, p.grid, p.block, p.shared, &p.args)?;
        self.pre_enqueue(stream, ws, &x_out.as_view(), params, out, PreKernel::Auto, b, &chk)
    }

    /// Whether `post_pre` at `tokens` tokens runs the fused persistent-cluster kernel (one
    /// launch; else `post`, then `pre`).
    pub fn post_pre_uses_cluster_kernel(&self, tokens: usize) -> bool {
        self.bucket(Stage::PostPre, tokens).is_ok_and(|b| b.desc.pre_family == PreFamily::Cluster)
    }

    /// [`Plan::post_pre`] as the general fused kernel: one launch (benchmarks, tests). `split` forces
    /// its CTAs per 32-token tile; `batched = false` forces the per-slot producer where the
    /// batched one would run (bf16, n <= 4): both must give the same bits.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre_fused(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        split: Option<usize>,
        batched: bool,
    ) -> Result<()> {
        self.post_pre_inputs(x, post, x_out)?;
        let t = x.layout.tokens;
        fits_u32("x_out", t, x_out.layout.row_stride, self.cfg.n * self.cfg.c)?;
        fits_u32("f", t, post.f.layout.row_stride, self.cfg.c)?;
        let (_, chk) = self.pre_checked(Stage::PostPre, ws, x, params, out)?;
        if t == 0 {
            return Ok(());
        }
        let pin = PostIn {
            f: post.f.ptr,
            f_stride: post.f.layout.row_stride,
            h_post: post.h_post.ptr,
            h_res: post.h_res.ptr,
            x_out: x_out.ptr,
            xo_stride: x_out.layout.row_stride,
            batch: batched,
        };
        self.pre_general_launch(stream, ws, x, params, out, Some(pin), split, None, &chk)
    }

    /// The post side's checks of both paths: f, h_post, h_res, x_out, and x_out apart from x.
    fn post_pre_inputs(&self, x: &DeviceTensor<'_>, post: &PostInViews<'_>, x_out: &DeviceTensorMut<'_>) -> Result<()> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let t = x.layout.tokens;
        post.f.check("f", dt, t, c, 16)?;
        post.h_post.check_dense_f32("h_post", t, n)?;
        post.h_res.check_dense_f32("h_res", t, n * n)?;
        x_out.check("x_out", dt, t, n * c, 16)?;
        let span = |p: u64, l: &crate::Layout| {
            let elems = l.required_len().unwrap_or(usize::MAX);
            (p, p.saturating_add((elems as u64).saturating_mul(dt.size() as u64)))
        };
        let (xa, xb) = span(x.ptr, &x.layout);
        let (oa, ob) = span(x_out.ptr, &x_out.layout);
        if t > 0 && xa < ob && oa < xb {
            return Err(crate::Error::shape("x_out", "a range that does not overlap x", "an overlapping range"));
        }
        Ok(())
    }
}
