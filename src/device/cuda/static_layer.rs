//! `static` (docs/math.md, "static layer", the mHC.cu parity layer): coefficients from
//! per-layer logits computed on the device (no host read), shared by all tokens; F is an RMSNorm.
//! Kernels: asm/ptx/sm90/static.ptx: persistent CTAs with a[C] in shared memory; one token per
//! CTA (or per cluster) with its x tile in shared memory; or a ring of token tiles.

use super::abi::StaticArgs;
use super::launch::{Bucket, Ctx, Launch, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::config::{Dtype, Stage};
pub use crate::device::cuda::abi::STATIC_PR_STAGES;
use crate::error::{Error, Result};
use mhc_loader::Trait;

/// CTAs of `threads` threads resident per SM, from the register count (register file 64K,
/// allocated per warp in units of 256 registers) and the 32-CTA / 2048-thread limits; the shared
/// memory of a[C] (c * 4 bytes per CTA) of 228 KiB.
pub(crate) fn resident_ctas(registers: u32, threads: u32, smem: u32) -> u32 {
    let per_warp = (registers.max(1) * 32).div_ceil(256) * 256;
    let by_regs = 65536 / (per_warp * threads.div_ceil(32));
    let by_smem = (228 * 1024) / (smem + 1024).max(1);
    by_regs.min(2048 / threads).min(by_smem).clamp(1, 32)
}

/// The static layer's inputs besides x.
pub(crate) struct StaticParams<'v, 'a> {
    pub h_pre_logits: &'v DeviceTensor<'a>,
    pub h_post_logits: &'v DeviceTensor<'a>,
    pub h_res_logits: &'v DeviceTensor<'a>,
    pub gamma: &'v DeviceTensor<'a>,
}

/// `out = static_layer(x; h_pre_logits, h_post_logits, h_res_logits, gamma)` on bucket `b`
/// (`None`: T = 0).
///
/// Views: `x`, `out` T rows of `n*C` (plan dtype, strided rows); `h_pre_logits` `[n]`,
/// `h_post_logits` `[n]`, `h_res_logits` `[n, n]`, `gamma` `[C]` dense f32. Uses
/// `cfg.sinkhorn_iters`, `cfg.eps_hc` and `cfg.eps_f` (the RMSNorm epsilon).
pub(crate) fn launch(
    ctx: &Ctx,
    b: &Bucket,
    x: &DeviceTensor<'_>,
    p: &StaticParams<'_, '_>,
    out: &DeviceTensorMut<'_>,
) -> Result<Option<Launch>> {
    let (n, c, dt) = (ctx.cfg.n, ctx.cfg.c, ctx.dtype);
    let t = x.layout.tokens;
    let align = (b.v() * dt.size()).min(16);
    // The token-tile kernels copy x rows to shared memory in 16-byte units (static_cl,
    // static_pr: cp.async; static_mma: cp.async.bulk).
    let x_align = if b.has(Trait::TileInShared) { 16 } else { align };
    x.check(ctx.device, "x", dt, t, n * c, x_align)?;
    out.check(ctx.device, "out", dt, t, n * c, align)?;
    p.h_pre_logits.check_dense_f32(ctx.device, "h_pre_logits", 1, n)?;
    p.h_post_logits.check_dense_f32(ctx.device, "h_post_logits", 1, n)?;
    p.h_res_logits.check_dense_f32(ctx.device, "h_res_logits", n, n)?;
    p.gamma.check_dense_f32(ctx.device, "gamma", 1, c)?;
    if p.gamma.ptr % 16 != 0 {
        return Err(Error::Alignment { tensor: "gamma", required: 16 });
    }
    if t == 0 {
        return Ok(None);
    }
    let mut args = StaticArgs {
        x: x.ptr,
        h_pre_logits: p.h_pre_logits.ptr,
        h_post_logits: p.h_post_logits.ptr,
        h_res_logits: p.h_res_logits.ptr,
        gamma: p.gamma.ptr,
        out: out.ptr,
        x_stride: (x.layout.row_stride * dt.size()) as u64,
        out_stride: (out.layout.row_stride * dt.size()) as u64,
        tokens: t as u32,
        cbytes: (c * dt.size()) as u32,
        cchunks: (c / b.v()) as u32,
        iters: ctx.cfg.sinkhorn_iters,
        eps_hc: ctx.cfg.eps_hc as f32,
        eps_f: ctx.cfg.eps_f as f32,
        inv_c: (1.0 / c as f64) as f32,
        pad: 0,
    };
    if b.has(Trait::TokenRing) {
        // static_pr: the resident CTAs (counted when the plan was built) walk the tokens; a[]
        // (f32) and STATIC_PR_STAGES token tiles (n streams, storage dtype) in shared memory,
        // copied in 16-byte units.
        let m = c / b.v();
        let smem = token_ring_bytes(b, c, n, dt);
        if (c * dt.size()) % 16 != 0 || smem > b.dynamic_shared_max() as usize {
            return Err(ctx.refused(Stage::Static, b.entry(), format!("a token ring of {smem} bytes")));
        }
        args.pad = m as u32;
        let grid = (t as u32).min(b.resident_ctas);
        return Ok(Some(Launch::new(b, grid, b.threads(), smem as u32, &args)));
    }
    if b.has(Trait::TileInShared) {
        // static_cl, static_mma: one token per CTA; a[] (f32), gamma (static_mma) and the
        // token's x (n streams, storage dtype, row_pad bytes after each) in shared memory,
        // copied in 16-byte units (C * esize is a multiple of 16).
        // static_mma_cl*: a cluster of CTAs per token, each with C / cluster channels.
        let cluster = b.cluster() as usize;
        let slice = c / cluster;
        let smem = tile_bytes(b, slice, n, dt);
        if slice * cluster != c || (slice * dt.size()) % 16 != 0 || smem > b.dynamic_shared_max() as usize {
            let why = format!("{cluster} token tiles of {slice} channels, {smem} bytes each");
            return Err(ctx.refused(Stage::Static, b.entry(), why));
        }
        args.pad = (slice / b.v()) as u32;
        let grid = (t * cluster) as u32;
        return Ok(Some(Launch::new(b, grid, b.threads(), smem as u32, &args)));
    }
    let smem = (c * 4) as u32 + b.func.static_shared_bytes;
    let ctas = ctx.sm_count * resident_ctas(b.func.registers, b.threads(), smem);
    let grid = (t as u32).min(ctas);
    Ok(Some(Launch::new(b, grid, b.threads(), (c * 4) as u32, &args)))
}

/// Dynamic shared memory of the one-token kernels (`static_cl`, `static_mma`): a[C] (f32), gamma
/// (C f32) where the kernel stages it, and the token's n rows of C (storage dtype), each followed
/// by `row_pad` bytes.
pub(crate) fn tile_bytes(row: &dyn Row, c: usize, n: usize, dt: Dtype) -> usize {
    let m = c / row.v();
    let gamma = if row.has(Trait::GammaInShared) { c * 4 } else { 0 };
    m * row.v() * 4 + gamma + n * (m * row.v() * dt.size() + row.row_pad())
}

/// Dynamic shared memory of the `static_pr` token ring: a[C] (f32) and [`STATIC_PR_STAGES`]
/// token tiles of n rows of C (storage dtype).
pub(crate) fn token_ring_bytes(row: &dyn Row, c: usize, n: usize, dt: Dtype) -> usize {
    (c / row.v()) * row.v() * (4 + STATIC_PR_STAGES * n * dt.size())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::launch::assert_c_range_is_what_fits;

    /// The catalogue's C range of every `static_pr` kernel is exactly what its ring allows: at
    /// `c.max` the ring fits, 8 channels more it does not.
    #[test]
    fn token_ring_c_range_is_what_the_launch_accepts() {
        let fits = |row: &mhc_loader::Variant, n: usize, dtype: Dtype, c: usize| {
            token_ring_bytes(row, c, n, dtype) <= row.dynamic_shared_max() as usize
        };
        let seen = assert_c_range_is_what_fits(|v| v.has(Trait::TokenRing), fits);
        assert_eq!(seen, 8, "bf16 and f32, n = 1, 2, 4, 8");
    }

    /// The same for the one-token kernels (`static_cl`, `static_mma`) and their tile.
    #[test]
    fn token_tile_c_range_is_what_the_launch_accepts() {
        // As the launch: C splits into `cluster` slices of whole 8-channel tiles, and the tile fits.
        let fits = |row: &mhc_loader::Variant, n: usize, dtype: Dtype, c: usize| {
            let cluster = row.cluster() as usize;
            c % (8 * cluster) == 0 && tile_bytes(row, c / cluster, n, dtype) <= row.dynamic_shared_max() as usize
        };
        let one_token = |v: &mhc_loader::Variant| {
            v.entry.stage == "static" && v.has(Trait::TileInShared) && !v.has(Trait::TokenRing)
        };
        let seen = assert_c_range_is_what_fits(one_token, fits);
        assert_eq!(seen, 14, "static_cl: bf16 and f32, n = 1, 2, 4, 8; static_mma(_cl2, _cl4): bf16, n = 16, 32");
    }
}
