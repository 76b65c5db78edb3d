//! `pre` for n = 8 / 16 / 32 as a tiled GEMM (asm/ptx/sm90/pre_gemm.ptx, entries
//! `mhc_pre_gemm_bf16_n{8,16,32}`): bf16 storage, no gamma_k / gamma_f. At n = 32 the mixing
//! projection is [T x 40960] x [40960 x 1088] (C = 1280): tensor-core work that the general
//! kernel's 32 x 32 tiles turn into 68 GB of L2 traffic at T = 8192. A CTA owns a
//! [`GEMM_TILE_TOKENS`]-token x [`GEMM_TILE_LOGITS`]-logit tile and a slice of K (the host splits
//! K while the grid would leave SMs idle), streams x and phi through a shared-memory ring into
//! `wgmma` (phi split once into bf16 hi + lo) and writes partial logits to the workspace. The last
//! CTA of a token tile publishes it; each of its [`GEMM_MIX_PARTS`] parts is finished by the first
//! to claim it, the part's mixer CTA (after the GEMM grid) or that last CTA: the K splits summed in
//! order, the coefficients and Sinkhorns, the mix of `a`. The catalogue gives it T >= 256 (n = 8
//! and 16) / 33 (n = 32) without gamma_k / gamma_f (`gemm_min_tokens` in asm/gen/pre_gemm.py,
//! with the measurements against the general kernel); the general kernel serves the rest.
use super::{PreCall, FLAG_PAPER};
use crate::device::cuda::abi::PreGemmArgs;
pub use crate::device::cuda::abi::{
    logit_tiles, GEMM_MAX_SPLITS, GEMM_MIX_PARTS, GEMM_NS, GEMM_STAGE_K, GEMM_THREADS, GEMM_TILE_LOGITS,
    GEMM_TILE_TOKENS,
};
use crate::device::cuda::launch::{Launch, Row};
use crate::error::{Error, Result};

/// Logit tiles of partial slabs the workspace holds at least: 96 slabs of n = 32's 9 logit tiles
/// (C = 1280: 96 let T = 8192 split K three ways, 5434 against 5109 us on the H100, in 113 MB of
/// workspace instead of 75), the same bytes at every n (n = 8: 864 slabs of one logit tile).
pub const GEMM_SLAB_LOGIT_TILES: usize = 864;

/// Partial slabs (a K split of a token tile) the workspace holds for `tiles` token tiles at n:
/// one a tile, and room for K splits up to [`GEMM_SLAB_LOGIT_TILES`] (at most
/// [`GEMM_MAX_SPLITS`] a tile).
pub(crate) fn gemm_slabs(n: usize, tiles: usize) -> usize {
    tiles.max((GEMM_SLAB_LOGIT_TILES / logit_tiles(n)).min(tiles * GEMM_MAX_SPLITS))
}

/// Measured cost model of one launch, in microseconds (H200, C = 1280; the fit is in
/// docs/kernels/pre.md, "K split"). A CTA streams one ring stage of [`GEMM_STAGE_K`] channels of
/// its tile in about [`STAGE_US`], one CTA per SM, so the GEMM takes waves x stages a split x
/// [`STAGE_US`]. Each further split costs about [`SLAB_US`] per logit tile: its CTAs write one
/// more partial slab of the token tile's logits, and the finisher of every token reads it back.
/// The launch's fixed costs (its start, the coefficients and Sinkhorns, the mix of `a`) do not
/// depend on the split and are left out, so an estimate is what the split changes, not the
/// launch's time.
const STAGE_US: f64 = 2.0;
const SLAB_US: f64 = 0.5;

/// One K split count the cost model weighs ([`split_estimates`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SplitEstimate {
    /// The splits launched (fewer than asked where every split must own a ring stage).
    pub splits: usize,
    /// Ring stages of [`GEMM_STAGE_K`] channels each split streams.
    pub stages: usize,
    /// Waves of CTAs over the SMs, one CTA per SM.
    pub waves: usize,
    /// The model's estimate, microseconds ([`STAGE_US`], [`SLAB_US`]).
    pub cost: f64,
}

/// The cost model's estimate of every K split count 1..=[`GEMM_MAX_SPLITS`] of a launch of `t`
/// tokens on `sms` SMs that the workspace holds (waves x stages per split, plus the partial slabs
/// written and read back), in the order asked.
pub(crate) fn split_estimates(n: usize, c: usize, t: usize, sms: usize) -> Vec<SplitEstimate> {
    let tiles = t.div_ceil(GEMM_TILE_TOKENS).max(1);
    let stages = n * c / GEMM_STAGE_K;
    let ctas = tiles * logit_tiles(n);
    let slabs = gemm_slabs(n, tiles);
    let mut out = Vec::new();
    for s in 1..=GEMM_MAX_SPLITS.min(stages.max(1)) {
        if tiles * s > slabs {
            break;
        }
        let (splits, per) = split_stages(stages, s);
        let waves = (ctas * splits).div_ceil(sms.max(1));
        let cost = waves as f64 * per as f64 * STAGE_US + (splits * logit_tiles(n)) as f64 * SLAB_US;
        out.push(SplitEstimate { splits, stages: per, waves, cost });
    }
    out
}

