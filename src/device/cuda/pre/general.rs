//! The general `pre` kernel (asm/ptx/sm90/pre.ptx, entries `mhc_pre_sm90_bf16` / `_f32`, and
//! `mhc_post_pre_sm90_*` for the fused producer of `post_pre`): every configuration, in one
//! launch. Two launch shapes, chosen per call from T:
//! - **decode** (T <= [`DECODE_MAX_TOKENS`]): the `n*C` reduction is split over `splits` CTAs
//!   per 32-token tile so many SMs pull `phi` and `x`; each CTA writes its partial sums to the
//!   workspace; the last CTA to arrive (atomic counter) sums the partials in split order
//!   (deterministic), computes the coefficients and releases them; the CTAs then claim tokens
//!   for the pre-mix. The last CTA to leave resets the counters, so the workspace is reusable.
//! - **prefill** (larger T): one CTA per 32-token tile over the whole reduction (tensor cores:
//!   bf16 `mma.sync` with `phi` split in bf16 hi + lo for bf16 storage, 3xTF32 for f32 storage);
//!   up to `sms / tiles` CTAs per tile while the grid would leave SMs idle, the tile's pre-mix
//!   then shared by all of them or done by the last one ([`default_variant`]).
//!
//! At n >= 8 (more than one group of 32 logits) the launches also slice the logit groups over
//! the CTAs of each K split while SMs would idle ([`LaunchShape`]: n = 32 T = 16 ran one CTA per
//! tile for 4.9 ms, 134 us with 132 CTAs). The K loop variant (general / fast) and prefetching
//! are chosen per launch by [`default_variant`] from measurements (docs/kernels/pre.md).

use super::{PostIn, PreCall};
use crate::config::{Config, Dtype};
use crate::device::cuda::abi::PreArgs;
pub use crate::device::cuda::abi::TILE_TOKENS;
pub(crate) use crate::device::cuda::abi::{
    CTA_STEP, FLAG_DBG_NO_K, FLAG_DBG_NO_MIX, FLAG_EARLY_PARAMS, FLAG_FAST_K, FLAG_GROUPS_SHIFT, FLAG_POST,
    FLAG_POST_BATCH, FLAG_PREFETCH, FLAG_SOLO,
};
use crate::device::cuda::launch::{Launch, Row};
use crate::error::{Error, Result};

/// The tuning `pre` launches with (measured on H200; docs/kernels/pre.md). bf16: the
/// latency-bound launches (decode, and split prefill tiles, where all CTAs of a tile share its
/// pre-mix: T = 1024 57.3 us against 61.8 with one CTA mixing, C = 7168 73.6 against 92.9)
/// take the fast K loop with prefetch; one CTA per tile (T >= 4096 at C = 4096) runs the
/// general loop without prefetch (the fast loop measured ~1 % slower and prefetch 3-12 % slower
/// there: the loop is bound by memory, not by issue). f32 (n <= 4): prefetch (T = 8192 476 -> 447
/// us).
/// n >= 8 (H100, `bench_pre_wide_tuning`, bf16 C = 1280, us): prefetch off everywhere (n = 32
/// T = 64 / 256 / 1024 229 / 508 / 1985 -> 208 / 425 / 1417: the hints only add traffic beside
/// a phi stream of megabytes); split prefill tiles pre-mixed by all their CTAs up to
/// [`WIDE_CLAIM_MAX_TOKENS`] (T = 256: 424.7 claim vs 445.7 alone), by the last one above
/// (T = 1024: 1417 alone vs 1435; n = 8 67.0 vs 76.4).
fn default_variant(dt: Dtype, n: usize, t: usize, splits: usize) -> PreVariant {
    let split_prefill = splits > 1 && t > DECODE_MAX_TOKENS;
    if dt == Dtype::Bf16 && n > 4 {
        return PreVariant { claim: split_prefill && t <= WIDE_CLAIM_MAX_TOKENS, ..Default::default() };
    }
    if dt == Dtype::Bf16 {
        let latency = t <= DECODE_MAX_TOKENS || split_prefill;
        PreVariant { prefetch: latency, fast_k: latency, claim: split_prefill, ..Default::default() }
    } else {
        PreVariant { prefetch: n <= 4, ..Default::default() }
    }
}

