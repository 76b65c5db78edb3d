//! `post_pre` (MATH.md "Fused post+pre"): layer l's post `x' = h_post f + h_res-mix(x)` and
//! layer l+1's `pre` on `x'` in one launch. The kernel is the `pre` family (asm/ptx/sm90/pre.ptx,
//! entries `mhc_post_pre_sm90_*`): its producer computes each 8-channel chunk of `x'` from `x`
//! and `f`, stores it, and feeds the same rounded values to the projection and the sum of
//! squares, so `x'` is never read back for the logits (the pre-mix reads it again, from L2 when
//! it is still there). bf16 with n <= 4 uses the batched producer (all loads of a step's 4 row
//! slots before the FMAs; T = 8192 977 -> 505 us on H200), bit-identical to the per-slot one.
//! Launch shapes (decode split / prefill tiles) as in pre.rs.

use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::{Plan, Workspace};
use super::pre::{fits_u32, PostIn, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::error::Result;

/// Layer l's side of `post_pre` (see [`crate::device::view::PostInViews`]); `f` rows 16-byte aligned.
pub type PostInViews<'a> = crate::device::view::PostInViews<'a, super::memory::DeviceBuffer>;

impl Plan {
    /// Enqueues `x_out = post(x, f, h_post, h_res)` followed by `pre(x_out)` (layer l+1's
    /// parameters `params`, outputs `out`) on `stream`: one launch. `x_out` must not overlap
    /// `x`. Checks as [`Plan::pre`] plus the post inputs; on error nothing is enqueued.
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
        self.post_pre_launch(stream, ws, x, post, x_out, params, out, None, true)
    }

    /// [`Plan::post_pre`] with the decode split forced (benchmarks, tests).
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre_with_split(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        split_target: usize,
    ) -> Result<()> {
        self.post_pre_launch(stream, ws, x, post, x_out, params, out, Some(split_target), true)
    }

    /// [`Plan::post_pre`] with the producer chosen: `batched = false` forces the per-slot
    /// producer where the batched one would run (bf16, n <= 4); tests and benchmarks compare them.
    #[doc(hidden)]
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre_producer(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        batched: bool,
    ) -> Result<()> {
        self.post_pre_launch(stream, ws, x, post, x_out, params, out, None, batched)
    }

    #[allow(clippy::too_many_arguments)]
    fn post_pre_launch(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        split_target: Option<usize>,
        batch: bool,
    ) -> Result<()> {
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
        let pin = PostIn {
            f: post.f.ptr,
            f_stride: post.f.layout.row_stride,
            h_post: post.h_post.ptr,
            h_res: post.h_res.ptr,
            x_out: x_out.ptr,
            xo_stride: x_out.layout.row_stride,
            batch,
        };
        fits_u32("x_out", t, x_out.layout.row_stride, n * c)?;
        fits_u32("f", t, post.f.layout.row_stride, c)?;
        self.pre_launch(stream, ws, x, params, out, Some(pin), split_target)
    }
}