/// The split count the model chooses of `estimates`: the first with the shortest time (1 if
/// there are none).
fn cheapest(estimates: &[SplitEstimate]) -> usize {
    let mut best = (f64::MAX, 1);
    for e in estimates {
        if e.cost < best.0 {
            best = (e.cost, e.splits);
        }
    }
    best.1
}

/// K splits of a launch of `t` tokens on `sms` SMs (one CTA per SM): the cheapest of
/// [`split_estimates`].
pub(crate) fn gemm_splits(n: usize, c: usize, t: usize, sms: usize) -> usize {
    cheapest(&split_estimates(n, c, t, sms))
}

/// CTAs of a launch of `t` tokens with K in `splits`: every (token tile, logit tile, split) a
/// GEMM CTA, then [`GEMM_MIX_PARTS`] mixer CTAs a token tile; `None` from 2^31 CTAs.
pub(crate) fn grid(n: usize, t: usize, splits: usize) -> Option<usize> {
    let tiles = t.div_ceil(GEMM_TILE_TOKENS);
    (tiles * logit_tiles(n))
        .checked_mul(splits)
        .and_then(|g| g.checked_add(tiles * GEMM_MIX_PARTS))
        .filter(|&g| g <= i32::MAX as usize)
}

/// The plan's launch of `t` tokens on `sms` SMs in words, with the cost model's estimate of
/// every split count (`mhc inspect --explain`).
pub(crate) fn account(n: usize, c: usize, t: usize, sms: usize) -> String {
    let tiles = t.div_ceil(GEMM_TILE_TOKENS);
    let stages = n * c / GEMM_STAGE_K;
    let estimates = split_estimates(n, c, t, sms);
    let chosen = split_stages(stages, cheapest(&estimates));
    let grid = grid(n, t, chosen.0).map_or("2^31 or more".into(), |g| g.to_string());
    let mut out = format!(
        "{tiles} token tiles of {GEMM_TILE_TOKENS} x {} logit tiles of {GEMM_TILE_LOGITS}; K = {} in {stages} ring \
         stages of {GEMM_STAGE_K}, split {} ways ({} stages each); {grid} CTAs of {GEMM_THREADS} threads \
         ({} GEMM, then {GEMM_MIX_PARTS} mixers a token tile)\n  K splits by the cost model \
         (us: waves x stages a split x {STAGE_US} + splits x logit tiles x {SLAB_US}; the first lowest wins; \
         at most {GEMM_MAX_SPLITS}, and {} slabs in the workspace for {tiles} tiles):\n",
        logit_tiles(n),
        n * c,
        chosen.0,
        chosen.1,
        (tiles * logit_tiles(n)).saturating_mul(chosen.0),
        gemm_slabs(n, tiles.max(1)),
    );
    for e in &estimates {
        let mark = if (e.splits, e.stages) == chosen { "  <- chosen" } else { "" };
        out +=
            &format!("    {:2} splits x {:3} stages, {:3} waves: {:9.1}{mark}\n", e.splits, e.stages, e.waves, e.cost);
    }
    out
}

/// `(splits, stages per split)` for `want` splits of `stages` ring stages: every split owns at
/// least one stage (9 stages in 8 splits are 5 splits of 2 and 1).
pub(crate) fn split_stages(stages: usize, want: usize) -> (usize, usize) {
    let per = stages.div_ceil(want.max(1));
    (stages.div_ceil(per), per)
}

