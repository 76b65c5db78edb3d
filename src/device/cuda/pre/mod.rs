//! `pre` (docs/math.md, stages 1-3): mixing logits with the row RMS, coefficients, Sinkhorn,
//! pre-mix and the optional F-pre-norm, in one launch; and the fused `post_pre` kernels, which
//! share its views and checks. Each kernel family is a launcher of its own; the catalogue's rows
//! (and the plan's token buckets built from them) say which one serves which T:
//!
//! - [`general`]: asm/ptx/sm90/pre.ptx, every configuration (split-K decode shape, prefill tiles;
//!   its `mhc_post_pre_sm90_*` entries are `post_pre` with a fused producer, on request only).
//! - [`decode`]: asm/ptx/sm90/pre_decode.ptx, n <= 4 (T <= 64) and n = 8 (T <= 16): the few-token
//!   kernels.
//! - [`lc`]: asm/ptx/sm90/pre_lc.ptx, n = 4, T <= 16: 16-CTA clusters that split the logits (h_res
//!   of 4 tokens; h_pre / h_post of 4 or 8 tokens and the mix), partial sums met on chip.
//! - [`cluster`]: asm/ptx/sm90/pre_pc.ptx, bf16 n = 4 C <= 4096: persistent 16-CTA clusters
//!   (and the fused `post_pre` entries).
//! - [`gemm`]: asm/ptx/sm90/pre_gemm.ptx, bf16 n = 8 / 16 / 32 prefill: a tiled GEMM.
//!
//! This module holds what they share: the views, their checks ([`check`]), the launch's inputs
//! every launcher takes ([`PreCall`]) and the workspace layout's type ([`WsLayout`], sized by
//! [`workspace::layout`]).

pub(crate) mod cluster;
pub(crate) mod decode;
pub(crate) mod gemm;
pub(crate) mod general;
pub(crate) mod lc;
pub(crate) mod workspace;

use super::launch::{Bucket, Ctx, Launch, LaunchKind, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::config::{Config, Dtype, Formulation};
use crate::device::cuda::abi::{PostPrePcArgs, PreDecodeArgs};
pub(crate) use crate::device::cuda::abi::{FLAG_EARLY_PARAMS, FLAG_GAMMA_F, FLAG_GAMMA_K, FLAG_PAPER};
use crate::error::{Error, Result};

/// The parameters of `pre` (see [`crate::device::view::PreParamViews`]); `phi` and the gammas
/// 16-byte aligned.
pub type PreParamViews<'a> = crate::device::view::PreParamViews<'a, super::memory::DeviceBuffer>;

/// Where `pre` writes (see [`crate::device::view::PreOutViews`]); `a`/`y` rows 16-byte aligned.
pub type PreOutViews<'a> = crate::device::view::PreOutViews<'a, super::memory::DeviceBuffer>;

/// Layer l's side of `post_pre` (see [`crate::device::view::PostInViews`]); `f` rows 16-byte
/// aligned.
pub type PostInViews<'a> = crate::device::view::PostInViews<'a, super::memory::DeviceBuffer>;

/// Byte offsets of the workspace regions of `pre` / `post_pre` ([`workspace::layout`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WsLayout {
    pub cnt: usize,
    pub part: usize,
    pub p: usize,
    pub ss: usize,
    /// Decode / mid kernels: the epoch word (4 of 256 bytes), the mid kernel's tagged h_pre
    /// `[MID_HPRE_COPIES][64][4]` (8-byte words, at `dsync + 256`; n = 8: `[16][8]` in each copy's
    /// 2048 bytes), then the tagged partial rows `[S][T][32]` (n = 8: 84 words, T <= 16). Past the general kernel's regions, so neither kernel ever sees the other's
    /// leftovers.
    pub dsync: usize,
    pub dpart: usize,
    /// The GEMM kernel's counters, partial sums of squares and partial logits, past every other
    /// region; inside `total` only where a bf16 plan may select that kernel.
    pub gemm: GemmWs,
    /// The pair entry's call count (the tags' source; zero in a fresh workspace) and count of
    /// finished clusters (back to zero after each call) in `PC_PAIR_HEAD_BYTES`, then its
    /// exchange rows `[tiles][2][16]` of `PC_PAIR_ROW_BYTES` (tagged words), past every other
    /// region; inside `total` only where a plan may select that entry.
    pub pair: usize,
    pub total: usize,
}

