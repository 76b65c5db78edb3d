//! `pre` for many tokens on persistent clusters (asm/ptx/sm90/pre_pc.ptx, entry
//! `mhc_pre_pc16_bf16_n4`): bf16 storage, n = 4, C a multiple of 128 up to [`PC_MAX_C`], no
//! gamma_f, T >= 17. Clusters of [`PC_CLUSTER`] CTAs stay resident (as many as
//! the device holds, found when the plan is built) and walk [`PC_TILE_TOKENS`]-token tiles; CTA
//! r owns channels `[r C/16, (r+1) C/16)` of every stream, keeps its slice of phi in registers
//! (bf16 hi + lo mma fragments) and its slice of x in a ring of shared-memory stages until it
//! has written its channels of `a`: x is read from memory once and phi once per kernel. The
//! partial logits meet through distributed shared memory. The catalogue gives it bf16,
//! n = 4, C a multiple of 128 up to 4096, without gamma_f; the general kernel serves the rest.
//! Where C is a multiple of 1024 its TMA entry (`mhc_pre_pc16t_bf16_n4`) serves instead: its ring is
//! filled by tensor copies (the tensor map of x, encoded per launch on the host, travels in
//! [`PreTmaArgs`]) and each token's CTA computes its h_pre and sends it to the others.
//! C = 5120..8192 (multiples of 1024: DeepSeek-V4-Pro's 7168) is beyond one cluster's phi
//! registers and ring; there the pair entry (`mhc_pre_pc16p_bf16_n4`, asm/ptx/sm90/pre_pc_pair.ptx)
//! splits each tile along C into two parts of whole 1024-channel blocks, each run by a cluster as
//! the TMA entry, and their coefficient warps add each token's two sums through the workspace's
//! exchange rows ([`pair_bytes`]); every resident cluster runs, in two sets, one per part, sized
//! to the parts ([`pair_ctas`]).
//!
//! The same file's second entry, `mhc_post_pre_pc16_bf16_n4`, is `post_pre` in one pass: its ring
//! also brings layer l's `f` slice and `h_post` / `h_res` rows, two post warps compute
//! `x' = post(x)` in the stage on the tensor cores (h_res / h_post in bf16 hi + lo, f32
//! accumulation: the stored bf16 x' matches the post kernel's f32 FMAs except ~0.1% of values one
//! rounding step apart), the projection runs on it and the mix stores it to `x_out`: `x'` is never
//! read back (the catalogue gives it `post_pre` from 129 tokens where this kernel serves `pre`;
//! up to 128 `pre` runs the logit clusters' long wide entry). Its stage rows pad each stream slice ([`fused_row_bytes`]).
//! At C = 5120..8192 the pair file's second entry, `mhc_post_pre_pc16p_bf16_n4`, runs that fused
//! pass on two clusters per tile as the pair entry does, each cluster on its part of C
//! ([`fused_pair_ring_bytes`]): its math warps mix each tile two rounds after its projection, once
//! the token's CTA has sent `h_pre` from both parts' sums, so x stays in its stage until then and
//! f, needed only until x' is computed, has a ring of its own (the catalogue gives it `post_pre`
//! from 256 tokens; below, `post` then the pair entry is faster).

use super::PreCall;
pub use crate::device::cuda::abi::{
    fused_pair_ring_bytes, fused_ring_bytes, pair_ring_bytes, ring_bytes, tma_ring_bytes, PC_TILE_TOKENS,
};
use crate::device::cuda::abi::{
    PreTmaArgs, PC_PAIR_HEAD_BYTES, PC_PAIR_MAX_C, PC_PAIR_MIN_C, PC_PAIR_ROW_BYTES, PC_TMA_C_MULTIPLE,
};
use crate::device::cuda::launch::{Launch, LaunchKind, Row};
use crate::device::cuda::memory::DeviceTensor;
use crate::error::Result;

/// Bytes of the pair entry's region of the workspace (`WsLayout::pair`) for up to `max_tokens`
/// tokens: the call count and the finished-cluster count, then an exchange row per tile, half and
/// token (each written once per call, so no call waits on a row's reader).
pub(crate) const fn pair_bytes(max_tokens: usize) -> usize {
    PC_PAIR_HEAD_BYTES + max_tokens.div_ceil(PC_TILE_TOKENS) * 2 * PC_TILE_TOKENS * PC_PAIR_ROW_BYTES
}