/// The GEMM kernel's launch of `call` (its row), its K split `forced` ways where given (tests and
/// benchmarks).
pub(crate) fn launch(call: &PreCall<'_, '_>, forced: Option<usize>) -> Result<Launch> {
    let PreCall { ctx, b, lay, wsp, x, params, out, chk } = *call;
    let cfg = &ctx.cfg;
    let t = chk.t;
    // The kernel indexes h_res (T x n^2 words) in 32 bits.
    if t.saturating_mul(cfg.n * cfg.n) > u32::MAX as usize {
        return Err(Error::shape("x", "T x n^2 below 2^32 (GEMM kernel)", t));
    }
    let tiles = t.div_ceil(GEMM_TILE_TOKENS);
    let stages = cfg.k() / GEMM_STAGE_K;
    let want = forced.unwrap_or_else(|| gemm_splits(cfg.n, cfg.c, t, ctx.sm_count as usize));
    let (splits, kstages) = split_stages(stages, want);
    if !(1..=GEMM_MAX_SPLITS).contains(&want) || tiles.checked_mul(splits).is_none_or(|s| s > lay.gemm.slabs) {
        return Err(Error::Config {
            what: "splits",
            reason: format!(
                "{want} K splits of {tiles} token tiles: 1..={GEMM_MAX_SPLITS}, at most {} slabs in the workspace",
                lay.gemm.slabs
            ),
        });
    }
    let grid = grid(cfg.n, t, splits).ok_or_else(|| Error::shape("x", "fewer than 2^31 CTAs", t))?;
    let lay = lay.gemm;
    let args = PreGemmArgs {
        x: x.ptr,
        phi: params.phi.ptr,
        scale: params.scale.ptr,
        base: params.base.ptr,
        a: out.a.ptr,
        h_pre: out.h_pre.ptr,
        h_post: out.h_post.ptr,
        h_res: out.h_res.ptr,
        inv_rms: out.inv_rms.ptr,
        ws_cnt: wsp + lay.cnt as u64,
        ws_ss: wsp + lay.ss as u64,
        ws_p: wsp + lay.p as u64,
        ws_sync: wsp + lay.sync as u64,
        tokens: t as u32,
        c: cfg.c as u32,
        x_stride: x.layout.row_stride as u32,
        a_stride: out.a.layout.row_stride as u32,
        ksplit: splits as u32,
        kstages: kstages as u32,
        iters: cfg.sinkhorn_iters,
        flags: chk.flags & FLAG_PAPER,
        eps_norm: cfg.eps_norm as f32,
        eps_hc: cfg.eps_hc as f32,
    };
    Ok(Launch::new(b, grid as u32, b.threads(), b.dynamic_shared_max(), &args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::abi::GEMM_SHARED;

    #[test]
    fn splits_fill_the_device_and_stay_in_the_workspace() {
        // n = 32, C = 1280 on 132 SMs: 9 logit tiles per token tile.
        assert!(gemm_splits(32, 1280, 8192, 132) <= 3, "T = 8192: 288 CTAs already, 96 slabs");
        assert_eq!(gemm_splits(32, 1280, 1, 132), 14, "T = 1: 9 x 14 CTAs, one wave");
        for t in (1..30_000usize).step_by(97) {
            let tiles = t.div_ceil(GEMM_TILE_TOKENS);
            let s = gemm_splits(32, 1280, t, 132);
            assert!((1..=GEMM_MAX_SPLITS).contains(&s));
            assert!(tiles * s <= gemm_slabs(32, tiles), "T {t} splits {s}");
            assert_eq!(gemm_slabs(32, tiles), tiles.max(96.min(tiles * GEMM_MAX_SPLITS)));
        }
        // Every split owns at least one stage, and together they own every stage once.
        for (n, c) in [(8, 8), (16, 8), (32, 8), (8, 72), (16, 72), (32, 1280), (32, 64)] {
            let stages = n * c / GEMM_STAGE_K;
            for t in [1, 130, 300, 8192] {
                let (s, per) = split_stages(stages, gemm_splits(n, c, t, 132));
                assert!((s - 1) * per < stages && s * per >= stages, "n {n} C {c}: {s} x {per} of {stages}");
            }
        }
        assert_eq!(split_stages(9, 8), (5, 2));
    }

    #[test]
    fn the_model_picks_the_measured_best_splits() {
        // H200 (132 SMs), C = 1280: the split count of each shape that took least in the rotated
        // sweep (docs/benchmarks/records/2026-11-30-h200-gemm-splits.txt), or one within its noise.
        let best = [
            (16, 256, 16),
            (16, 512, 16),
            (16, 1024, 11),
            (16, 8192, 4),
            (8, 256, 16),
            (8, 4096, 8),
            (8, 8192, 4),
            (32, 128, 14),
            (32, 512, 7),
            (32, 8192, 3),
        ];
        for (n, t, splits) in best {
            assert_eq!(gemm_splits(n, 1280, t, 132), splits, "n {n} T {t}");
        }
    }

    #[test]
    fn the_ring_fits_and_the_workspace_holds_every_slab() {
        assert!(GEMM_SHARED as usize <= 227 * 1024 - 128);
        let cfg = crate::Config::new(32, 1280);
        let gemm_ws = super::super::workspace::gemm_ws;
        let w = gemm_ws(&cfg, 8192, 1000);
        assert_eq!(w.sync, 1024);
        assert_eq!(w.cnt, 1024 + 1280, "64 bytes + 32 tiles x 9 words, rounded to 256");
        assert_eq!((w.slabs, w.total - w.p), (96, 96 * GEMM_TILE_TOKENS * 9 * 128 * 4));
        let w1 = gemm_ws(&cfg, 1, 0);
        assert_eq!(w1.total - w1.p, 16 * GEMM_TILE_TOKENS * 9 * 128 * 4, "one tile, 16 splits");
        // n = 8: one logit tile, the same bytes in 9 times the slabs (T = 8192: 32 tiles x 16).
        let w8 = gemm_ws(&crate::Config::new(8, 1280), 8192, 0);
        assert_eq!((w8.slabs, w8.total - w8.p), (512, 512 * GEMM_TILE_TOKENS * 128 * 4));
    }
}