/// The GEMM kernel's workspace: counters, then partial sums of squares, then partial logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GemmWs {
    pub sync: usize,
    pub cnt: usize,
    pub ss: usize,
    pub p: usize,
    /// Partial slabs (a K split of a token tile) the region holds.
    pub slabs: usize,
    pub total: usize,
}

/// What post_pre adds to `pre`'s inputs: layer l's sublayer output and coefficients.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PostIn {
    pub f: u64,
    pub f_stride: usize,
    pub h_post: u64,
    pub h_res: u64,
    pub x_out: u64,
    pub xo_stride: usize,
    /// Use the batched producer where the kernel has it (bf16, n <= 4); `false` forces the
    /// per-slot `.func` producer (tests compare both).
    pub batch: bool,
}

/// One `pre` launch as every launcher takes it: the plan's context, the bucket (catalogue row)
/// that runs it, the workspace layout and its device address, and the views [`check`] accepted
/// with what it found (`chk`, T > 0). A launcher adds only what is its own (forced CTA or
/// cluster counts, layer l's post inputs).
#[derive(Clone, Copy)]
pub(crate) struct PreCall<'c, 'v> {
    pub ctx: &'c Ctx,
    pub b: &'c Bucket,
    pub lay: &'c WsLayout,
    pub wsp: u64,
    pub x: &'c DeviceTensor<'v>,
    pub params: &'c PreParamViews<'v>,
    pub out: &'c PreOutViews<'v>,
    pub chk: &'c Checked,
}

/// What [`check`] found valid: the device pointers and flags of one call.
pub(crate) struct Checked {
    pub t: usize,
    pub flags: u32,
    pub gamma_k: u64,
    pub gamma_f: u64,
    pub y: u64,
    pub y_stride: usize,
}

/// Every check of a `pre` / `post_pre` call's `pre` side (shapes, dtypes, strides, alignment,
/// options, workspace size), before anything is enqueued.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check(
    device: u32,
    cfg: &Config,
    dt: Dtype,
    ws: &WsLayout,
    ws_bytes: usize,
    x: &DeviceTensor<'_>,
    params: &PreParamViews<'_>,
    out: &PreOutViews<'_>,
) -> Result<Checked> {
    let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
    let t = x.layout.tokens;
    x.check(device, "x", dt, t, k, 16)?;
    fits_u32("x", t, x.layout.row_stride, k)?;
    params.phi.check_dense_f32(device, "phi", m, k)?;
    params.scale.check_dense_f32(device, "scale", 1, 3)?;
    params.base.check_dense_f32(device, "base", 1, m)?;
    align16("phi", params.phi.ptr)?;
    let mut flags = 0;
    if cfg.formulation == Formulation::Paper {
        flags |= FLAG_PAPER;
    }
    let gamma_k = optional_weight(device, "gamma_k", cfg.gamma_k, &params.gamma_k, k)?;
    let gamma_f = optional_weight(device, "gamma_f", cfg.gamma_f, &params.gamma_f, c)?;
    if cfg.gamma_k {
        flags |= FLAG_GAMMA_K;
    }
    if cfg.gamma_f {
        flags |= FLAG_GAMMA_F;
    }
    out.a.check(device, "a", dt, t, c, 16)?;
    fits_u32("a", t, out.a.layout.row_stride, c)?;
    let (y, y_stride) = match (cfg.gamma_f, &out.y) {
        (true, Some(y)) => {
            y.check(device, "y", dt, t, c, 16)?;
            fits_u32("y", t, y.layout.row_stride, c)?;
            (y.ptr, y.layout.row_stride)
        }
        (false, None) => (0, 0),
        (want, _) => return Err(presence("y", want)),
    };
    out.h_pre.check_dense_f32(device, "h_pre", t, n)?;
    out.h_post.check_dense_f32(device, "h_post", t, n)?;
    out.h_res.check_dense_f32(device, "h_res", t, n * n)?;
    out.inv_rms.check_dense_f32(device, "inv_rms", t, 1)?;
    if ws_bytes < ws.total {
        return Err(Error::shape("workspace", format!(">= {} bytes", ws.total), ws_bytes));
    }
    Ok(Checked { t, flags, gamma_k, gamma_f, y, y_stride })
}