/// Whether C is one the pair entry splits into two clusters' parts (whole 1024-channel blocks,
/// each part at most one cluster's C).
pub(crate) const fn pair_c(c: usize) -> bool {
    c % PC_TMA_C_MULTIPLE == 0 && c >= PC_PAIR_MIN_C && c <= PC_PAIR_MAX_C
}

/// The resident CTAs a pair-entry launch uses of the `clusters` the device holds at once: all of
/// them (the kernel splits them into a set per part of C), but at least two, one per part, since
/// a tile's two parts wait for each other.
pub(crate) fn pair_ctas(clusters: u32, cluster: u32) -> u32 {
    if clusters >= 2 {
        clusters * cluster
    } else {
        0
    }
}

/// How the pair entry splits `clusters` resident clusters (at least 2) between the two parts of
/// C: (clusters of part 0, clusters of part 1). Part 0 is the first `B0 = floor(B / 2)` of the
/// `B = C / 1024` channel blocks; it gets `Q0 = Q B0 / B` clusters rounded to nearest and kept
/// in `[1, Q - 1]`, so both sets move their parts of the tiles at about the same rate. The kernel
/// computes the same split itself (asm/gen/pre_pc/prologue.py `PAIR_HALF`); this mirror is what the
/// profiling tools read stamps by.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn pair_split(c: usize, clusters: usize) -> (usize, usize) {
    let (b, b0) = (c / 1024, c / 2048);
    if clusters < 2 || b == 0 {
        return (clusters.min(1), clusters.saturating_sub(1));
    }
    let q0 = clusters.saturating_mul(b0).saturating_mul(2).saturating_add(b) / b.saturating_mul(2);
    let q0 = q0.clamp(1, clusters - 1);
    (q0, clusters - q0)
}

/// The ring a launcher of this family asks for at C.
pub const fn ring_bytes_of(kind: LaunchKind, c: usize) -> usize {
    match kind {
        LaunchKind::PreClusterTma => tma_ring_bytes(c),
        LaunchKind::PreClusterPair => pair_ring_bytes(c),
        LaunchKind::PostPreCluster => fused_ring_bytes(c),
        LaunchKind::PostPreClusterPair => fused_pair_ring_bytes(c),
        _ => ring_bytes(c),
    }
}

/// The plan's launch of `t` tokens of a launcher of this family in words (`mhc inspect
/// --explain`). How many clusters the device holds at once is its occupancy query's answer when
/// the plan is built, which a selection without a device cannot know.
pub(crate) fn account(kind: LaunchKind, c: usize, t: usize, cluster: u32) -> String {
    let sets = if matches!(kind, LaunchKind::PreClusterPair | LaunchKind::PostPreClusterPair) {
        ", in two sets, one per part of C (at least two clusters)"
    } else {
        ""
    };
    format!(
        "persistent: every {cluster}-CTA cluster the device holds at once with {} bytes of ring a CTA{sets}, \
         walking {} tiles of {PC_TILE_TOKENS} tokens\n",
        ring_bytes_of(kind, c),
        t.div_ceil(PC_TILE_TOKENS),
    )
}

/// The persistent-cluster `pre` launch of `call` (its row, with its resident CTA count), on at
/// most `clusters` clusters where given (tests). The workspace holds the pair entry's exchange
/// rows, and what timing builds write (the phase stamps of [`stamps`]).
pub(crate) fn launch(call: &PreCall<'_, '_>, clusters: Option<usize>) -> Result<Launch> {
    let PreCall { ctx, b, lay, wsp, x, chk, .. } = *call;
    let cluster = b.variant.cluster();
    let ctas = clusters.map_or(b.resident_ctas, |q| b.resident_ctas.min((q as u32).saturating_mul(cluster)));
    let mut args = super::decode::args(call);
    args.ws_part = wsp;
    let shared = ring_bytes_of(b.kind, ctx.cfg.c) as u32;
    if b.kind == LaunchKind::PreClusterPair {
        args.ws_part = wsp + lay.pair as u64;
    }
    if matches!(b.kind, LaunchKind::PreClusterTma | LaunchKind::PreClusterPair) {
        let args = PreTmaArgs { lead: [0; 48], pre: args, pad: [0; 48], tmap: x_tensor_map(x, ctx.cfg.c, chk.t)? };
        return Ok(Launch::new(b, ctas, b.threads(), shared, &args));
    }
    Ok(Launch::new(b, ctas, b.threads(), shared, &args))
}

