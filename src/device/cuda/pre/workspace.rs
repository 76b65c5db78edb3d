//! The workspace of the `pre` kernels: the general kernel's split-K counters, partial blocks and
//! logit rows, the few-token kernels' tagged rows, the GEMM kernel's slabs. One layout per plan
//! (its configuration, dtype and most tokens), computed once when the plan is built; the regions
//! never overlap, so no kernel sees another's leftovers, and every kernel leaves its counters at
//! zero (the workspace is reusable without a memset).

use super::cluster::{pair_bytes, pair_c};
use super::decode::{part_rows, DECODE_MAX_CTAS, MID_HPRE_COPIES, MID_MAX_TOKENS};
use super::gemm::{gemm_slabs, logit_tiles, GEMM_MIX_PARTS, GEMM_NS, GEMM_TILE_LOGITS, GEMM_TILE_TOKENS};
use super::general::{
    ldp, prefill_split, split_cap, DECODE_MAX_TOKENS, PREFILL_SPLIT_BLOCKS, TILE_TOKENS, WIDE_PREFILL_BLOCKS,
};
use super::{GemmWs, WsLayout};
use crate::config::{Config, Dtype};
use crate::device::cuda::abi::PC_MIN_TOKENS;

fn round256(b: usize) -> usize {
    b.div_ceil(256) * 256
}

/// The workspace of a plan for `cfg` in `dtype` up to `max_tokens` tokens: every region any of
/// the plan's `pre` kernels may use at any T, each 256-byte aligned.
pub(crate) fn layout(cfg: &Config, dtype: Dtype, max_tokens: usize) -> WsLayout {
    let ldp = ldp(cfg);
    let block = (32 * ldp + 32) * 4;
    let tiles = max_tokens.div_ceil(TILE_TOKENS).max(1);
    let decode_tiles = tiles.min(DECODE_MAX_TOKENS / TILE_TOKENS);
    let mut part_bytes = decode_tiles * split_cap(cfg) * block;
    if max_tokens > DECODE_MAX_TOKENS {
        // (a launch of fewer tokens may split its tiles further: tiles x splits <= the blocks)
        part_bytes = part_bytes.max(PREFILL_SPLIT_BLOCKS.min(tiles * prefill_split(cfg, 1)) * block);
        if ldp > 32 {
            part_bytes = part_bytes.max(WIDE_PREFILL_BLOCKS.min(tiles * split_cap(cfg)) * block);
        }
    }
    let cnt = 0;
    let part = round256(tiles * 16);
    let p = part + round256(part_bytes);
    let ss = p + round256(max_tokens * ldp * 4);
    let dsync = ss + round256(max_tokens * 4);
    let dpart = dsync + 256 + MID_HPRE_COPIES * MID_MAX_TOKENS * 4 * 8;
    let mut total = match part_rows(cfg.n) {
        Some((words, tokens)) if !cfg.gamma_f => dpart + round256(DECODE_MAX_CTAS * max_tokens.min(tokens) * words * 8),
        _ => dsync,
    };
    let gemm = gemm_ws(cfg, max_tokens, total);
    // Where the catalogue may give the GEMM kernel this configuration (bf16, its n, no optional
    // inputs): its region too.
    if dtype == Dtype::Bf16 && GEMM_NS.contains(&cfg.n) && cfg.c % 8 == 0 && !cfg.gamma_k && !cfg.gamma_f {
        total = gemm.total;
    }
    // Where the catalogue may give the pair entry this configuration: its exchange rows.
    let pair = round256(total);
    if dtype == Dtype::Bf16 && cfg.n == 4 && !cfg.gamma_f && pair_c(cfg.c) && max_tokens >= PC_MIN_TOKENS {
        total = pair + pair_bytes(max_tokens);
    }
    WsLayout { cnt, part, p, ss, dsync, dpart, gemm, pair, total }
}

/// The GEMM kernel's region of the workspace, starting at byte `at`, for up to `max_tokens`.
pub(crate) fn gemm_ws(cfg: &Config, max_tokens: usize, at: usize) -> GemmWs {
    let tiles = max_tokens.div_ceil(GEMM_TILE_TOKENS).max(1);
    let slabs = gemm_slabs(cfg.n, tiles);
    let sync = round256(at);
    let cnt = sync + round256(64 + tiles * (GEMM_MIX_PARTS + 1) * 4);
    let ss = cnt + round256(tiles * 4);
    let p = ss + round256(slabs * GEMM_TILE_TOKENS * 4);
    let total = p + slabs * GEMM_TILE_TOKENS * logit_tiles(cfg.n) * GEMM_TILE_LOGITS * 4;
    GemmWs { sync, cnt, ss, p, slabs, total }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pair entry's exchange rows: past every other region, only where the catalogue may
    /// select that entry (bf16, n = 4, no gamma_f, C = 5120..8192 a multiple of 1024, T >= 17).
    #[test]
    fn the_pair_region_is_last_and_only_where_the_pair_entry_may_run() {
        let with = layout(&Config::new(4, 7168), Dtype::Bf16, 8192);
        assert_eq!(with.pair % 256, 0);
        let without_pair = layout(&Config::new(4, 7168), Dtype::Bf16, 16).total;
        assert!(with.pair > with.dpart && with.pair >= without_pair, "past the decode rows");
        assert_eq!(with.total, with.pair + pair_bytes(8192));
        for (cfg, dtype, t) in [
            (Config::new(4, 4096), Dtype::Bf16, 8192),
            (Config::new(4, 7168), Dtype::F32, 8192),
            (Config::new(4, 7168), Dtype::Bf16, 16),
            (Config::new(8, 7168), Dtype::Bf16, 8192),
            (Config { gamma_f: true, ..Config::new(4, 7168) }, Dtype::Bf16, 8192),
        ] {
            let l = layout(&cfg, dtype, t);
            assert!(l.total <= l.pair, "{cfg:?} {dtype} T = {t}: no exchange rows");
        }
    }
}