/// The K-loop variant a launch of `splits` CTAs a tile takes without a forced one: the fused
/// `post_pre` entry (`post`) has neither the fast loop nor prefetch, and its split prefill tiles
/// stay with the last CTA mixing alone, as measured.
fn launch_variant(dt: Dtype, n: usize, t: usize, splits: usize, post: bool) -> PreVariant {
    if post {
        PreVariant::default()
    } else {
        default_variant(dt, n, t, splits)
    }
}

/// Whether the last CTA of a split prefill tile mixes it alone (`FLAG_SOLO`) rather than every
/// CTA of the tile claiming tokens to mix.
fn mixes_alone(t: usize, splits: usize, v: &PreVariant) -> bool {
    splits > 1 && t > DECODE_MAX_TOKENS && !v.claim
}

/// Largest T whose split prefill tiles (n >= 8, bf16) are pre-mixed by all their CTAs.
const WIDE_CLAIM_MAX_TOKENS: usize = 512;

/// Tuning of one launch of the general `pre` kernel ([`PreKernel::General`]; benchmarks and
/// time attribution).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PreVariant {
    /// Leave out the projection's K loop (the logits are then zeros).
    pub skip_k: bool,
    /// Leave out the pre-mix (`a` is not written).
    pub skip_mix: bool,
    /// Prefetch x / phi ahead of the K loop's loads ([`FLAG_PREFETCH`]).
    pub prefetch: bool,
    /// The fast K loop where it applies ([`FLAG_FAST_K`]).
    pub fast_k: bool,
    /// Prefill with a split tile (T > 64, the grid would leave SMs idle): every CTA of the tile
    /// waits for the coefficients and claims tokens for the pre-mix (the decode scheme), instead
    /// of the last one mixing the tile alone (`FLAG_SOLO`).
    pub claim: bool,
}

/// Largest T served by the split (decode) shape.
pub const DECODE_MAX_TOKENS: usize = 64;
/// Most CTAs one tile's reduction is split over.
pub const SPLIT_MAX: usize = 128;
/// The split is sized so the last CTA sums at most this many bytes of partials (it reads them
/// alone; more would cost more than the extra parallelism gains).
const PARTIAL_BYTES_TARGET: usize = 64 * 1024;

/// Logit row stride: M rounded up to a multiple of 32.
pub(crate) fn ldp(cfg: &Config) -> usize {
    cfg.m().div_ceil(32) * 32
}

/// Length of the j-space (channel blocks of 32, each for every stream).
pub(crate) fn jlen(cfg: &Config) -> usize {
    cfg.n * cfg.c.div_ceil(32) * 32
}

/// The most CTAs a tile's reduction may be split over for this configuration (the heuristic's
/// value at one token; the workspace holds this many partial blocks per tile).
pub(crate) fn split_cap(cfg: &Config) -> usize {
    let blocks = jlen(cfg).div_ceil(CTA_STEP);
    (PARTIAL_BYTES_TARGET / (ldp(cfg) * 4)).clamp(1, SPLIT_MAX).min(blocks)
}

/// Partial blocks of the split prefill shape over all tiles (when the logits fit one group,
/// n <= 4): each CTA of a tile reduces a part of K, so several SMs pull a tile at once and the
/// tile's re-read for the pre-mix finds it in L2. Used only while the grid would otherwise
/// leave SMs idle, up to `sms / tiles` CTAs per tile (measured on H200, docs/kernels/pre.md:
/// T = 256 91 -> 59 us, T = 1024 100 -> 69 us with 4 per tile; at T = 8192, 4 splits cost
/// 253 -> 311 us).
pub(crate) const PREFILL_SPLIT_BLOCKS: usize = 256;
/// Tiles up to which the prefill shape splits.
const PREFILL_SPLIT_TILES: usize = 64;

/// Most CTAs per tile of the split prefill shape for `tiles` tiles.
pub(crate) fn prefill_split(cfg: &Config, tiles: usize) -> usize {
    if ldp(cfg) == 32 {
        (PREFILL_SPLIT_BLOCKS / tiles.max(1)).clamp(1, SPLIT_MAX).min(jlen(cfg).div_ceil(CTA_STEP))
    } else {
        1
    }
}