/// The post side's checks of `post_pre` (both paths): f, h_post, h_res and x_out (where each
/// output lies against the other arguments: [`crate::device::view::post_pre_disjoint`]).
pub(crate) fn check_post_side(
    device: u32,
    cfg: &Config,
    dt: Dtype,
    x: &DeviceTensor<'_>,
    post: &PostInViews<'_>,
    x_out: &DeviceTensorMut<'_>,
) -> Result<()> {
    let (n, c) = (cfg.n, cfg.c);
    let t = x.layout.tokens;
    post.f.check(device, "f", dt, t, c, 16)?;
    post.h_post.check_dense_f32(device, "h_post", t, n)?;
    post.h_res.check_dense_f32(device, "h_res", t, n * n)?;
    x_out.check(device, "x_out", dt, t, n * c, 16)
}

/// The fused `post_pre` launch of `call` (a fused kernel's row; views checked for both sides,
/// `call.x` being layer l's residual). The few-token entries take the mid kernel's grid and
/// workspace rows; the persistent-cluster entries their resident clusters and ring (the pair
/// entry also the exchange rows at `lay.pair`). All take the `pre` arguments, then layer l's
/// post inputs and `x_out`.
pub(crate) fn post_pre_launch(
    call: &PreCall<'_, '_>,
    post: &PostInViews<'_>,
    x_out: &DeviceTensorMut<'_>,
) -> Result<Launch> {
    let PreCall { ctx, b, lay, wsp, .. } = *call;
    if b.kind == LaunchKind::PostPreMid {
        return decode::launch(call, None, Some((post, x_out)));
    }
    if b.kind == LaunchKind::PostPreLogitClusters {
        let (args, grid, shared) = lc::args(call, true)?;
        return Ok(Launch::new(b, grid, b.threads(), shared, &post_pre_args(args, post, x_out)));
    }
    let mut pre = decode::args(call);
    if b.kind == LaunchKind::PostPreClusterPair {
        pre.ws_part = wsp + lay.pair as u64;
    }
    let shared = cluster::ring_bytes_of(b.kind, ctx.cfg.c) as u32;
    Ok(Launch::new(b, b.resident_ctas, b.threads(), shared, &post_pre_args(pre, post, x_out)))
}

/// The fused `post_pre` kernels' arguments: the `pre` side's (`x` there is layer l's residual),
/// then layer l's post inputs and `x'`, on views [`check_post_side`] accepted.
fn post_pre_args(pre: PreDecodeArgs, post: &PostInViews<'_>, x_out: &DeviceTensorMut<'_>) -> PostPrePcArgs {
    PostPrePcArgs {
        pre,
        f: post.f.ptr,
        h_post_in: post.h_post.ptr,
        h_res_in: post.h_res.ptr,
        x_out: x_out.ptr,
        f_stride: post.f.layout.row_stride as u32,
        x_out_stride: x_out.layout.row_stride as u32,
    }
}

fn align16(what: &'static str, ptr: u64) -> Result<()> {
    if ptr % 16 != 0 {
        return Err(Error::Alignment { tensor: what, required: 16 });
    }
    Ok(())
}

