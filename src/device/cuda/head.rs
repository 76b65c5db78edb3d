//! `head` (docs/math.md, "head"): the sigmoid-weighted collapse of the n streams into one row.
//! Kernels: asm/ptx/sm90/head.ptx: token tiles per CTA; per cluster of CTAs (`cluster` > 1),
//! each CTA owning a slice of the chunks of every stream; or persistent clusters walking the
//! token tiles with phi in registers and x through a ring of shared-memory stages.

use super::abi::HeadArgs;
use super::launch::{Bucket, Ctx, Launch, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::config::{Config, Dtype, Stage};
pub use crate::device::cuda::abi::{head_v1, HEAD_PC_SLOTS, HEAD_PC_STAGES};
use crate::error::{Error, Result};
use mhc_loader::Trait;

/// `out = head(x; phi, scale, base)` on bucket `b` (`None`: T = 0).
///
/// Views: `x` T rows of `n*C`, `out` T rows of `C` (plan dtype, strided rows); `phi` `[n, n*C]`,
/// `scale` `[1]`, `base` `[n]` dense f32 (`phi` 16-byte aligned). Uses `cfg.eps_norm` and
/// `cfg.eps_hc`.
pub(crate) fn launch(
    ctx: &Ctx,
    b: &Bucket,
    x: &DeviceTensor<'_>,
    phi: &DeviceTensor<'_>,
    scale: &DeviceTensor<'_>,
    base: &DeviceTensor<'_>,
    out: &DeviceTensorMut<'_>,
) -> Result<Option<Launch>> {
    let (n, c, dt) = (ctx.cfg.n, ctx.cfg.c, ctx.dtype);
    let k = n * c;
    let t = x.layout.tokens;
    let v1 = head_v1(n);
    let align = (b.v().max(v1) * dt.size()).min(16);
    x.check(ctx.device, "x", dt, t, k, align)?;
    out.check(ctx.device, "out", dt, t, c, (b.v() * dt.size()).min(16))?;
    phi.check_dense_f32(ctx.device, "phi", n, k)?;
    scale.check_dense_f32(ctx.device, "scale", 1, 1)?;
    base.check_dense_f32(ctx.device, "base", 1, n)?;
    if phi.ptr % 16 != 0 {
        return Err(Error::Alignment { tensor: "phi", required: 16 });
    }
    if t == 0 {
        return Ok(None);
    }
    let views = Views { x, phi, scale, base, out };
    if b.cluster() > 1 {
        return cluster_launch(ctx, b, &views).map(Some);
    }
    let args = args(ctx, &views, k / v1, c / b.v());
    let grid = t.div_ceil(b.tokens_per_cta()) as u32;
    Ok(Some(Launch::new(b, grid, b.threads(), 0, &args)))
}

struct Views<'v, 'a> {
    x: &'v DeviceTensor<'a>,
    phi: &'v DeviceTensor<'a>,
    scale: &'v DeviceTensor<'a>,
    base: &'v DeviceTensor<'a>,
    out: &'v DeviceTensorMut<'a>,
}

/// The cluster kernels: CTA r of a cluster of R owns chunks `[r cc / R, (r+1) cc / R)` of the
/// `cc = C / V` chunks of every stream.
/// - One cluster per tile of `tokens_per_cta` tokens (`mhc_head_cl_*`, `mhc_head_cld_*`): the
///   CTA's x tile (tokens x n x its chunks; the decode variant adds phi's n x n x its chunks in
///   f32) lives in dynamic shared memory.
/// - Persistent (`mhc_head_pc4_*`, `mhc_head_pc8_*`): `resident_ctas` CTAs (whole clusters) walk
///   the tiles; each CTA holds its phi in registers (at most [`HEAD_PC_SLOTS`] chunks per
///   thread) and streams its x slice through a ring of shared-memory stages.
fn cluster_launch(ctx: &Ctx, b: &Bucket, views: &Views<'_, '_>) -> Result<Launch> {
    let (n, c, dt) = (ctx.cfg.n, ctx.cfg.c, ctx.dtype);
    let t = views.x.layout.tokens;
    let (v, tt, r) = (b.v(), b.tokens_per_cta(), b.cluster() as usize);
    let cc = c / v;
    let per_cta = cc.div_ceil(r);
    let (smem, grid, most_chunks) = if b.has(Trait::Persistent) {
        let smem = persistent_shared_bytes(b, &ctx.cfg, dt) as usize;
        (smem, b.resident_ctas, HEAD_PC_SLOTS * b.threads() as usize / n)
    } else {
        let phi_tile = if b.has(Trait::PhiInShared) { n * n * per_cta * v * 4 } else { 0 };
        (tt * n * per_cta * v * dt.size() + phi_tile, (t.div_ceil(tt) * r) as u32, usize::MAX)
    };
    if cc < r || per_cta > most_chunks || smem > b.dynamic_shared_max() as usize {
        let why = format!(
            "C = {c} gives each of the {r} CTAs {per_cta} chunks of {v} channels per stream (1 to \
             {most_chunks} fit) and {smem} bytes of shared memory"
        );
        return Err(ctx.refused(Stage::Head, b.entry(), why));
    }
    let args = args(ctx, views, per_cta, cc);
    Ok(Launch::new(b, grid, b.threads(), smem as u32, &args))
}

/// The argument block of every head kernel; `kchunks` / `cchunks` are per kernel (the one-CTA
/// kernel: phase-1 chunks of the whole row and phase-2 chunks of C; the cluster kernels: chunks
/// per CTA and chunks of C, chunks of V1 elements (cl) or 16 bytes (pc)).
fn args(ctx: &Ctx, views: &Views<'_, '_>, kchunks: usize, cchunks: usize) -> HeadArgs {
    let (c, es) = (ctx.cfg.c, ctx.dtype.size());
    HeadArgs {
        x: views.x.ptr,
        phi: views.phi.ptr,
        scale: views.scale.ptr,
        base: views.base.ptr,
        out: views.out.ptr,
        x_stride: (views.x.layout.row_stride * es) as u64,
        out_stride: (views.out.layout.row_stride * es) as u64,
        tokens: views.x.layout.tokens as u32,
        cbytes: (c * es) as u32,
        kchunks: kchunks as u32,
        cchunks: cchunks as u32,
        eps_norm: ctx.cfg.eps_norm as f32,
        eps_hc: ctx.cfg.eps_hc as f32,
        inv_k: (1.0 / (ctx.cfg.n * c) as f64) as f32,
        pad: 0,
    }
}

/// Dynamic shared memory of the persistent head kernel for `cfg`: its ring of
/// [`HEAD_PC_STAGES`] stages, each the CTA's slice of a token tile: per token, n x chunks per
/// CTA chunks of 16 bytes and a 16-byte pad.
pub(crate) fn persistent_shared_bytes(row: &dyn Row, cfg: &Config, dtype: Dtype) -> u32 {
    let per_cta = (cfg.c / (16 / dtype.size())).div_ceil(row.cluster() as usize);
    (HEAD_PC_STAGES * row.tokens_per_cta() * (cfg.n * per_cta + 1) * 16) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::launch::assert_c_range_is_what_fits;

    /// The catalogue's C range of every persistent head kernel is exactly what the launcher
    /// accepts: at `c.max` the items per CTA and the ring fit, 8 channels more and one of them
    /// does not (so the selector never picks a kernel the launch would refuse, and the range is
    /// not smaller than the kernel allows).
    #[test]
    fn persistent_head_c_range_is_what_the_launch_accepts() {
        let fits = |row: &mhc_loader::Variant, n: usize, dtype: Dtype, c: usize| {
            let cfg = Config::new(n, c);
            let cc = c / row.v();
            let per_cta = cc.div_ceil(row.cluster() as usize);
            n * per_cta <= HEAD_PC_SLOTS * row.threads() as usize
                && persistent_shared_bytes(row, &cfg, dtype) <= row.dynamic_shared_max()
                && cc >= row.cluster() as usize
        };
        let seen = assert_c_range_is_what_fits(|v| v.has(Trait::Persistent) && v.entry.stage == "head", fits);
        assert_eq!(seen, 12, "pc4 and pc8, bf16 and f32, n = 1, 2, 4");
    }
}