/// How one launch of the general kernel spreads each 32-token tile over CTAs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LaunchShape {
    /// CTAs per tile: `ksplits * groups`.
    pub ctas: usize,
    /// K splits: split s reduces j-space elements `[s * kslice, (s + 1) * kslice)` and writes its
    /// own partial block.
    pub ksplits: usize,
    pub kslice: usize,
    /// Logit-group slices (n >= 8): the CTAs of one K split share its 32-logit groups, each
    /// computing `ceil(groups of the configuration / groups)` of them (none is left empty).
    pub groups: usize,
}

/// The most bytes of partial sums the last CTA of a tile reads when logit groups are sliced
/// (n >= 8): there one CTA's K loop pulls megabytes of phi, so more parallelism wins over a
/// longer reduction (n = 32, T = 16: 1 CTA per tile, 4.85 ms; 15 K splits, 768 us).
const WIDE_PARTIAL_BYTES: usize = 1 << 20;

/// The launch shape for `t` tokens on a GPU of `sms` multiprocessors; `split_target` overrides
/// the heuristic (benchmarks; K splits only), clamped to what the workspace holds ([`split_cap`]
/// for decode, [`prefill_split`] for prefill). `groups_ok`: the launch may slice logit groups
/// (`pre`; `post_pre` stores x' from every CTA of a K split, so it keeps one CTA per split).
pub(crate) fn launch_shape(
    cfg: &Config,
    t: usize,
    split_target: Option<usize>,
    sms: usize,
    groups_ok: bool,
) -> LaunchShape {
    let blocks = jlen(cfg).div_ceil(CTA_STEP);
    let ngr = ldp(cfg) / 32;
    let tiles = t.div_ceil(TILE_TOKENS);
    let few_tiles = t <= DECODE_MAX_TOKENS || tiles <= PREFILL_SPLIT_TILES;
    if groups_ok && split_target.is_none() && ngr > 1 && few_tiles && tiles * 2 <= sms {
        return wide_shape(cfg, t, sms, blocks, ngr);
    }
    let one = |ksplits: usize, kslice: usize| LaunchShape { ctas: ksplits, ksplits, kslice, groups: 1 };
    if blocks < 2 {
        return one(1, blocks * CTA_STEP);
    }
    let target = if t > DECODE_MAX_TOKENS {
        let cap = if tiles <= PREFILL_SPLIT_TILES { prefill_split(cfg, tiles) } else { 1 };
        let auto = if tiles * 2 <= sms { (sms / tiles).max(1) } else { 1 };
        split_target.unwrap_or(auto).clamp(1, cap)
    } else {
        let rows = t.min(TILE_TOKENS);
        let by_bytes = PARTIAL_BYTES_TARGET / (rows * ldp(cfg) * 4);
        split_target.unwrap_or(by_bytes).clamp(1, split_cap(cfg))
    };
    let steps = blocks.div_ceil(target);
    one(blocks.div_ceil(steps), steps * CTA_STEP)
}

/// Partial blocks the prefill workspace holds for the wide shapes (n >= 8, T > 64): K splits
/// per tile are at most this over the tiles (n = 8, T = 256: 3 CTAs per tile without K splits
/// took 92 us on the H100).
pub(crate) const WIDE_PREFILL_BLOCKS: usize = 128;

/// n >= 8 while the grid would leave SMs idle: slice the logit groups and split K so that the
/// CTAs (at most `sms / tiles` per tile) each do the least work (groups x K steps); K splits
/// are bounded by the workspace's partial blocks and by [`WIDE_PARTIAL_BYTES`] (decode) or by
/// [`WIDE_PREFILL_BLOCKS`] (prefill). Ties go to fewer CTAs.
fn wide_shape(cfg: &Config, t: usize, sms: usize, blocks: usize, ngr: usize) -> LaunchShape {
    let tiles = t.div_ceil(TILE_TOKENS);
    let target = (sms / tiles).max(1);
    let rows = t.min(TILE_TOKENS);
    let ks_cap = if t > DECODE_MAX_TOKENS {
        (WIDE_PREFILL_BLOCKS / tiles).clamp(1, split_cap(cfg))
    } else {
        (WIDE_PARTIAL_BYTES / (rows * ldp(cfg) * 4)).clamp(1, split_cap(cfg))
    };
    let mut best: Option<(usize, LaunchShape)> = None;
    for per in 1..=ngr {
        let groups = ngr.div_ceil(per);
        if groups > target || ngr.div_ceil(groups) != per {
            continue;
        }
        let steps = blocks.div_ceil((target / groups).clamp(1, ks_cap));
        let ksplits = blocks.div_ceil(steps);
        let shape = LaunchShape { ctas: ksplits * groups, ksplits, kslice: steps * CTA_STEP, groups };
        let work = per * steps;
        if best.is_none_or(|(w, b)| work < w || (work == w && shape.ctas < b.ctas)) {
            best = Some((work, shape));
        }
    }
    best.map(|(_, s)| s).unwrap_or(LaunchShape { ctas: 1, ksplits: 1, kslice: blocks * CTA_STEP, groups: 1 })
}

