//! `pre` for few tokens on clusters that split the logits (asm/ptx/sm90/pre_lc.ptx, entries
//! `mhc_pre_lc_sm90_{bf16,f32}` to [`LC_FMA_MAX_TOKENS`], the bf16 wide entry
//! `mhc_pre_lcw_sm90_bf16` above, to [`LC_WIDE_MAX_TOKENS`], which projects on the tensor cores,
//! and the long wide entry `mhc_pre_lcw128_sm90_bf16` above that, to [`LC_MAX_TOKENS`] and
//! C = 6144): n = 4, C a multiple of 128 up to 8192, no gamma_f. The grid is clusters of
//! [`LC_CLUSTER`] CTAs: first one per [`res_group`] tokens that computes their 16 h_res logits and
//! runs their Sinkhorns, then one per [`pre_group`] tokens for their 8 h_pre / h_post logits and
//! the mix (a token's h_pre
//! logits cost half its h_res logits). CTA r of a cluster owns channels `[r C/16, (r+1) C/16)`
//! of every stream; the CTAs' partial rows meet through distributed shared memory, so no CTA
//! waits for another cluster, nothing goes through the workspace, and the grid needs no
//! co-residency beyond each cluster's own (the hardware's guarantee). Its `post_pre` entries
//! (`mhc_post_pre_lc_sm90_*`, and the wide `mhc_post_pre_lcw_sm90_bf16` up to C =
//! [`LC_WIDE_POST_MAX_C`](crate::device::cuda::abi::LC_WIDE_POST_MAX_C)) also bring f's slice and
//! layer l's coefficients with the loads and compute x' = post(x) over the slice with the post
//! kernel's f32 operations in its order (the `h_pre` clusters store it to `x_out`) before the
//! projection: the outputs of `post` then `pre`, bit for bit, in one launch.

use super::PreCall;
use crate::config::Dtype;
use crate::device::cuda::abi::{
    PreDecodeArgs, LC_LONG_PRE_TOKENS, LC_LONG_RES_TOKENS, LC_LONG_SHARED, LC_POST_SHARED_PER_CHANNEL_BF16,
    LC_POST_SHARED_PER_CHANNEL_F32, LC_SHARED_PER_CHANNEL_BF16, LC_SHARED_PER_CHANNEL_F32, LC_WIDE_POST_SHARED,
    LC_WIDE_PRE_ABOVE, LC_WIDE_PRE_TOKENS, LC_WIDE_SHARED,
};
pub use crate::device::cuda::abi::{
    LC_CLUSTER, LC_FMA_MAX_TOKENS, LC_MAX_TOKENS, LC_NARROW_MAX_TOKENS, LC_PRE_TOKENS, LC_RES_TOKENS,
    LC_WIDE_MAX_TOKENS, LC_WIDE_TOKENS,
};

/// Tokens an h_pre cluster serves at `t` tokens (the kernel's rule): [`LC_RES_TOKENS`] up to
/// [`LC_NARROW_MAX_TOKENS`] (three clusters of each role fit the six resident ones, and the
/// h_pre clusters end sooner with fewer tokens), [`LC_PRE_TOKENS`] up to [`LC_FMA_MAX_TOKENS`]
/// (T = 16: 4 + 2 clusters), then the wide groups: [`LC_WIDE_TOKENS`], and
/// [`LC_WIDE_PRE_TOKENS`] above [`LC_WIDE_PRE_ABOVE`] (T = 64: 4 + 2 clusters; 4 + 4 would not
/// all be resident at once), and [`LC_LONG_PRE_TOKENS`] above [`LC_WIDE_MAX_TOKENS`] (the long
/// wide entry; T = 128: 4 + 3 clusters).
pub(crate) fn pre_group(t: usize) -> usize {
    if t <= LC_NARROW_MAX_TOKENS {
        LC_RES_TOKENS
    } else if t <= LC_FMA_MAX_TOKENS {
        LC_PRE_TOKENS
    } else if t > LC_WIDE_MAX_TOKENS {
        LC_LONG_PRE_TOKENS
    } else if t > LC_WIDE_PRE_ABOVE {
        LC_WIDE_PRE_TOKENS
    } else {
        LC_WIDE_TOKENS
    }
}

/// Tokens an h_res cluster serves at `t` tokens: [`LC_RES_TOKENS`] up to [`LC_FMA_MAX_TOKENS`],
/// [`LC_WIDE_TOKENS`] to [`LC_WIDE_MAX_TOKENS`], [`LC_LONG_RES_TOKENS`] above.
pub(crate) fn res_group(t: usize) -> usize {
    if t <= LC_FMA_MAX_TOKENS {
        LC_RES_TOKENS
    } else if t <= LC_WIDE_MAX_TOKENS {
        LC_WIDE_TOKENS
    } else {
        LC_LONG_RES_TOKENS
    }
}
use crate::device::cuda::launch::Row;
use crate::error::Result;
use crate::Stage;