/// The phase stamps a timing build of the pre entry (`--experiment stamps` of the PTX generator,
/// then `mhc asm`) left in the workspace words `all`: per CTA (`ctas` of them) and round (<
/// [`PC_STAMP_ROUNDS`](crate::device::cuda::abi::PC_STAMP_ROUNDS)), 16 (%globaltimer, %clock64) pairs. A normal build writes none: the
/// words are whatever the workspace held.
#[cfg(feature = "testing")]
pub(crate) fn stamps(all: &[u64], ctas: usize) -> Result<Vec<[(u64, u64); 16]>> {
    use crate::device::cuda::abi::PC_STAMP_ROUNDS;
    let need = ctas * PC_STAMP_ROUNDS * 16 * 2;
    if all.len() < need {
        return Err(crate::Error::shape("workspace", format!(">= {} bytes for the stamps", need * 8), all.len() * 8));
    }
    Ok((0..ctas * PC_STAMP_ROUNDS)
        .map(|r| std::array::from_fn(|k| (all[(16 * r + k) * 2], all[(16 * r + k) * 2 + 1])))
        .collect())
}

/// The TMA entry's tensor map of x (bf16): dimension 0 the 4C elements of a token row, dimension 1
/// the T tokens (row stride from the view); boxes of 64 elements x 16 tokens with the 128-byte
/// swizzle (asm/gen/pre_pc/prologue.py `TMA_XW`), tokens past T read as zeros. The views were checked (rows
/// 16-byte aligned, fewer than 2^32 elements), which is what the encoding requires.
fn x_tensor_map(x: &DeviceTensor<'_>, c: usize, t: usize) -> Result<[u64; 16]> {
    use cudarc::driver::sys;
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dims: [u64; 2] = [4 * c as u64, t as u64];
    let strides: [u64; 1] = [x.layout.row_stride as u64 * 2];
    let boxes: [u32; 2] = [64, PC_TILE_TOKENS as u32];
    let steps: [u32; 2] = [1, 1];
    // SAFETY: every pointer covers the rank (2) it is read for; the map is written into `map`.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            x.ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    crate::device::cuda::ffi::check("cuTensorMapEncodeTiled", status)?;
    Ok(map.opaque)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::abi::{
        fused_row_bytes, fused_x_row_bytes, PC_PAIR_FUSED_STAGES, PC_PAIR_F_STAGES, PC_PAIR_STAGES,
    };

    #[test]
    fn pair_split_follows_the_parts() {
        // C = 7168 (3072 + 4096 channels) on an H100's 7 clusters: 3 + 4
        assert_eq!(pair_split(7168, 7), (3, 4));
        // 5120 = 2048 + 3072: 7 x 2 / 5 = 2.8; 8192 = 4096 + 4096: an even split rounds up
        assert_eq!(pair_split(5120, 7), (3, 4));
        assert_eq!(pair_split(8192, 7), (4, 3));
        assert_eq!(pair_split(8192, 8), (4, 4));
        // never an empty set
        assert_eq!(pair_split(5120, 2), (1, 1));
        assert_eq!(pair_split(7168, 132), (57, 75));
        for q in 2..40 {
            for c in (5..=8).map(|b| b * 1024) {
                let (a, b) = pair_split(c, q);
                assert!(a >= 1 && b >= 1 && a + b == q, "C = {c}, Q = {q}: {a} + {b}");
            }
        }
    }

    /// Largest C: each math warp holds 4 runs of 32 elements of phi's slice in registers (10
    /// warps per CTA, 3 on one SM sub-partition, cap a thread at 168 registers).
    const PC_MAX_C: usize = 4096;
    use crate::config::Dtype;
    use crate::device::cuda::launch::assert_c_range_is_what_fits;

    #[test]
    fn the_rings_fit() {
        assert_eq!(ring_bytes(PC_MAX_C), 4 * 16 * (2048 + 64));
        assert!(ring_bytes(PC_MAX_C) + 36_096 <= 227 * 1024, "ring + static shared memory fit one SM");
        // stage = 16 rows of 5 (C/8 + 16) bytes + pad (row / 16 = 4 mod 8), then 16 x 80 bytes
        assert_eq!(fused_row_bytes(4096), 5 * 528 + 112);
        assert_eq!(fused_row_bytes(128), 5 * 32 + 16 * 2);
        for c in (128..=4096).step_by(128) {
            let row = fused_row_bytes(c);
            assert!(row >= 5 * (c / 8 + 16) && row < 5 * (c / 8 + 16) + 128 && (row / 16) % 8 == 4, "C = {c}");
        }
        assert_eq!(fused_ring_bytes(PC_MAX_C), 4 * (16 * 2752 + 16 * 80));
        assert!(fused_ring_bytes(PC_MAX_C) + 36_096 <= 227 * 1024, "fused ring + static shared memory fit");
    }

    /// The catalogue's C range of every cluster row is exactly what its ring and phi's registers
    /// allow: C a multiple of 128 (of 1024 for the TMA entry) up to [`PC_MAX_C`], whose ring fits
    /// the row's shared memory; the pair entry: two parts of whole 1024-channel blocks, each at
    /// most [`PC_MAX_C`].
    #[test]
    fn c_range_is_what_the_ring_allows() {
        let fits = |row: &mhc_loader::Variant, _n: usize, _dtype: Dtype, c: usize| {
            let kind = LaunchKind::from_name(&row.entry.launch).unwrap();
            let ring = ring_bytes_of(kind, c) <= row.dynamic_shared_max() as usize;
            match kind {
                LaunchKind::PreClusterPair | LaunchKind::PostPreClusterPair => {
                    pair_c(c) && c.div_ceil(2048) * 1024 <= PC_MAX_C && ring
                }
                LaunchKind::PreClusterTma => c % 1024 == 0 && c <= PC_MAX_C && ring,
                _ => c % 128 == 0 && c <= PC_MAX_C && ring,
            }
        };
        let cluster = |v: &mhc_loader::Variant| v.entry.launch.contains("cluster");
        assert_eq!(assert_c_range_is_what_fits(cluster, fits), 6);
    }

    /// The pair entry's ring holds the larger part of C (ceil(C / 2048) blocks of 1024 channels);
    /// its grid is every resident cluster, at least two; its region holds a row per tile, half
    /// and token after the counts.
    #[test]
    fn the_pair_entry_sizes() {
        let ring = |ch: usize| PC_PAIR_STAGES * PC_TILE_TOKENS * ch / 2 + 1024;
        assert_eq!(pair_ring_bytes(7168), ring(4096));
        assert_eq!(pair_ring_bytes(8192), ring(4096));
        assert_eq!(pair_ring_bytes(6144), ring(3072));
        assert_eq!(pair_ring_bytes(5120), ring(3072));
        assert!(pair_ring_bytes(PC_PAIR_MAX_C) + 36_096 <= 227 * 1024, "ring + static shared memory fit one SM");
        // the fused pair entry: x rows of 4 slices (+ the tile's h_post / h_res) and f rows of one,
        // at the larger part
        for c in (128..=4096).step_by(128) {
            let row = fused_x_row_bytes(c);
            assert!(row >= 4 * (c / 8 + 16) && row < 4 * (c / 8 + 16) + 128 && (row / 16) % 8 == 4, "C = {c}");
        }
        let fused = |ch: usize| {
            PC_PAIR_FUSED_STAGES * PC_TILE_TOKENS * (fused_x_row_bytes(ch) + 80)
                + PC_PAIR_F_STAGES * PC_TILE_TOKENS * (ch / 8 + 16)
        };
        assert_eq!(fused_pair_ring_bytes(7168), fused(4096));
        assert_eq!(fused_pair_ring_bytes(7168), 5 * (16 * 2112 + 16 * 80) + 3 * 16 * 528);
        assert_eq!(fused_pair_ring_bytes(5120), fused(3072));
        // pre_pc_pair.cubin's static shared memory is 29,696 bytes (asm/catalogue.toml)
        assert!(fused_pair_ring_bytes(PC_PAIR_MAX_C) + 29_696 <= 227 * 1024, "rings + static shared memory fit one SM");
        assert_eq!(pair_ctas(7, 16), 112);
        assert_eq!(pair_ctas(2, 16), 32);
        assert_eq!(pair_ctas(1, 16), 0, "one cluster cannot run both parts: the plan refuses the row");
        const { assert!(PC_PAIR_ROW_BYTES >= 7 * 4 * 8, "28 tagged words a row") };
        const { assert!(PC_PAIR_HEAD_BYTES >= 8 && PC_PAIR_HEAD_BYTES % 256 == 0, "two counts, rows aligned") };
        assert_eq!(pair_bytes(16), PC_PAIR_HEAD_BYTES + 32 * PC_PAIR_ROW_BYTES);
        assert_eq!(pair_bytes(8193), PC_PAIR_HEAD_BYTES + 513 * 32 * PC_PAIR_ROW_BYTES);
        assert!(pair_c(7168) && pair_c(5120) && pair_c(8192));
        assert!(!pair_c(4096) && !pair_c(7296) && !pair_c(9216));
    }
}