/// The plan's launch of `t` tokens on `sms` SMs in words (`mhc inspect --explain`): the CTAs a
/// 32-token tile gets and why, and the K loop's variant; `post`: the fused `post_pre` entry.
pub(crate) fn account(cfg: &Config, dt: Dtype, t: usize, sms: usize, post: bool) -> String {
    let tiles = t.div_ceil(TILE_TOKENS);
    let shape = launch_shape(cfg, t, None, sms, !post);
    let why = if shape.groups > 1 {
        format!(
            "n >= 8 while SMs would idle: {} logit-group slices of {} groups of 32 logits, K in {} splits",
            shape.groups,
            (ldp(cfg) / 32).div_ceil(shape.groups),
            shape.ksplits
        )
    } else if shape.ctas == 1 {
        if t > DECODE_MAX_TOKENS && tiles * 2 > sms {
            "one CTA a tile: the tiles fill at least half the SMs".to_string()
        } else if t > DECODE_MAX_TOKENS && tiles > PREFILL_SPLIT_TILES {
            format!("one CTA a tile: more than {PREFILL_SPLIT_TILES} tiles")
        } else {
            "one CTA a tile".to_string()
        }
    } else if t <= DECODE_MAX_TOKENS {
        format!(
            "decode shape: K in {} splits, the last CTA reading at most {PARTIAL_BYTES_TARGET} bytes of partial sums",
            shape.ksplits
        )
    } else {
        format!(
            "split prefill: K in {} splits while the grid would leave SMs idle (at most {sms} SMs / {tiles} tiles)",
            shape.ksplits
        )
    };
    let v = launch_variant(dt, cfg.n, t, shape.ctas, post);
    let mix = if shape.ctas == 1 {
        "its CTA mixes the tile"
    } else if mixes_alone(t, shape.ctas, &v) {
        "the tile's last CTA mixes it alone"
    } else {
        "every CTA of a tile claims tokens to mix"
    };
    format!(
        "{tiles} tiles of {TILE_TOKENS} tokens x {} CTAs = {} CTAs ({why}; {} channels of K each); {} K loop, \
         prefetch {}; {mix}\n",
        shape.ctas,
        tiles.saturating_mul(shape.ctas),
        shape.kslice,
        if v.fast_k { "fast" } else { "general" },
        if v.prefetch { "on" } else { "off" },
    )
}