/// `(grid CTAs, channels per CTA, dynamic shared bytes)` of a launch at `t` tokens (1..=
/// [`LC_MAX_TOKENS`]) of C = `c` (a multiple of 8 x [`LC_CLUSTER`]) in `dtype`; `post`: the
/// `post_pre` entries (f's slices too). Above [`LC_FMA_MAX_TOKENS`] the launch is a wide entry's
/// (`mhc_pre_lcw_sm90_bf16`, `mhc_post_pre_lcw_sm90_bf16`), above [`LC_WIDE_MAX_TOKENS`] the long
/// wide entry's (`mhc_pre_lcw128_sm90_bf16`).
pub(crate) fn shape(c: usize, t: usize, dtype: Dtype, post: bool) -> (u32, usize, u32) {
    let cluster = LC_CLUSTER as usize;
    let cpc = c / cluster;
    let pre = pre_group(t);
    let clusters = t.div_ceil(res_group(t)) + t.div_ceil(pre);
    let shared = if t > LC_WIDE_MAX_TOKENS {
        // The long wide entry (`pre` only; `args` refuses the others past their rows' T).
        let [res, pre] = LC_LONG_SHARED;
        (res.0 * cpc + res.1).max(pre.0 * cpc + pre.1)
    } else if t > LC_FMA_MAX_TOKENS {
        // The wide groups (the bf16 entries; `args` refuses the others past their rows' T): the
        // larger role's layout.
        let [res, pre16, pre32] = if post { LC_WIDE_POST_SHARED } else { LC_WIDE_SHARED };
        let pre = if pre == LC_WIDE_PRE_TOKENS { pre32 } else { pre16 };
        (res.0 * cpc + res.1).max(pre.0 * cpc + pre.1)
    } else {
        let per_channel = match (dtype == Dtype::Bf16, post) {
            (true, false) => LC_SHARED_PER_CHANNEL_BF16,
            (false, false) => LC_SHARED_PER_CHANNEL_F32,
            (true, true) => LC_POST_SHARED_PER_CHANNEL_BF16,
            (false, true) => LC_POST_SHARED_PER_CHANNEL_F32,
        };
        per_channel * cpc
    };
    ((clusters * cluster) as u32, cpc, shared as u32)
}

/// The plan's launch of `t` tokens in words (`mhc inspect --explain`), as [`shape`] lays it out.
pub(crate) fn account(c: usize, t: usize, dtype: Dtype, post: bool) -> String {
    let (grid, cpc, shared) = shape(c, t, dtype, post);
    let (res, pre) = (res_group(t), pre_group(t));
    format!(
        "h_res clusters: {} of {res} tokens; h_pre clusters: {} of {pre} tokens; {LC_CLUSTER} CTAs a cluster: \
         {grid} CTAs of {cpc} channels, {shared} bytes of dynamic shared memory a CTA\n",
        t.div_ceil(res),
        t.div_ceil(pre),
    )
}

/// The `pre` side's argument block, grid and dynamic shared bytes of `call` (its row): a `pre`
/// entry, or with `post` a `post_pre` entry of this kernel, whose launch adds layer l's post
/// inputs ([`super::post_pre_launch`]). The kernel itself keeps nothing in the workspace; a
/// timing build writes its phase stamps at the few-token kernels' partial rows ([`stamps`]).
pub(crate) fn args(call: &PreCall<'_, '_>, post: bool) -> Result<(PreDecodeArgs, u32, u32)> {
    let PreCall { ctx, b, lay, wsp, chk, .. } = *call;
    let (c, t) = (ctx.cfg.c, chk.t);
    let cluster = b.cluster() as usize;
    let stage = if post { Stage::PostPre } else { Stage::Pre };
    // The row's own range: its f32 entries end at LC_NARROW_MAX_TOKENS and carry no 8-token body,
    // the others at LC_FMA_MAX_TOKENS; the wide entries start above it and end at
    // LC_WIDE_MAX_TOKENS, the long wide entry above that, and `shape` lays a launch out by those
    // boundaries.
    let tokens = &b.variant().entry.tokens;
    let (low, top) = (tokens.min as usize, (tokens.max as usize).min(LC_MAX_TOKENS));
    let class = |t: usize| (t > LC_FMA_MAX_TOKENS) as u8 + (t > LC_WIDE_MAX_TOKENS) as u8;
    if t < low
        || t > top
        || class(low) != class(t)
        || cluster != LC_CLUSTER as usize
        || c % (8 * cluster) != 0
        || ctx.cfg.n != 4
    {
        // The catalogue row's ranges exclude these; a launch never guesses.
        return Err(ctx.refused(stage, b.entry(), format!("T = {t}, C = {c} outside its row")));
    }
    let (grid, cpc, shared) = shape(c, t, ctx.dtype, post);
    if shared > b.dynamic_shared_max() {
        return Err(ctx.refused(stage, b.entry(), format!("{shared} bytes of shared memory at C = {c}")));
    }
    let mut a = super::decode::args(call);
    a.cpc = cpc as u32;
    a.ws_part = wsp + lay.dpart as u64;
    Ok((a, grid, shared))
}