/// The kernels' element indices are 32-bit: every activation row must start below 2^32 elements.
pub(crate) fn fits_u32(what: &'static str, t: usize, stride: usize, row_len: usize) -> Result<()> {
    let last = t.saturating_sub(1).checked_mul(stride).and_then(|v| v.checked_add(row_len));
    match last {
        Some(v) if v <= u32::MAX as usize && stride <= u32::MAX as usize => Ok(()),
        _ => Err(Error::shape(what, "fewer than 2^32 elements from the first row", "a larger tensor")),
    }
}

/// An optional f32 weight of `len` elements (gamma_k, gamma_f): present exactly when the
/// configuration asks for it, dense and 16-byte aligned; its address, or 0 when absent.
fn optional_weight(
    device: u32,
    what: &'static str,
    wanted: bool,
    view: &Option<DeviceTensor<'_>>,
    len: usize,
) -> Result<u64> {
    match (wanted, view) {
        (true, Some(g)) => {
            g.check_dense_f32(device, what, 1, len)?;
            align16(what, g.ptr)?;
            Ok(g.ptr)
        }
        (false, None) => Ok(0),
        (want, _) => Err(presence(what, want)),
    }
}

fn presence(what: &'static str, wanted: bool) -> Error {
    if wanted {
        Error::shape(what, "present (the configuration asks for it)", "absent")
    } else {
        Error::shape(what, "absent (the configuration does not ask for it)", "present")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::hostile::{config, pre_args, pre_views, trials, Arg, SHAPE};
    use crate::device::view::{post_pre_disjoint, pre_disjoint};
    use crate::reference::testing::Rng;

    /// The checks the CUDA `pre` and `post_pre` ops run before any launch ([`check`],
    /// [`check_post_side`] and the overlap checks; for `post_pre` also the post launcher's check
    /// of x), on randomised views: none panics, and every accepted call satisfies the contract
    /// re-derived in the test (see `device::hostile`).
    #[test]
    fn randomised_views_are_accepted_only_when_safe() {
        let mut rng = Rng::new(Rng::test_seed("cuda-pre-view-checks"));
        let ((n, c, t), cfg) = (SHAPE, config());
        let k = cfg.k();
        let (mut refused, mut accepted) = (0, 0);
        for dtype in [Dtype::F32, Dtype::Bf16] {
            let ws = workspace::layout(&cfg, dtype, t);
            let act = |i, rows, len, output| Arg::act(i, dtype, rows, len, output);
            // pre_args, then post_pre's f, layer l's h_post and h_res, and x_out.
            let mut args = pre_args(dtype, n, c, t);
            let (r, a) = trials(&mut rng, &format!("pre {dtype}"), &args, 3000, |a| {
                let (params, out) = pre_views(a);
                let x: DeviceTensor<'_> = a[0].view();
                check(0, &cfg, dtype, &ws, ws.total, &x, &params, &out)?;
                pre_disjoint(&x, &params, &out)
            });
            (refused, accepted) = (refused + r, accepted + a);
            args.extend([
                act(12, t, c, false),
                Arg::coef(13, t, n, false),
                Arg::coef(14, t, n * n, false),
                act(15, t, k, true),
            ]);
            let (r, a) = trials(&mut rng, &format!("post_pre {dtype}"), &args, 3000, |a| {
                let (params, out) = pre_views(a);
                let x: DeviceTensor<'_> = a[0].view();
                let post = PostInViews { f: a[12].view(), h_post: a[13].view(), h_res: a[14].view() };
                let x_out: DeviceTensorMut<'_> = a[15].view_mut();
                // The post launcher checks x (with its bucket's vector width: a loaded kernel).
                x.check(0, "x", dtype, t, k, dtype.size())?;
                check_post_side(0, &cfg, dtype, &x, &post, &x_out)?;
                post_pre_disjoint(&x, &post, &x_out, &params, &out)?;
                check(0, &cfg, dtype, &ws, ws.total, &x_out.as_view(), &params, &out).map(|_| ())
            });
            (refused, accepted) = (refused + r, accepted + a);
        }
        assert!(refused > accepted && accepted >= 10, "refused {refused}, accepted {accepted}");
    }
}