/// The general kernel's launch of `call` (its `pre` or `post_pre` row), for `pre` and the fused
/// `post_pre` (`post` = Some); `split_target` forces the CTAs per 32-token tile, `tuning` the
/// K-loop variant (`None`: the measured default).
pub(crate) fn launch(
    call: &PreCall<'_, '_>,
    post: Option<PostIn>,
    split_target: Option<usize>,
    tuning: Option<PreVariant>,
) -> Result<Launch> {
    let PreCall { ctx, b, lay, wsp, x, params, out, chk } = *call;
    let cfg = &ctx.cfg;
    let (n, c, k, m, dt) = (cfg.n, cfg.c, cfg.k(), cfg.m(), ctx.dtype);
    // (the K loop reads phi as it goes: nothing to load before the grid dependency)
    let (t, mut flags) = (chk.t, chk.flags & !FLAG_EARLY_PARAMS);
    let post = post.unwrap_or(PostIn { f: 0, f_stride: 0, h_post: 0, h_res: 0, x_out: 0, xo_stride: 0, batch: false });
    if post.x_out != 0 {
        flags |= FLAG_POST;
        if post.batch && n <= 4 && dt == Dtype::Bf16 {
            flags |= FLAG_POST_BATCH;
        }
    }
    let shape = launch_shape(cfg, t, split_target, ctx.sm_count as usize, post.x_out == 0);
    let splits = shape.ctas;
    let v = tuning.unwrap_or_else(|| launch_variant(dt, n, t, splits, post.x_out != 0));
    if mixes_alone(t, splits, &v) {
        flags |= FLAG_SOLO;
    }
    for (on, flag) in
        [(v.skip_k, FLAG_DBG_NO_K), (v.skip_mix, FLAG_DBG_NO_MIX), (v.prefetch, FLAG_PREFETCH), (v.fast_k, FLAG_FAST_K)]
    {
        if on {
            flags |= flag;
        }
    }
    let tiles = t.div_ceil(TILE_TOKENS);
    let grid = tiles
        .checked_mul(splits)
        .filter(|&g| g <= i32::MAX as usize)
        .ok_or_else(|| Error::shape("x", "fewer than 2^31 CTAs", t))?;
    let args = PreArgs {
        x: x.ptr,
        f: post.f,
        h_post_in: post.h_post,
        h_res_in: post.h_res,
        x_out: post.x_out,
        phi: params.phi.ptr,
        scale: params.scale.ptr,
        base: params.base.ptr,
        gamma_k: chk.gamma_k,
        gamma_f: chk.gamma_f,
        a: out.a.ptr,
        y: chk.y,
        h_pre: out.h_pre.ptr,
        h_post: out.h_post.ptr,
        h_res: out.h_res.ptr,
        inv_rms: out.inv_rms.ptr,
        ws_p: wsp + lay.p as u64,
        ws_ss: wsp + lay.ss as u64,
        ws_part: wsp + lay.part as u64,
        ws_cnt: wsp + lay.cnt as u64,
        tokens: t as u32,
        n: n as u32,
        c: c as u32,
        k: k as u32,
        m: m as u32,
        ldp: ldp(cfg) as u32,
        x_stride: x.layout.row_stride as u32,
        f_stride: post.f_stride as u32,
        xo_stride: post.xo_stride as u32,
        a_stride: out.a.layout.row_stride as u32,
        y_stride: chk.y_stride as u32,
        kslice: shape.kslice as u32,
        splits: splits as u32,
        iters: cfg.sinkhorn_iters,
        flags: flags | (shape.groups as u32) << FLAG_GROUPS_SHIFT,
        eps_norm: cfg.eps_norm as f32,
        eps_hc: cfg.eps_hc as f32,
        eps_f: cfg.eps_f as f32,
    };
    Ok(Launch::new(b, grid as u32, b.threads(), 0, &args))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_split_covers_the_reduction_once() {
        for (n, c) in [(4, 4096), (4, 7168), (1, 64), (2, 1280), (8, 1280), (32, 1280), (4, 72), (16, 16384)] {
            let cfg = Config::new(n, c);
            let j = jlen(&cfg);
            let ngr = ldp(&cfg) / 32;
            for t in [1, 2, 3, 16, 17, 33, 64, 65, 100, 256, 1000, 1600, 1920, 2048, 2049] {
                for groups_ok in [false, true] {
                    let sh = launch_shape(&cfg, t, None, 132, groups_ok);
                    let what = format!("n={n} c={c} t={t} groups_ok={groups_ok}: {sh:?}");
                    assert_eq!(sh.ctas, sh.ksplits * sh.groups, "{what}");
                    assert!((1..=SPLIT_MAX).contains(&sh.ksplits), "{what}");
                    assert_eq!(sh.kslice % CTA_STEP, 0);
                    // every j-space element is in exactly one K split's slice, none is empty
                    assert!(sh.ksplits * sh.kslice >= j, "{what}");
                    assert!((sh.ksplits - 1) * sh.kslice < j, "{what}: an empty split");
                    // every logit group in exactly one slice, none empty (the kernel's rule)
                    let per = ngr.div_ceil(sh.groups);
                    assert!(sh.groups == 1 || (groups_ok && ngr > 1), "{what}");
                    assert!((sh.groups - 1) * per < ngr && sh.groups * per >= ngr, "{what}");
                    let tiles = t.div_ceil(TILE_TOKENS);
                    if sh.groups > 1 {
                        assert!(tiles * sh.ctas <= 132, "{what}: more CTAs than SMs");
                    }
                    if t > DECODE_MAX_TOKENS {
                        if groups_ok && ngr > 1 {
                            assert!(tiles * sh.ksplits <= WIDE_PREFILL_BLOCKS.max(tiles), "{what}");
                        } else {
                            assert!(tiles * sh.ksplits <= PREFILL_SPLIT_BLOCKS.max(tiles), "{what}");
                        }
                    }
                    let lay = super::super::workspace::layout(&cfg, Dtype::Bf16, t);
                    assert!(lay.part >= tiles * 16, "counters");
                    if sh.ctas > 1 {
                        assert!(lay.part + tiles * sh.ksplits * (32 * ldp(&cfg) + 32) * 4 <= lay.p, "{what}");
                    }
                }
            }
        }
        // a plan's workspace (sized for its most tokens) holds the partial blocks of every
        // smaller launch too
        for (n, c) in [(4, 4096), (4, 7168), (8, 1280), (32, 1280), (2, 64)] {
            let cfg = Config::new(n, c);
            let block = (32 * ldp(&cfg) + 32) * 4;
            for max_t in [1, 16, 64, 65, 100, 1000, 1600, 2049, 8192] {
                let lay = super::super::workspace::layout(&cfg, Dtype::Bf16, max_t);
                for t in (1..=max_t).step_by(7).chain([max_t]) {
                    for groups_ok in [false, true] {
                        let sh = launch_shape(&cfg, t, None, 132, groups_ok);
                        if sh.ctas > 1 {
                            let need = t.div_ceil(TILE_TOKENS) * sh.ksplits * block;
                            assert!(lay.part + need <= lay.p, "n={n} c={c} max_t={max_t} t={t}: {sh:?}");
                        }
                    }
                }
            }
        }
        // n = 32: the wide shapes fill the GPU (the 1-CTA tile took 4.85 ms at T = 16)
        let cfg = Config::new(32, 1280);
        for t in [1, 16] {
            let sh = launch_shape(&cfg, t, None, 132, true);
            assert!(sh.ctas >= 100 && sh.groups > 1, "t={t}: {sh:?}");
        }
        // n <= 4 is untouched by groups_ok
        let cfg = Config::new(4, 4096);
        for t in [1, 16, 64, 1000] {
            assert_eq!(launch_shape(&cfg, t, None, 132, true), launch_shape(&cfg, t, None, 132, false));
        }
    }

    #[test]
    fn default_tuning_follows_the_measurements() {
        // bf16: one CTA per tile (memory-bound) -> general loop, no prefetch, no claim
        let v = default_variant(Dtype::Bf16, 4, 8192, 1);
        assert!(!v.fast_k && !v.prefetch && !v.claim && !v.skip_k && !v.skip_mix);
        // bf16: split prefill tile -> all its CTAs pre-mix; latency-bound: fast loop, prefetch
        let v = default_variant(Dtype::Bf16, 4, 1024, 4);
        assert!(v.fast_k && v.prefetch && v.claim);
        // bf16 decode: fast loop and prefetch, the decode scheme (claim is for prefill only)
        let v = default_variant(Dtype::Bf16, 4, 16, 32);
        assert!(v.fast_k && v.prefetch && !v.claim);
        // bf16 n >= 8: no prefetch; claim at few tiles only
        let v = default_variant(Dtype::Bf16, 32, 16, 132);
        assert!(!v.prefetch && !v.fast_k && !v.claim);
        assert!(default_variant(Dtype::Bf16, 8, 256, 15).claim && !default_variant(Dtype::Bf16, 8, 1024, 4).claim);
        // f32: prefetch for n <= 4 only
        assert!(default_variant(Dtype::F32, 4, 8192, 1).prefetch);
        assert!(!default_variant(Dtype::F32, 32, 1024, 1).prefetch);
    }

    #[test]
    fn args_layout_matches_the_ptx_offsets() {
        // pre.ptx loads 20 pointers at 0..160, 15 u32 at 160..220, 3 f32 at 220..232.
        let a = PreArgs::default();
        let base = &a as *const PreArgs as usize;
        assert_eq!(&a.ws_cnt as *const u64 as usize - base, 152);
        assert_eq!(&a.tokens as *const u32 as usize - base, 160);
        assert_eq!(&a.flags as *const u32 as usize - base, 216);
        assert_eq!(&a.eps_f as *const f32 as usize - base, 228);
    }
}