/// Stamp slots a CTA of a timing build writes (`STAMP_STRIDE` in asm/gen/pre_lc.py: 128 bytes).
#[cfg(feature = "testing")]
pub(crate) const LC_STAMP_SLOTS: usize = 16;

/// Timing builds only (`--experiment pre_lc.stamps` of the PTX generator, then `mhc asm`): the
/// %globaltimer stamps (ns) thread 0 of each of the `ctas` CTAs wrote at its phase boundaries
/// (start, grid dependency, loads landed, projected, rows added, cluster barrier, gather landed,
/// done; then, in the res role's tail only, the token's rows summed, Z formed, the Sinkhorn
/// iterated, and %clock64 at the last two), read from the workspace words `all`. CTAs that never
/// pass a boundary (role res beyond the group's tokens, the pre role past "done") leave an
/// earlier call's word. In a normal build the words are meaningless.
#[cfg(feature = "testing")]
pub(crate) fn stamps(lay: &super::WsLayout, all: &[u64], ctas: usize) -> Result<Vec<[u64; LC_STAMP_SLOTS]>> {
    let base = lay.dpart / 8;
    let words = LC_STAMP_SLOTS * ctas;
    if all.len() < base + words {
        return Err(crate::error::Error::shape("workspace", format!(">= {} bytes", (base + words) * 8), all.len() * 8));
    }
    Ok((0..ctas).map(|c| std::array::from_fn(|k| all[base + LC_STAMP_SLOTS * c + k])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_is_a_cluster_per_role_and_group_and_the_slices_fit() {
        assert_eq!(shape(4096, 1, Dtype::Bf16, false), (32, 256, 256 * LC_SHARED_PER_CHANNEL_BF16 as u32));
        assert_eq!(shape(7168, 4, Dtype::Bf16, true).0, 32);
        assert_eq!(shape(7168, 5, Dtype::F32, false).0, 4 * LC_CLUSTER);
        assert_eq!(shape(4096, 12, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        assert_eq!(shape(4096, 13, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        // Six clusters at most up to 16 tokens, eight (128 CTAs) with the wide groups: resident at
        // once on the 132-SM parts.
        assert_eq!(shape(4096, LC_FMA_MAX_TOKENS, Dtype::Bf16, true).0, 6 * LC_CLUSTER);
        assert_eq!(shape(4096, 17, Dtype::Bf16, false).0, 4 * LC_CLUSTER);
        assert_eq!(shape(4096, 48, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        assert_eq!(shape(4096, LC_WIDE_MAX_TOKENS, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        assert_eq!(shape(7168, LC_WIDE_MAX_TOKENS, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        assert_eq!(shape(8192, LC_WIDE_MAX_TOKENS, Dtype::Bf16, false).0, 6 * LC_CLUSTER);
        // The long wide entry: 3 + 2 clusters from 65 tokens, 4 + 3 (seven, resident at once) at 128.
        assert_eq!(shape(4096, LC_WIDE_MAX_TOKENS + 1, Dtype::Bf16, false).0, 5 * LC_CLUSTER);
        assert_eq!(shape(4096, 96, Dtype::Bf16, false).0, 5 * LC_CLUSTER);
        assert_eq!(shape(4096, 97, Dtype::Bf16, false).0, 7 * LC_CLUSTER);
        assert_eq!(shape(4096, LC_MAX_TOKENS, Dtype::Bf16, false).0, 7 * LC_CLUSTER);
        // The wide layouts leave room for the static arrays (at most 18 KB) in an H100's 227 KB:
        // `pre` to C = 8192, `post_pre` (f's slices too) to LC_WIDE_POST_MAX_C only.
        let room = 227 * 1024 - 18 * 1024;
        for t in [17, 48, LC_WIDE_MAX_TOKENS] {
            assert!(shape(8192, t, Dtype::Bf16, false).2 <= room);
        }
        // The long wide entry's layouts with its static arrays (27,008 bytes) to C = 6144 only.
        let long_room = 227 * 1024 - 27_008;
        for t in [LC_WIDE_MAX_TOKENS + 1, LC_MAX_TOKENS] {
            assert!(shape(6144, t, Dtype::Bf16, false).2 <= long_room);
            assert!(shape(6272, t, Dtype::Bf16, false).2 > long_room);
        }
        for t in [17, LC_WIDE_PRE_ABOVE] {
            assert!(shape(crate::device::cuda::abi::LC_WIDE_POST_MAX_C, t, Dtype::Bf16, true).2 <= room);
        }
        assert!(shape(8192, 17, Dtype::Bf16, true).2 > room);
        // At the catalogue's largest C the f32 slices fit an H100's 227 KB with the static arrays.
        assert!(shape(8192, 1, Dtype::F32, true).2 <= 200 * 1024);
        assert!(shape(8192, 1, Dtype::F32, false).2 < shape(8192, 1, Dtype::F32, true).2);
    }
}
