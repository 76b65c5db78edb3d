"""`pre` for many tokens on persistent clusters, sm_90a: asm/ptx/sm90/pre_pc.ptx.

The kernel is written by hand here as PTX text; Python only spells out the unrolled blocks
(phi fragments per run, the mma grid, the per-source sums) that PTX, having no macros and no
register indexing, would otherwise repeat line by line. The Sinkhorn and h_post bodies are the
decode kernel's (pre_decode). The header below is the design document. Deterministic
output (no dates, no paths).
"""


from types import SimpleNamespace

from . import catalogue, pre_decode, sinkhorn
from .abi import POST_PRE_PC, PRE_DECODE, RUST_MIRROR, TMA_PARAM_BYTES, TMA_TMAP
from .shapes import TMAX
from .blocks import MMA_BF16, MMA_BF16_K8, mma, split_bf16_via
from .pre_decode import COEF_REGS, GRID_DEPENDENCY, inv_rms, load_args, sigmoid


CL = 16        # CTAs per cluster (non-portable size: the plan allows it on the function)
TT = 16        # tokens per tile (= CL: CTA r finishes token r of every tile)
NW = 8         # math warps; warps NW, NW + 1 are the coefficient warps (alternate tiles)
NCW = 2
THREADS = 32 * (NW + NCW)
NPW = 2        # fused entry: post warps (x' = post(x) of each landed stage, ahead of the math warps)
# fused entry: tokens of each tile (a multiple of 4: whole 4-token groups) whose x' the coefficient
# warp of the tile's parity computes (the last CWT of the tile; the post warps take the others).
# With the post math on FMAs, CWT = 4 spreads it over the SM sub-partitions; with x' on the tensor
# cores the post warps keep up alone and 0 is fastest (the pre_pc.cwt experiment; docs/kernels/pre.md)
THREADS_F = THREADS + 32 * NPW
NMW = 2        # pre entry: mix warps (the pre-mix and the ring's fills, beside the math warps)
THREADS_P = THREADS + 32 * NMW
BAR2 = 32 * (NW + 1)  # barrier 2: the math warps and the coefficient warp of the round
# barrier 2's named barrier: one per round parity, so that the math warps of round k leave it only
# with the coefficient warp of round k (the warp of that parity), by construction. With one id, a
# coefficient warp a round early (its gather in while the other one still runs its h_res batch)
# would complete the math warps' barrier in the other's place, and the reuse of the gather
# buffers (the HX header's causality) would rest on timing. Its cost (H100, C = 7168 / 4096,
# T = 256..8192, one call, two alternations; bits identical): within noise at C = 7168, up to
# 0.7% at C = 4096 (docs/kernels/pre.md). The nowsum timing build, whose math warps reach
# barrier 2 sooner, hung with one id and runs with two.
BAR2_ID = """
    and.b32 %r9, %kk, 1;
    mad.lo.u32 %r9, %r9, 3, 2;              // barrier 2: id 2 (even rounds) or 5 (odd)"""
RMAX = 4       # 32-element runs of the K slice per math warp: C <= 1024 * RMAX (10 warps: <= 168 registers)
STAGES = 4
PAD = 64       # bytes after each token row of a stage (bank shift for the fragment loads)
# gather float4 slots per source: the h_pre logits of each token, the ss of tokens 4i..4i+3, then
# the receiver's own token's other 5 float4s (logits 4..23)
SS_SLOT = TT
OWN_SLOT = TT + TT // 4
SLOTS = OWN_SLOT + 5
BJOBS = OWN_SLOT * CL  # push jobs: the h_pre logits and ss slots to every CTA
OJOBS = 5 * TT       # and the other 5 float4s of token j to CTA j
HW0 = NW // 2        # math warps HW0.. compute h_pre (4 tokens each) while warps < HW0 sum the partials
# TMA entry (HX): each CTA sends token j's 7 float4s (logits 0..23, ss) to CTA j only; CTA j's
# coefficient warp computes h_pre of token j and sends it to every CTA (hin, by tile mod HXB)
HX_SLOTS = 7
HXG = 4              # TMA entry: gat / gbar buffers (tile % HXG; why 4: the HX header)
# h_res waits in a batch: each coefficient warp keeps the z_res rows of its last SKB rounds (slot
# (kk / 2) % SKB) and runs their Sinkhorns at once, lane b holding slot b's whole matrix (the
# decode kernel's one-thread form). Its instructions are the warp's, so 32 tokens cost what one
# does, once per 32 rounds of the warp instead of once per token. A slot whose round stored no
# token (past T, the pair's other half, or kk = 0, which finishes no tile) keeps the address 0
# it was cleared to and is not stored.
SKB = 32
# sm_lg per coefficient warp: the own token's row (ss, logits: 128 bytes), the batch's matrices
# [SKB][4][4] f32 at SK_Z, their h_res row addresses [SKB] u64 at SK_A
SK_Z = 128
SK_A = SK_Z + SKB * 64
LG_ROW = SK_A + SKB * 8
HXB = 8              # hin buffers: > the ring's depth + 1 (a CTA's mix of tile m precedes every CTA's h_pre of m + HXB)
C_MAX = 1024 * RMAX
HC = 80        # fused entry: bytes of one token's layer-l coefficients in a stage (h_post[4], h_res[4][4])
HC_TILE = TT * HC
# fused entry: PostPrePcArgs (abi.POST_PRE_PC) = PreDecodeArgs (144 bytes), then
A_F, A_HPI, A_HRI, A_XO, A_FS, A_XOS = (POST_PRE_PC.offset(f) for f in ("f", "h_post_in", "h_res_in", "x_out", "f_stride",
                                                                        "x_out_stride"))
FUSED_ARG_BYTES = POST_PRE_PC.size
ARG = {f.name: f.off for f in PRE_DECODE.fields}  # PreDecodeArgs offsets (the other entries' p_args)
# TMA entry (mhc_pre_pc16t_bf16_n4): PreTmaArgs = PreDecodeArgs, then at 192 the CUtensorMap of x
# (2D: the 4C elements of a token row x T rows, box 64 x 16, 128-byte swizzle; the launcher encodes it)
A_TMAP, TMA_ARG_BYTES = TMA_TMAP, TMA_PARAM_BYTES
TBOX = 64      # channels per TMA box (128 bytes: the swizzle span)
TMA_C_MULTIPLE = TBOX * CL  # the TMA entry's C granularity: 64-channel boxes of each CTA's C/16
ENTRY_PRE, ENTRY_PRE_TMA = "mhc_pre_pc16_bf16_n4", "mhc_pre_pc16t_bf16_n4"
# PAIR entry (mhc_pre_pc16p_bf16_n4): two clusters per tile, each with a part of C (see PAIR below)
ENTRY_PRE_PAIR = "mhc_pre_pc16p_bf16_n4"
PAIR_C_MIN, PAIR_C_MAX = 5 * 1024, 2 * C_MAX  # C: whole 1024-channel blocks, each half <= C_MAX
PAIR_ROW = 256       # bytes of one exchange row: 28 tagged 8-byte words (7 float4 of sums)
PAIR_HEAD = 256      # bytes before the rows: the call count E (u32), then the finished clusters (u32)
PAIR_POLL_SLEEP = 16  # ns between two polls of the other half's words (with 16-byte polls: half the L2 requests)
PAIR_STAGES = 5      # the pair entry's ring: this many stages of the larger part's rows
PAIR_STAGES_MAX = 6  # and as many of the smaller part's as fit in it, up to this (HXB - 2: the HX header)
assert PAIR_STAGES_MAX <= HXB - 2
ENTRY_POST_PRE, ENTRY_POST_PRE_M = "mhc_post_pre_pc16_bf16_n4", "mhc_post_pre_pc16m_bf16_n4"
ENTRY_POST_PRE_PAIR = "mhc_post_pre_pc16p_bf16_n4"  # the fused entry on two clusters per tile
PCM_MAX_TOKENS = 448  # the fused entry with mixing post warps wins up to here (H100, C = 4096)
# the fused pair entry serves post_pre from here: below, post then the pair pre entry is as fast
# (H100, C = 7168: T = 256 28.2 against 27.5 us, T = 1024 75.7 against 83.7; docs/kernels/post_pre.md)
PAIR_FUSED_MIN_TOKENS = 384
# The ring's dynamic shared memory at C (Rust expressions over c and the constants above; "/" is
# integer division): the pre entry's stages of TT token rows (4 stream slices and a pad), the TMA
# entry's (no pad; 1 KB to align the ring to the swizzle's 1024-byte period), the fused entry's
# rows (5 slices of C/16 channels + 16 bytes, padded to 4 mod 8 in 16-byte units) and h_post /
# h_res per token.
RING_FORMULAS = {
    "ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (c / 2 + PC_ROW_PAD)",
    "tma_ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (c / 2) + 1024",
    "pair_ring_bytes": "PC_PAIR_STAGES * PC_TILE_TOKENS * ((c + 1024) / 2048 * 512) + 1024",
    "fused_row_bytes": "16 * (5 * (c / 128 + 1) + (4 + 8 - 5 * (c / 128 + 1) % 8) % 8)",
    "fused_ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (fused_row_bytes(c) + PC_POST_COEF_BYTES)",
    "fused_pair_ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (fused_row_bytes((c + 1024) / 2048 * 1024) + PC_POST_COEF_BYTES)",
}


def ring(name, c):
    """RING_FORMULAS[name] at c."""
    env = {"PC_STAGES": STAGES, "PC_PAIR_STAGES": PAIR_STAGES, "PC_TILE_TOKENS": TT, "PC_ROW_PAD": PAD, "PC_POST_COEF_BYTES": HC, "c": c,
           "fused_row_bytes": lambda c_: ring("fused_row_bytes", c_)}
    return eval(RING_FORMULAS[name].replace("/", "//"), {}, env)
TBLK = 4 * TT * 2 * TBOX  # one block of a stage: [stream 4][token 16][64 channels], 8 KB

HEADER = f"""\
// GENERATED by python3 -m asm.gen (asm/gen/pre_pc.py) -- edit the generator, not this file.
// =============================================================================================
// pre_pc.ptx -- mHC `pre` (docs/math.md stages 1-3) for MANY tokens on sm_90a: persistent clusters
// of {CL} CTAs, bf16 storage, n = 4 (M = 24 logits), C a multiple of 128 up to {C_MAX}, no gamma_f.
// Entries: mhc_pre_pc16t_bf16_n4 (pre, C % 1024 == 0: the ring filled by TMA), mhc_pre_pc16_bf16_n4
// (pre, other C), mhc_post_pre_pc16_bf16_n4 and _pc16m_ (post_pre, FUSED). The general kernel
// (pre.ptx) serves every other shape.
//
// WHY     pre.ptx's prefill reads x twice (K loop, then the pre-mix: the 1 MB tile misses L2)
//         and pulls the whole phi (1.5 MB) from L2 per 32-token tile: 42% of copy at T = 8192.
//         Here x is read from HBM exactly once and phi only in the prologue: the cluster splits
//         the K = nC reduction (CTA r owns channels [r C/16, (r+1) C/16) of all n streams),
//         keeps its phi slice in REGISTERS (bf16 hi + lo mma fragments) and its x slice in
//         shared memory until its own channels of `a` are written.
// GRID    clusters of {CL} CTAs, as many as the device holds at once (cuOccupancyMaxActiveClusters:
//         7 on an H100 = 112 CTAs); cluster c walks the {TT}-token tiles c, c + #clusters, ...
//         {THREADS_P} threads: warps 0..{NW - 1} math, warps {NW}, {NW + 1} coefficients (alternate tiles),
//         warps {NW + NCW}, {NW + NCW + 1} mix (the ring's fills and the pre-mix; the fused entry has post
//         warps there and its math warps mix and refill).
// LOOP    iteration k: wait stage k; mma of tile k -> partials; push them (DSMEM); sum tile k-1's
//         gathered partials (pushed one iteration ago), h_pre -> shs[(k-1) & 1], arriving on
//         hready[(k-1) & 1]. The exchange latency hides behind a whole iteration. The mix warps
//         then mix tile k-1, arrive on mixed[(k-1) & 1] (shs may be rewritten: the h_pre writers
//         of round k+1 wait for it) and refill its stage with tile k-1+{STAGES}, while the math
//         warps go on with tile k+1.
// RING    {STAGES} stages in dynamic shared memory, stage = {TT} token rows of C/2 + {PAD} bytes (the
//         CTA's 4 stream slices, contiguous; the pad shifts banks for the fragment loads),
//         filled by 16-byte cp.async (a fixed chunk per thread) with
//         cp.async.mbarrier.arrive.noinc on full[s] (256 arrivals). Tokens past T load the
//         last token again (nothing is stored for them). cp.async.bulk (one per (token,
//         stream)) measures slower: it issues from uniform registers, lanes taking turns.
// TMA     mhc_pre_pc16t_bf16_n4 (PreTmaArgs: PreDecodeArgs, then the CUtensorMap of x at {A_TMAP};
//         C % 1024 == 0): a stage is C/1024 blocks of [stream 4][token {TT}][64 channels], 128-byte
//         rows with the 128-byte swizzle (chunk c of row R at c xor R % 8; the ring 1024-byte
//         aligned), no pad. Lane 0 of each mix warp arms full[s] (2 arrivals) for its two
//         streams' 4C bytes and issues their C/1024 x 2 tensor copies (64 channels x {TT}
//         tokens; tokens past T read as zeros). Run w + 8j of a math warp is block j, stream
//         w / 2, channels 32 (w % 2)..; phi's fragments follow the same order. Why: filling by
//         cp.async, the two mix warps spend ~2500 cycles a round on the fills behind ~1700 of
//         mixing, and the math warps wait ~750 cycles a round for their stage (phase stamps,
//         docs/kernels/pre.md); H100, T = 8192, C = 4096: 162.9 us against 185.6 with cp.async
//         fills (69.6% against 60.7% of copy).
// HX      the TMA entry also exchanges h_pre instead of the h_pre logits: lanes l and l + 16 of
//         warps 0..6 sum the partials of warps 0..3 and 4..7 for one float4 (token j, f); lane l
//         adds the two halves and st.async's it to CTA j's gat[tile % {HXG}][rank][f] at once (before
//         barrier 2). CTA j's coefficient warp sums its token's row (sources in rank order),
//         computes inv_rms and h_pre, stores them, and sends h_pre to every CTA (lane l to CTA l:
//         hin[tile % {HXB}][j], completing hbar[tile % {HXB}]), then h_post and the h_res batch
//         (BATCH). The math warps never wait for the gather or compute h_pre; the mix warps wait
//         hbar (armed at init for
//         tiles 0..{HXB - 1}, re-armed after each mix for tile + {HXB}). {HXB} buffers suffice: a CTA's
//         h_pre of tile m + {HXB} follows every CTA's partials of it, each pushed after its stage of
//         tile m + {HXB} landed, i.e. after its mix of tile m + {HXB - STAGES} > m.
//         {HXG} gat buffers: CTA X pushes tile m in its round m after its barrier 2 of round m - 1,
//         where its coefficient warp had the gather of tile m - 2, which includes our push of
//         tile m - 2, sent after our barrier 2 of round m - 3, where our coefficient warp had read
//         tile m - 4 (gat[m % {HXG}]) and seen gbar[m % {HXG}]'s phase for it complete. The warp that
//         sees a phase complete arms it for tile + {HXG} (tiles 0..{HXG - 1}: at init): a push landing
//         before the arming only takes tx-count below zero (the phase needs the arrival).
//         Measured (H100, T = 8192, C = 4096): h_pre exchanged 150.9 us against 162.9 with the
//         logits (75.0% of copy), one tile iteration 3349 cycles against 3891; pushes as bulk copies after
//         barrier 2 148.8 us; the halves added in the warp sums and pushed from there: see
//         docs/kernels/pre.md.
// MMA     m16n8k16 bf16 -> f32, A = x (rows = the tile's 16 tokens: g, g + 8), B = phi (columns
//         = logits 8nb + g, nb < 3: 24 exactly), lane = 4g + q. K order permuted identically in
//         A and B: the slice is cut in 32-element runs, lane q owns elements 8q..8q+7 of each
//         run (one 16-byte ld.shared per token), {{0,1}},{{2,3}} feed k16-block 0 (k pairs 2q,
//         2q+8), {{4,5}},{{6,7}} block 1. Warp w owns runs w + {NW}j, j < {RMAX}. phi (gamma_k folded
//         in) is split into bf16 hi + lo (x is exact in bf16, phi to 2^-17). Odd runs accumulate
//         apart (two chains). ss = the diagonal of the Gram matrix x x^T from 4 more mma per run
//         (unpacking x for FMAs makes the phase issue-bound).
// REGS    phi fragments 24 per run x {RMAX} = {24 * RMAX}; ptxas 12.9: 161-165 registers (the TMA
//         entry 159), no local memory; 12 warps put 3 on one SM sub-partition: 16K registers / 96
//         threads caps a thread at 168.
// REDUCE  warp partials -> red[w][token][28] (logits 0..23, ss at 24); threads < 112 add the 8
//         warps in order into psum[token][7] (float4; the ss into pss[token]); after barrier 2
//         all 256 math threads st.async the float4s to the CTAs that need them: each token's
//         h_pre logits and the ss of 4 tokens per float4 to all {CL} CTAs, the h_post / h_res
//         float4s of token j only to CTA j ({BJOBS + OJOBS} pushes; the ss packed 4 to a float4: 592
//         unpacked); completion: bytes on the receiver's mbarrier gbar[b] (b = tile
//         parity, {CL}x{SLOTS}x16 bytes). No cluster barrier in the loop: a CTA fills gat[b] of tile
//         k+1 only after it got every CTA's tile k partials, which each sends after its barrier 2
//         of iteration k, i.e. after it read gat[b] (tile k-1).
// COEFS   math warps {HW0}..{NW - 1} (while warps < {HW0} sum the partials): 4 tokens of tile k-1 each,
//         lane 8 t + g: 4 loads + a fixed 8-lane butterfly over the {CL} sources (same bits in
//         every CTA), inv_rms (rsqrt.approx) and h_pre (-> shs; CTA j stores token j's).
//         Coefficient warp {NW} + (k & 1): the own token's row (sources in rank order), then lanes
//         0..3 h_post and the token's z_res rows into the h_res batch (BATCH), overlapping the
//         next two iterations. The pre_pc.stamps experiment records the phases (tests/gpu_pre.rs
//         profile_pc_phases).
// BATCH   each coefficient warp keeps the z_res rows of its last {SKB} rounds in sm_lg (slot
//         (kk / 2) % {SKB}, with the token's h_res address; 0: no token) and at the last slot, or its
//         last round, runs the {SKB} Sinkhorns at once: lane b holds slot b's whole matrix in
//         registers, the decode kernel's one-thread form (sinkhorn.unrolled: its operations and
//         bits), with no shuffle. Its instructions are the warp's, so {SKB} tokens cost what one
//         does. Per token the Sinkhorn had taken most of the warp's two rounds (phase stamps:
//         5,620 of 6,364 cycles), so any delay, such as the pair entry's wait for the other half,
//         pushed the warp's next gather and barrier 2 later and held the math warps. H100, same
//         call, builds alternating twice (us): 8 tokens a batch on 4 lanes each (the row sums
//         local, the column sums a shfl.bfly butterfly) against one token per round: pre
//         C = 4096 T = 8192 / 1024 / 256 129.9 / 25.2 / 12.5 against 135.8-137.0 / 26.8-26.9 /
//         13.6-13.7; the pair entry (C = 7168) 260.9-261.4 / 42.0 / 17.2-17.3 against 291.5 /
//         47.6 / 19.4; the fused post_pre entry (C = 4096) 255.4-255.6 / 45.1-45.8 / 20.9-21.1
//         against 256.8-257.1 / 45.8-46.3 / 21.2. {SKB} tokens on one lane each against 8 on 4
//         lanes (2026-11-28): the pair entry T = 8192 / 4096 / 2048 / 1024 228.6-229.3 /
//         120.7 / 65.8-66.1 / 38.9-39.0 against 235.8-235.9 / 124.2-124.3 / 67.6-68.1 /
//         39.9-40.1; C = 4096 within 0.5%. The same bits each time (compare-builds). The lanes
//         past 3 wait at PC_CB_DONE: computing the rows on every lane would take the fused
//         entry past 168 registers.
// MIX     a[t][c] = sum_i h_pre[t][i] x[t][i][c] over the CTA's channels; then a barrier of the
//         mixing threads frees the stage. The pre entries' mix warps deal the tile's items (token,
//         16-byte chunk) to their 64 threads in order and take two per step, both items' loads
//         issued before the first FMA (mix_items). Taking one item at a time, each step waits on
//         its loads, and at 3072 channels (24 chunks a token) 16 threads idle: that mix set the
//         pace of the pair entry's 3072-channel part (1,915 of 2,674 cycles; this one 1,383). H100, same
//         call, alternating twice (us, T = 8192 / 2048 / 1024): the pair entry 235.6-235.8 /
//         67.6-67.7 / 39.8-39.9 against 257.6-258.9 / 72.8-73.0 / 41.7-42.0; C = 4096
//         128.0-128.4 / 39.9 / 25.0-25.2 against 129.2-129.6 / 40.2-40.3 / 25.1; the same bits.
//         The fused entries mix one fixed chunk per thread. The mix warps copy as {NW * 32}
//         virtual threads (4 chunk mappings each, full[s] counts the same 256 arrivals as when
//         the math warps filled the ring).
// PARAMS  PreDecodeArgs (144 bytes, asm/src/abi/sm90.rs): 0 x, 8 phi, 16 scale,
//         24 base, 32 gamma_k, 40 a, 48 h_pre, 56 h_post, 64 h_res, 72 inv_rms (80, 88 unused);
//         96 T, n, C, M, x_stride, a_stride, (cpc unused), iters, flags (bit 0 Paper, bit 1
//         gamma_k); 132 eps_norm, eps_hc.
// MEASURED H100 (copy ~2.97 TB/s), n = 4, C = 4096, the TMA entry: T = 8192 **138.3-139.5 us
//         (80.9-81.4% of copy**; the general kernel 270 us), T = 4096 76.6-77.2, 1024 29.4-30.5,
//         256 17.7; ~15.2 ns per token (91% of copy) plus ~18 us per call. What each part gains
//         at T = 8192 (same bits throughout): the mix warps (the math warps neither mix nor
//         refill) 190 us against 202 (1024 37.1 / 40.0, 256 20.0 / 21.8, 100 14.4 / 15.7); h_pre
//         beside the warp sums 186; the TMA ring 162.9; the h_pre exchange (HX) 150.9 (75.0%);
//         two copy issuers, pushes by st.async from the warp sums and the 4-lane Sinkhorn
//         140.3-142.2; the PROLOGUE below 138.3-139.5; the h_res BATCH 129.9 (87.0%).
//         Attribution: docs/kernels/pre.md. The pre_pc experiments (python3 -m asm.gen --list-experiments: nosink, nomma, nomix, stamps,
//         nophi, nophibar; for the fused entry noxf, noxo) build timing-only variants.
// PROLOGUE before griddepcontrol.wait, threads < 100 prefetch the CTA's phi and gamma_k slices
//         to L2 (a prefetch moves nothing into the CTA, so it may run ahead of the previous
//         kernel's writes) and the TMA entry prefetches x's tensor map. After it, the math warps
//         arrive on the opening cluster barrier, issue all four runs' phi loads at once, then wait
//         for the cluster and split them into hi / lo; the mix warps fill stage 0 and wait on
//         named barrier PHI_BAR for the phi fragments before stages 1.. (so the first fills do
//         not compete with phi for the SM's inbound bandwidth). Loaded run by run behind the
//         first fills, phi takes the math warps 6-7 us (phase stamps). H100, C = 4096, T = 8192 /
//         1024 / 256: 138.3-139.8 / 30.1-30.5 / 17.5 us with the L2 prefetch and the one-pass
//         loads against 141.2-141.9 / 33.0 / 18.8 without; PHI_BAR 138.3-139.5 against
//         139.3-140.4 at T = 8192 (T = 256 17.7 against 17.5).
// FUSED   mhc_post_pre_pc16_bf16_n4 (PostPrePcArgs, {FUSED_ARG_BYTES} bytes: PreDecodeArgs with x = layer l's
//         residual, then 144 f, 152 h_post_in, 160 h_res_in, 168 x_out, 176 f_stride, 180
//         x_out_stride): post_pre in one pass, x' never read back. Each token row of a stage
//         also holds the token's f slice (C/16 channels after the 4 x slices; a stream-s copier
//         copies it on the passes p with p % 4 == s), and each stage ends with the tile's
//         h_post / h_res rows ({HC} bytes per token, threads < {TT * 5}). Each slice is followed by 16
//         bytes (the 4 streams of a token on different banks) and the row by a pad that keeps
//         it 4 mod 8 in 16-byte units (the math warps' fragment loads shift by stream: %xadj).
//         {NPW} more warps ({THREADS_F} threads; 168 registers still fit 12 warps): for every tile of
//         the cluster they wait for full[s], compute x' = post(x) of the tile in the stage and
//         arrive on xready[s], which the math warps wait for instead of full[s]; running up to
//         the ring's depth ahead, the post math overlaps the math warps' mma, exchange and mix.
//         The math warps' mix stores x' to x_out (16-byte stores) as it reads it.
//         mhc_post_pre_pc16m_bf16_n4 (T <= 448): the post warps also fill the ring and mix each
//         tile (as the pre entry's mix warps: hready / mixed), x' of round m + 3 after the mix of
//         round m; T = 65 / 128 / 256 / 448 16.7 / 20.1 / 25.3 / 31.0 us against 18.3 / 22.6 /
//         28.3 / 32.7, but T = 1024 / 8192 64 / 407 against 52 / 277 (x', the mix and the fills
//         of every tile on two warps). The order x' of round j, then the mix of round j - 3 and
//         the refill of round j + 1 waits a whole load per step: 498 us at T = 8192.
// XPOST   x' on the tensor cores, per 4-token group and 8-channel n-tile: D[16 x 8] (rows:
//         token tl, stream k) = A2 B2 (m16n8k8: h_post hi / lo x f) + A_lo B + A_hi B
//         (m16n8k16: B = the group's x rows (tl, j) by ldmatrix.trans, A = the block diagonal
//         of the 4 tokens' h_res (V4 R[j][k], Paper R[k][j]) in bf16 hi + lo: coefficients to
//         2^-17, products exact, f32 accumulation), then bf16 and stmatrix over the rows it
//         read. Four n-tiles per loop trip (four independent chains). x' agrees with post.ptx's
//         f32 FMAs to ~2^-17: about 0.1% of the stored bf16 values one rounding step apart.
//         MEASURED (H100, T = 8192, C = 4096, us; post then pre 438): x' in the math warps
//         after full[s] (half items, 8-byte accesses: 167 registers) 351; 2 post warps, half
//         items 318; the math warps taking tokens 8..15 of each tile 353 (their share costs
//         more than the post warps' relief); 2 post warps, whole items 306 (72.5% of copy);
//         with the lane-parallel Sinkhorn (COEFS) 301 (75.1%); the coefficient warp of round
//         kk taking the last 4 tokens of tile kk (FMA post math on all four sub-partitions)
//         288-291 (78%). x' on the tensor cores: one n-tile per loop trip and x_out stored from
//         the D fragments (4-byte stores, 8 rows per instruction) 419; four n-tiles per trip
//         310 (CWT 0) / 332 (4) / 352 (8); x_out stored by the mix instead **276-279** (CWT 0,
//         80.7-81.3% of copy) / 283-284 (CWT 4), the post math on FMAs 288-291 in the same runs.
//         T = 1024: 52.4-53.5 (FMAs 55.5-56.0).
// =============================================================================================
.version 8.8
.target sm_90a
.address_size 64
"""


PAIR_HEADER = f"""\
// GENERATED by python3 -m asm.gen (asm/gen/pre_pc.py) -- edit the generator, not this file.
// =============================================================================================
// pre_pc_pair.ptx -- mHC `pre` for MANY tokens on sm_90a at C beyond one cluster: the TMA entry of
// pre_pc.ptx (its header is the design document of everything not described here) on two
// clusters per tile. bf16 storage, n = 4 (M = 24 logits), no gamma_f. Entries: mhc_pre_pc16p_bf16_n4,
// and the fused post_pre on the same split, mhc_post_pre_pc16p_bf16_n4 (FUSED below).
// In a file of its own, so that pre_pc.cubin, and the tuned entries measured on it, stay as they are.
//
// PAIR    mhc_pre_pc16p_bf16_n4 (PreTmaArgs; C = {PAIR_C_MIN}..{PAIR_C_MAX}, a multiple of 1024): at C = 7168 one
//         cluster's phi slice needs 168 registers a thread and its ring 4 x 57 KB. So each tile
//         is split along C into two parts, each run by a cluster as the TMA entry on channels
//         [C0, C0 + CH) of every stream: half 0 the first B0 = floor(C / 2048) of the B = C / 1024
//         blocks, half 1 the rest (7168: 3072 + 4096; each part fits as C <= {C_MAX} does). Every
//         resident cluster runs: clusters [0, Q0) run half 0 and [Q0, Q) half 1, Q0 = Q B0 / B
//         rounded into [1, Q - 1], so both sets move their parts at about the same rate (7168 on
//         an H100's 7 clusters: 3 x 3072 and 4 x 4096 channels); the clusters of a half walk the
//         tiles i, i + Q_h, ... CTA j's coefficient warp writes its cluster's sums of token j to
//         the exchange row (tile, half, j) of the workspace (ws_part + {PAIR_HEAD}) as 28 tagged 8-byte
//         words (a value's bits, then the tag), stored relaxed; after barrier 2 it polls the other
//         half's 28 words (relaxed 16-byte loads, each 8-byte word single-copy atomic; {PAIR_POLL_SLEEP} ns of
//         nanosleep between polls) until each carries the call's tag and adds their values to its
//         own (both halves add the same two values: the same bits). A word proves its own
//         arrival, so no fence is needed (release / acquire flags cost 76-90 us at T = 8192 on
//         most H100s). Each row is written once per call; the tag is 2 E + 1, E the call count in
//         the region's first word: read by the coefficient warps at the start, counted by the
//         last cluster to finish (an acq_rel atom.inc of the second word, which wraps to 0 after
//         each call). So a row holds this call's words or an earlier call's, a fresh workspace's
//         zeros match no tag, and tags repeat after 2^31 calls on one workspace. A tile's two
//         parts wait only for each other and every cluster walks its tiles in order, so the
//         lowest unfinished tile always progresses. Then as the TMA entry, except that the halves
//         take turns by tile ((tile / 8) % 2) to store the coefficients and batch the h_res, and
//         the ring: {PAIR_STAGES} stages of the larger part's rows, and as many of the smaller part's as fit in
//         the same bytes, at most {PAIR_STAGES_MAX} (7168: 6 x 3072 and 5 x 4096 channels).
//         MEASURED H100 80GB HBM3, C = 7168, T = 8192 / 1024 / 256 (mhc bench, builds alternating
//         in one call), before the 16-byte polls: 300 / 48.6 / 19.8 us against 353-357 / 52.7 /
//         19.9 with an even number of clusters paired (6 of 7) and 4 stages; every cluster with 4
//         stages 333-337 / 50.6 / 19.4, with 5 stages for both parts 306-309 / 48.6 / 19.6.
//         Polling with 16-byte loads and a sleep between them halved the L2 sectors the spin
//         requests (ncu, 64 ns: 14.3 to 6.8 M excess sectors) and took T = 8192 from 299-304 to
//         291-292 us with {PAIR_POLL_SLEEP} ns (64 ns: 293-295, 256 ns: 296-298). Phase stamps then showed
//         the two halves holding each other through their coefficient warps: the 4096-channel
//         half waited for the other's sums on 3,368 of 4,208 tokens (median 1.9 us after its
//         barrier 2), and a warp that ran the Sinkhorn (~4,600 cycles) on top of that wait
//         could not gather its next tile in time. Neither alone bound it (not waiting: 331 us
//         with 4 stages; no Sinkhorn iteration: 300), together 263 (both removed, wrong
//         results). With the h_res BATCH 260.9-261.4 / 42.0 / 17.2 against 291.5 / 47.6 / 19.4
//         in the same call; with the two-item MIX 235.6-235.8 / 39.8-39.9 / 16.9-17.0 against
//         257.6-258.9 / 41.7-42.0 / 17.0-17.1 (another call; docs/kernels/pre.md).
// FUSED   mhc_post_pre_pc16p_bf16_n4 (PostPrePcArgs; ws_part: the exchange rows): pre_pc.ptx's fused
//         post_pre entry (FUSED, XPOST there) on this split, each cluster computing x' of its
//         part's channels in its ring (4 stages of fused rows at the larger part). As here, h_pre
//         comes from the token's CTA after both parts' sums (HX), so the math warps, which mix in
//         that entry, mix tile kk-2 in round kk and refill its stage with tile kk+2; one round
//         past the cluster's last mixes the last tile without barrier 2. At 168 registers the
//         part's first channel is read from shared memory in the mix and the warp sums' address
//         words are packed into one. MEASURED H100, C = 7168, T = 8192 / 2048 / 1024 (us): 514.0-516.3
//         / 138.5-139.0 / 75.7-76.2 against 575.8-576.5 / 153.4-153.8 / 83.6-83.9 for post, then
//         the pair entry; mixing tile kk-1 instead 650.1-652.5 / 163.0-163.7 / 89.9-90.1 (the
//         math warps waited for h_pre). Below 384 tokens post, then pre is as fast
//         (docs/kernels/post_pre.md).
// =============================================================================================
.version 8.8
.target sm_90a
.address_size 64
"""


# fused entry: registers, the f slice appended to each token row, the coefficients after the rows
FUSED_REGS = """
    .reg .b32 %cfs;                         // this copier's stream (f chunks: passes p with p % 4 == it)
    .reg .pred %p_f;
    .reg .b32 %SS, %NT, %xadj;              // stream slice stride, n-tiles per slice, math lanes' run shifts
    .reg .b32 %xg, %xnt, %xn0, %xn1, %pxa, %pfa, %xlr, %xlf, %hta, %hro0, %hrs, %hpk, %zr;
    .reg .b32 %ah0, %ah1, %al0, %al1, %a20, %a21, %xm<12>, %xv<8>;
    .reg .f32 %xd<16>, %xr<4>, %xh<2>, %fz;
    .reg .pred %p_nz, %p_qe, %p_qlo, %p_hi16;"""
# fused rows: the 4 x slices and the f slice, each C/16 channels + 16 bytes (so the 4 streams of a
# token fall on different banks for the x' ldmatrix / stmatrix), then a pad that makes the row
# stride 4 mod 8 in 16-byte units (the math warps' fragment loads: tokens g and g + 1 on
# different bank halves)
F_ROW = """
    shr.u32 %SS, %C, 3;
    add.u32 %SS, %SS, 16;                   // stream slice stride: C/16 channels + 16 bytes
    shr.u32 %NT, %C, 7;                     // 8-channel n-tiles per slice
    mul.lo.u32 %tstride, %SS, 5;            // 4 x slices, the f slice
    add.u32 %r1, %NT, 1;
    mul.lo.u32 %r1, %r1, 5;
    mov.u32 %r2, 4;
    sub.u32 %r2, %r2, %r1;
    and.b32 %r2, %r2, 7;
    mad.lo.u32 %tstride, %r2, 16, %tstride; // row / 16 bytes = 4 mod 8"""
XADJ = """
    // fused rows: stream slice s starts 16 s bytes later; lane q's chunk of run w + 8j is chunk
    // 4 (w + 8j) + q of the K slice, in stream (4 (w + 8j) + q) / (C / 128): byte j of %xadj
    mov.u32 %xadj, 0;""" + "".join(f"""
    add.u32 %r1, %warp, {NW * j};
    shl.b32 %r1, %r1, 2;
    add.u32 %r1, %r1, %q;
    div.u32 %r1, %r1, %NT;
    min.u32 %r1, %r1, 3;                    // (runs past the slice load nothing)
    shl.b32 %r1, %r1, {4 + 8 * j};
    or.b32 %xadj, %xadj, %r1;""" for j in range(RMAX))
ROW = f"""
    shr.u32 %tstride, %C, 1;
    add.u32 %tstride, %tstride, {PAD};      // token row of a stage (bytes)"""
XW = """
    shl.b32 %r1, %q, 4;
    mad.lo.u32 %xw, %gq, %tstride, %r1;
    shl.b32 %r1, %warp, 6;
    add.u32 %xw, %xw, %r1;                  // token g's row + lane q's 16 bytes + this warp's first run"""
# TMA entry: run w + 8j = 64-channel block j, stream w / 2, channels 32 (w % 2) .. + 31 of it; lane
# q's 16 bytes are chunk 4 (w % 2) + q of the 128-byte row (stream, token g), stored at chunk
# (4 (w % 2) + q) xor (g % 8) (the 128-byte swizzle: rows g and g + 8 of a stream share it)
TMA_XW = """
    shr.u32 %r1, %warp, 1;
    shl.b32 %r1, %r1, 4;
    add.u32 %r1, %r1, %gq;
    shl.b32 %xw, %r1, 7;                    // row (stream w / 2, token g), 128 bytes
    and.b32 %r1, %warp, 1;
    shl.b32 %r1, %r1, 2;
    add.u32 %r1, %r1, %q;
    xor.b32 %r1, %r1, %gq;
    shl.b32 %r1, %r1, 4;
    add.u32 %xw, %xw, %r1;                  // + the swizzled chunk"""
TMA_ROW = """
    shr.u32 %tstride, %C, 1;                // TMA entry: C/2 bytes per token (no pad: the swizzle)"""
TMA_DSM = """
    add.u32 %dsm, %dsm, 1023;
    and.b32 %dsm, %dsm, -1024;              // the 128-byte swizzle repeats every 1024 bytes"""
PAIR_WALK = """
    mul.lo.u32 %r1, %half, %pq0;            // pair entry: the clusters of a half walk the tiles
    sub.u32 %cid, %cid, %r1;                // (cid: index within the half, ncl: the half's clusters)
    sub.u32 %r1, %ncl, %pq0;
    setp.ne.u32 %p1, %half, 0;
    selp.u32 %ncl, %r1, %pq0, %p1;"""
F_STAGE = f"""
    add.u32 %sstage, %sstage, {HC_TILE};           // + h_post / h_res of the {TT} tokens ({HC} bytes each)"""


def ordered_sum(e, addr, stride, count, tag):
    """%v0..3 = the float4s at addr + i stride, i < count, added in i order (bits fixed); the
    loads are issued 4 at a time inside a loop (an unrolled body let ptxas hoist every load
    beside phi's registers, and spill)."""
    assert count % 4 == 0
    e(f"""    mov.f32 %v0, 0f80000000;
    mov.f32 %v1, 0f80000000;
    mov.f32 %v2, 0f80000000;
    mov.f32 %v3, 0f80000000;
    mov.u32 %sa, {addr};
    mov.u32 %sn, {count // 4};
{tag}:
    ld.shared.v4.f32 {{%u0, %u1, %u2, %u3}}, [%sa];
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%sa+{stride}];
    ld.shared.v4.f32 {{%y0, %y1, %y2, %y3}}, [%sa+{2 * stride}];
    ld.shared.v4.f32 {{%z0, %z1, %z2, %z3}}, [%sa+{3 * stride}];""")
    for src in ("%u", "%w", "%y", "%z"):
        for c in range(4):
            e(f"    add.f32 %v{c}, %v{c}, {src}{c};")
    e(f"""    add.u32 %sa, %sa, {4 * stride};
    sub.u32 %sn, %sn, 1;
    setp.ne.u32 %ps, %sn, 0;
    @%ps bra.uni {tag};""")


def arm_gather(slots):
    """%gab / %gbb = gat / gbar of tile kk (buffer kk & 1); thread 0 arms gbar for the CL x slots
    float4s every CTA sends here (tile kk exists: %p_cur; the cp.async entries)."""
    return f"""    and.b32 %r8, %kk, 1;
    mov.u32 %gab, gat;
    mad.lo.u32 %gab, %r8, {CL * slots * 16}, %gab;
    mov.u32 %gbb, gbar;
    mad.lo.u32 %gbb, %r8, 8, %gbb;
    setp.eq.u32 %p1, %tx, 0;
    and.pred %p1, %p1, %p_cur;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%gbb], {CL * slots * 16};"""


def wait_gather(e, tag, slots=SLOTS, nbuf=2):
    """%gab / %gbb = gat / gbar of tile kk-1 (buffer (kk-1) % nbuf), then wait for its phase
    ((kk-1) / nbuf parity): every CTA's partials of that tile have landed."""
    e(f"""    sub.u32 %r8, %kk, 1;
    and.b32 %r9, %r8, {nbuf - 1};
    mov.u32 %gab, gat;
    mad.lo.u32 %gab, %r9, {CL * slots * 16}, %gab;
    mov.u32 %gbb, gbar;
    mad.lo.u32 %gbb, %r9, 8, %gbb;
    bfe.u32 %r8, %r8, {nbuf.bit_length() - 1}, 1;
{tag}:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%gbb], %r8;
    @!%p1 bra {tag};""")



STAMP_REGS = """
    .reg .b64 %stb, %sgt, %sck, %sad;
    .reg .b32 %srr;
    .reg .pred %pst;"""
STAMP_LOAD = f"""
    ld.param.u64 %stb, [p_args+{PRE_DECODE.offset('ws_part')}];         // pre_pc.stamps: the debug buffer"""
# the pair entry's stamps lie past its exchange rows for this call's T (its ws_part is the region)
PAIR_STAMP_LOAD = STAMP_LOAD + f"""
    add.u32 %srr, %T, {TT - 1};
    shr.u32 %srr, %srr, {TT.bit_length() - 1};                  // tiles
    mul.wide.u32 %sad, %srr, {2 * CL * PAIR_ROW};
    add.u64 %stb, %stb, %sad;
    add.u64 %stb, %stb, {PAIR_HEAD};        // past the head and the rows [tiles][2][16]"""
PHI_BAR = 4  # named barrier: the math warps' phi fragments are in (the mix warps fill stages 1..)
STAMP_ROUNDS = 96  # pre_pc.stamps: rounds recorded per CTA (T = 8192: 73 per cluster)


PHI_TO_L2 = """
    // phi's slice of this CTA (rows 0..23 x streams 0..3, C/16 floats each at i C + r C/16)
    // and gamma_k's (4 streams) -> L2, before the grid dependency: a prefetch moves no data
    // into the CTA, so it may run ahead of the previous kernel's writes (L2 is where those
    // writes land); the fragment loads after the wait then hit L2. Without it they wait on
    // HBM in the prologue (phase stamps). C % 128 == 0: 16-byte aligned, C/4 bytes.
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 100;
    @%p1 bra PHI_L2_END;
    shr.u32 %r2, %r1, 2;                    // row (24, 25: gamma_k)
    and.b32 %r3, %r1, 3;                    // stream
    mov.u32 %r6, %cluster_ctarank;
    shr.u32 %r7, %C, 4;
    mul.lo.u32 %r5, %r3, %C;
    mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + r C/16
    shr.u32 %r8, %C, 2;                     // bytes
    setp.ge.u32 %p1, %r2, 24;
    @%p1 bra PHI_L2_GK;
    shl.b32 %r4, %C, 2;
    mad.lo.u32 %r5, %r2, %r4, %r5;          // + row K
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %phi, %rd1;
    cp.async.bulk.prefetch.L2.global [%rd1], %r8;
    bra.uni PHI_L2_END;
PHI_L2_GK:
    and.b32 %r4, %flags, 2;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra PHI_L2_END;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
    cp.async.bulk.prefetch.L2.global [%rd1], %r8;
PHI_L2_END:"""
# PAIR entry: clusters [0, Q0) run half 0 and [Q0, Q) half 1, Q0 = Q B0 / B rounded into [1, Q - 1]
# (B = C / 1024 blocks, half 0 the first B0 = floor(C / 2048), half 1 the rest): both sets then
# move their parts of the tiles at about the same rate (7168 on 7 clusters: 3 x 3072, 4 x 4096)
PAIR_REGS = """
    .reg .b32 %CH, %C0, %half, %pq0, %nst;
    .reg .pred %p_ns;
    .reg .b64 %xch, %pw<4>;
    .reg .b32 %ptag;"""
PAIR_HALF = """
    mov.u32 %r4, %nclusterid.x;
    shr.u32 %r2, %C, 11;                    // B0
    shr.u32 %r3, %C, 10;                    // B
    mul.lo.u32 %r1, %r4, %r2;
    shl.b32 %r1, %r1, 1;
    add.u32 %r1, %r1, %r3;
    shl.b32 %r3, %r3, 1;
    div.u32 %pq0, %r1, %r3;                 // Q0 = (2 Q B0 + B) / 2B
    max.u32 %pq0, %pq0, 1;
    sub.u32 %r3, %r4, 1;
    min.u32 %pq0, %pq0, %r3;
    mov.u32 %r1, %clusterid.x;
    setp.ge.u32 %p1, %r1, %pq0;
    selp.u32 %half, 1, 0, %p1;"""
PAIR_SETUP = f"""
    setp.ne.u32 %p1, %half, 0;
    shr.u32 %r2, %C, 11;
    shl.b32 %r2, %r2, 10;                   // half 0's channels
    sub.u32 %r3, %C, %r2;
    selp.u32 %CH, %r3, %r2, %p1;
    selp.u32 %C0, %r2, 0, %p1;
    mul.lo.u32 %r3, %r3, {PAIR_STAGES};
    div.u32 %nst, %r3, %CH;
    min.u32 %nst, %nst, {PAIR_STAGES_MAX};          // the ring's depth: {PAIR_STAGES} stages of the larger part's rows"""
PAIR_PHI_TO_L2 = (PHI_TO_L2.replace("(rows 0..23 x streams 0..3, C/16 floats each at i C + r C/16)",
                                    "(rows 0..23 x streams 0..3, CH/16 floats each at i C + C0 + r CH/16)")
                  .replace("shr.u32 %r7, %C, 4;", "shr.u32 %r7, %CH, 4;")
                  .replace("mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + r C/16",
                           "add.u32 %r5, %r5, %C0;\n    mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + C0 + r CH/16")
                  .replace("shr.u32 %r8, %C, 2;                     // bytes", "shr.u32 %r8, %CH, 2;                    // bytes")
                  .replace("PHI_L2", "PHI_L2P"))
assert PAIR_PHI_TO_L2.count("%CH") == 2 and "%C0" in PAIR_PHI_TO_L2
TMAP_PREFETCH = f"""
    setp.eq.u32 %p1, %r1, 100;              // x's tensor map -> the descriptor cache
    @%p1 prefetch.param.tensormap [p_args+{A_TMAP}];"""


def exit_stamps(at, tag="", at_slot=None):
    """pre_pc.stamps: (%globaltimer, %clock64) of the fill and drain in the last two stamp rows
    (beyond the rounds profiled; row 95 = STAMP_ROUNDS - 1, row 94 = STAMP_ROUNDS - 2):
    row 95: "prewait" slot 13 (thread 0 before the grid dependency; it first copies the previous
    launch's slot 12 to slot 14), "entry" slot 15 (thread 0 after it), "warp" slot w (lane 0 of
    warp w reaching the end), "cluster" slot 12 (thread 0 past the closing cluster barrier);
    row 94: "init" slot 12 (thread 0 before the opening cluster barrier), "clustered" slot 13
    (after it), "ready" slot w (lane 0 of warp w: a math warp's phi fragments loaded, a mix
    warp's first fills issued); row 93: "phi" slot at_slot (thread 0: 8 before the fragments,
    2j where run j's split begins, 2j + 1 where it ends), "mix" slot at_slot (the first mix
    thread: 9 at its start, 10 before the first fills). tests/gpu_pre.rs profile_pc_phases
    prints them."""
    tid0 = "setp.ne.u32 %pst, %tx, 0;"
    lane0 = "setp.ne.u32 %pst, %lane, 0;"
    cond, row, slot = {"prewait": ("mov.u32 %srr, %tid.x;\n    setp.ne.u32 %pst, %srr, 0;", 1, "13"),
                       "entry": (tid0, 1, "15"), "warp": (lane0, 1, "%warp"),
                       "cluster": (tid0, 1, "12"), "init": (tid0, 2, "12"),
                       "clustered": (tid0, 2, "13"), "ready": (lane0, 2, "%warp"),
                       "phi": (tid0, 3, at_slot),
                       "mix": (f"setp.ne.u32 %pst, %tx, {32 * (NW + NCW)};", 3, at_slot)}[at]
    copy_prev = """
    ld.global.v2.u64 {%sgt, %sck}, [%sad+-16];   // the previous launch's slot 12 (its exit)
    st.global.v2.u64 [%sad+16], {%sgt, %sck};""" if at == "prewait" else ""
    return f"""
    // ---- EXP stamp: {at}
    {cond}
    @%pst bra PSX_{at}{tag};
    mov.u32 %srr, %ctaid.x;
    mad.lo.u32 %srr, %srr, {STAMP_ROUNDS}, {STAMP_ROUNDS - row};
    mad.lo.u32 %srr, %srr, 16, {slot};
    mul.wide.u32 %sad, %srr, 16;
    add.u64 %sad, %stb, %sad;{copy_prev}
    mov.u64 %sgt, %globaltimer;
    mov.u64 %sck, %clock64;
    st.global.v2.u64 [%sad], {{%sgt, %sck}};
PSX_{at}{tag}:"""


def coef_lanes():
    """Lanes 0..3 (lane i: row i): h_post of the CTA's own token and its z_res row into the h_res
    batch (sk_batch runs the Sinkhorn). The other lanes wait at PC_CB_DONE. Computing the rows on
    every lane instead (the warp never split) would take the fused entry past 168 registers."""
    n = 4
    L = []
    e = L.append

    e("""PC_CBL:
    // lane i < 4: S_j = the h_res logit (i, j) -> z
    shl.b32 %r16, %lane, 4;
    add.u32 %r17, %r16, %lgb;
    mov.u32 %r18, sm_base;
    add.u32 %r18, %r18, %r16;""")
    for j in range(n):
        e(f"""    ld.shared.f32 %g1, [%r17+{4 * (1 + 2 * n + j)}];
    ld.shared.f32 %g2, [%r18+{4 * (2 * n + j)}];
    mul.f32 %g1, %g1, %inv_t;
    fma.rn.f32 %S{j}, %g1, %sc2, %g2;""")
    e(f"""    // h_post[i] = 2 sigma(z_post i) (post_body's operations: the same bits)
    shl.b32 %r22, %lane, 2;
    add.u32 %r23, %r22, %lgb;
    ld.shared.f32 %tr6, [%r23+{4 * (1 + n)}];
    mov.u32 %r23, sm_base;
    add.u32 %r23, %r23, %r22;
    ld.shared.f32 %tr7, [%r23+{4 * n}];
    mul.f32 %tr6, %tr6, %inv_t;
    fma.rn.f32 %tr6, %tr6, %sc1, %tr7;
{sigmoid("%tr6", "%tr7")}
    add.f32 %tr7, %tr7, %tr7;
    cvt.u64.u32 %rd2, %r22;
    add.u64 %rd2, %hpo, %rd2;
    st.global.f32 [%rd2], %tr7;
    // z_res row i -> the batch's slot (kk / 2) % {SKB}; lane 0: the token's h_res address
    bfe.u32 %r18, %kk, 1, {SKB.bit_length() - 1};
    shl.b32 %r17, %r18, 6;
    add.u32 %r17, %r17, %lgb;
    add.u32 %r17, %r17, %r16;
    st.shared.v4.f32 [%r17+{SK_Z}], {{%S0, %S1, %S2, %S3}};
    setp.eq.u32 %p1, %lane, 0;
    shl.b32 %r17, %r18, 3;
    add.u32 %r17, %r17, %lgb;
    @%p1 st.shared.u64 [%r17+{SK_A}], %hro;""")
    return "\n".join(L)


def sk_clear():
    """Lanes 0..SKB-1: the batch's h_res addresses = 0 (every slot empty)."""
    return f"""    setp.lt.u32 %p1, %lane, {SKB};
    shl.b32 %r16, %lane, 3;
    add.u32 %r16, %r16, %lgb;
    mov.u64 %rd1, 0;
    @%p1 st.shared.u64 [%r16+{SK_A}], %rd1;"""


def sk_batch():
    """The h_res of the batch's tokens (every lane): lane b takes slot b's z_res matrix, the
    one-thread Sinkhorn (sinkhorn.unrolled, the decode kernel's operations and bits) runs on all
    SKB slots at once, the lanes of slots with an address store their matrices, and the slots
    are cleared. Empty slots compute on stale words and store nothing."""
    L = []
    e = L.append
    e(f"""PC_SK_BATCH:
    bar.warp.sync -1;
    shl.b32 %r16, %lane, 6;
    add.u32 %r16, %r16, %lgb;""")
    for i in range(4):
        e(f"    ld.shared.v4.f32 {{%S{4 * i}, %S{4 * i + 1}, %S{4 * i + 2}, %S{4 * i + 3}}}, [%r16+{SK_Z + 16 * i}];")
    e(f"""    shl.b32 %r17, %lane, 3;
    add.u32 %r17, %r17, %lgb;
    ld.shared.u64 %hro, [%r17+{SK_A}];
    setp.ne.u64 %p1, %hro, 0;
    vote.sync.any.pred %p1, %p1, 0xffffffff;
    @!%p1 bra PC_SK_DONE;                   // every slot empty (the pair's other half, past T)""")
    sinkhorn.unrolled(4, lambda i, j: f"%S{4 * i + j}", e, "PC_SKB_")
    e("""    setp.eq.u64 %p1, %hro, 0;
    @%p1 bra PC_SK_STORED;                  // an empty slot""")
    for q in range(16):
        e(f"    st.global.f32 [%hro+{4 * q}], %S{q};")
    e("""PC_SK_STORED:
    bar.warp.sync -1;                       // every lane read its slot's address""")
    e(sk_clear())
    e("PC_SK_DONE:")
    return "\n".join(L)


def post_lane_consts(pw, nw):
    """Fused entry, a warp that computes x' (`pw`: its index among the warps sharing the n-tiles):
    the lane constants of post_mma (row offsets of its ldmatrix / stmatrix lane, its h_res /
    h_post words, its n-tile range)."""
    return f"""
    // x' lane constants: lane l gives row (token l/4 % 4, stream l % 4) to ldmatrix / stmatrix
    // and f row (token l % 4); fragment lane (g, q) reads R words (token g/4, k = g % 4, j = 2(q%2) +
    // 0/1) and h_post[token g/4][k]
    mul.lo.u32 %xn0, {pw}, %NT;
    add.u32 %xn1, %xn0, %NT;
    div.u32 %xn0, %xn0, {nw};               // this warp's n-tiles: [pw NT / nw, (pw + 1) NT / nw)
    div.u32 %xn1, %xn1, {nw};
    mov.b32 %zr, 0;
    mov.f32 %fz, 0f00000000;
    shr.u32 %r2, %lane, 2;
    and.b32 %r2, %r2, 3;
    and.b32 %r3, %lane, 3;
    mul.lo.u32 %xlr, %r2, %tstride;
    mad.lo.u32 %xlr, %r3, %SS, %xlr;        // x row (token l/4 % 4, stream l % 4)
    shr.u32 %r4, %lane, 4;
    mad.lo.u32 %xlr, %r4, 16, %xlr;         // lanes 16..31: the next n-tile (ldmatrix / stmatrix .x4)
    shl.b32 %r4, %SS, 2;
    mad.lo.u32 %xlf, %r3, %tstride, %r4;    // f row (token l % 4)
    shr.u32 %r4, %lane, 3;
    and.b32 %r4, %r4, 1;
    mad.lo.u32 %xlf, %r4, 16, %xlf;         // lanes 8..15: the next n-tile (f's ldmatrix .x2)
    shr.u32 %r2, %gq, 2;                    // g / 4: token of row g (0, 1)
    and.b32 %r3, %gq, 3;                    // k
    mul.lo.u32 %hta, %r2, {HC};
    shl.b32 %hpk, %r3, 2;                   // h_post[k]
    and.b32 %r4, %q, 1;
    shl.b32 %r4, %r4, 1;                    // j0 = 2 (q % 2)
    shl.b32 %r5, %r4, 4;
    add.u32 %r5, %r5, %hpk;                 // V4: R[j0][k] at 16 j0 + 4 k (column k)
    shl.b32 %r6, %r3, 4;
    shl.b32 %r7, %r4, 2;
    add.u32 %r6, %r6, %r7;                  // Paper: R[k][j0] at 16 k + 4 j0 (row k)
    selp.u32 %hro0, %r6, %r5, %p_paper;
    add.u32 %hro0, %hro0, 16;               // h_res after h_post[4]
    selp.u32 %hrs, 4, 16, %p_paper;         // to j0 + 1
    shr.u32 %r4, %q, 1;
    setp.eq.u32 %p_nz, %r2, %r4;            // the block-diagonal: row token = column token
    and.b32 %r4, %q, 1;
    setp.eq.u32 %p_qe, %r4, 0;
    setp.lt.u32 %p_qlo, %q, 2;              // k8 columns 0..3: hi parts, 4..7: lo parts
    setp.ne.u32 %p_hi16, %r2, 0;"""


def post_mma(k, tag, nw, g_lo, g_hi):
    """Fused entry, after the stage of tile %tile landed (%st0): x' = post(x, f, h_post, h_res)
    (docs/math.md "post") of the 4-token groups g_lo .. g_hi - 1 of the tile, on the tensor cores,
    in place in the stage (the mix stores it to x_out); then an arrival on xready[%stage].
    Per group and 8-channel n-tile nt (this warp takes [pw NT / nw, (pw + 1) NT / nw), four at
    a time while it can):
      D[16 x 8] = A2 . B2 (m16n8k8) + A_lo . B + A_hi . B (m16n8k16), rows (token tl, stream k),
    B = x rows (tl, j) (ldmatrix.trans; K order 4 tl + j), A = the block-diagonal of the 4
    tokens' R (V4: R[j][k], Paper: R[k][j]) split into bf16 hi + lo (R to 2^-17: x is exact in
    bf16, the products exact, f32 accumulation), B2 = f of the 4 tokens twice, A2 = their h_post
    hi (columns 0..3) and lo (4..7). D -> bf16 -> stmatrix over the x rows it was read from."""
    L = []
    e = L.append
    if g_lo >= g_hi:
        return """    mov.u32 %r1, xready;
    mad.lo.u32 %r1, %stage, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // no x' share"""
    skip = "\n    bra XM_END;" if "noxf" in k.exp else ""
    e(f"""    // ---- post: x' of 4-token groups {g_lo} .. {g_hi - 1} of tile %tile (in place){skip}
    mov.u32 %xg, {g_lo};
XM_G:
    shl.b32 %r2, %xg, 2;                    // tb: the group's first token in the tile
    mad.lo.u32 %r3, %tstride, {TT}, %st0;
    mad.lo.u32 %r3, %r2, {HC}, %r3;
    add.u32 %r4, %r3, %hta;                 // (h_post, h_res) of token tb + g/4
    add.u32 %r5, %r4, %hro0;
    ld.shared.f32 %xr0, [%r5];
    ld.shared.f32 %xr2, [%r5+{2 * HC}];
    add.u32 %r5, %r5, %hrs;
    ld.shared.f32 %xr1, [%r5];
    ld.shared.f32 %xr3, [%r5+{2 * HC}];
    add.u32 %r5, %r4, %hpk;
    ld.shared.f32 %xh0, [%r5];
    ld.shared.f32 %xh1, [%r5+{2 * HC}];""")
    for d, a, b in (("0", "%xr0", "%xr1"), ("1", "%xr2", "%xr3")):
        e(f"""{split_bf16_via(f"%ah{d}", f"%al{d}", a, b, "%r6", "%f0", "%f1", "%f0", "%f1", interleaved=True)}
    selp.b32 %ah{d}, %ah{d}, 0, %p_nz;
    selp.b32 %al{d}, %al{d}, 0, %p_nz;""")
    for d, h in (("0", "%xh0"), ("1", "%xh1")):
        keep = "%r6, 0" if d == "0" else "0, %r6"
        e(f"""    cvt.rn.bf16x2.f32 %r6, %fz, {h};        // bf16(h_post) in the low half
    shl.b32 %r7, %r6, 16;
    mov.b32 %f0, %r7;
    sub.f32 %f0, {h}, %f0;
    cvt.rn.bf16x2.f32 %r7, %fz, %f0;        // its lo part
    selp.b32 %r6, %r6, %r7, %p_qlo;
    @%p_hi16 shl.b32 %r6, %r6, 16;          // column of token g/4 (odd: the high half)
    selp.b32 %a2{d}, {keep}, %p_qe;          // row g: q even; row g + 8: q odd""")
    def tiles(n):
        """x' of n (1 or 4) consecutive n-tiles from %pxa / %pfa: loads, then the n mma chains
        interleaved, then the stores (x4 / x2 loads cover two n-tiles: lanes 16.. / 8.. add 16)."""
        T_ = []
        if n == 1:
            T_.append("    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%xm0, %xm1}, [%pxa];")
            T_.append("    ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%xm2}, [%pfa];")
            B = [("%xm0", "%xm1", "%xm2")]
        else:
            for h in range(n // 2):
                m = 6 * h
                T_.append(f"    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%xm{m}, %xm{m + 1}, %xm{m + 2}, %xm{m + 3}}}, [%pxa+{32 * h}];")
                T_.append(f"    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{%xm{m + 4}, %xm{m + 5}}}, [%pfa+{32 * h}];")
            B = []
            for h in range(n // 2):
                m = 6 * h
                B += [(f"%xm{m}", f"%xm{m + 1}", f"%xm{m + 4}"), (f"%xm{m + 2}", f"%xm{m + 3}", f"%xm{m + 5}")]
        D = [[f"%xd{4 * i + c}" for c in range(4)] for i in range(n)]
        for i in range(n):
            T_.append(f"    {mma(MMA_BF16_K8, D[i], ['%a20', '%a21'], [B[i][2]], ['%fz'] * 4)}")
        for part in ("al", "ah"):
            for i in range(n):
                T_.append(f"    {mma(MMA_BF16, D[i], [f'%{part}0', '%zr', '%zr', f'%{part}1'], B[i][:2], D[i])}")
        for i in range(n):
            T_.append(f"    cvt.rn.bf16x2.f32 %xv{2 * i}, %xd{4 * i + 1}, %xd{4 * i};")
            T_.append(f"    cvt.rn.bf16x2.f32 %xv{2 * i + 1}, %xd{4 * i + 3}, %xd{4 * i + 2};")
        if n == 1:
            T_.append("    stmatrix.sync.aligned.m8n8.x2.shared.b16 [%pxa], {%xv0, %xv1};")
        else:
            for h in range(n // 2):
                v = 4 * h
                T_.append(f"    stmatrix.sync.aligned.m8n8.x4.shared.b16 [%pxa+{32 * h}], {{%xv{v}, %xv{v + 1}, %xv{v + 2}, %xv{v + 3}}};")
        return "\n".join(T_)

    e(f"""    mad.lo.u32 %r8, %r2, %tstride, %st0;
    mad.lo.u32 %r9, %xn0, 16, %r8;
    add.u32 %pxa, %r9, %xlr;
    add.u32 %pfa, %r9, %xlf;
    mov.u32 %xnt, %xn0;
XM_Q:
    // four n-tiles at once (independent mma chains: one tile's chain alone is latency-bound)
    add.u32 %r12, %xnt, 4;
    setp.gt.u32 %p1, %r12, %xn1;
    @%p1 bra XM_N;
{tiles(4)}
    add.u32 %pxa, %pxa, 64;
    add.u32 %pfa, %pfa, 64;
    mov.u32 %xnt, %r12;
    bra XM_Q;
XM_N:
    setp.ge.u32 %p1, %xnt, %xn1;
    @%p1 bra XM_GN;
{tiles(1)}
    add.u32 %pxa, %pxa, 16;
    add.u32 %pfa, %pfa, 16;
    add.u32 %xnt, %xnt, 1;
    bra XM_N;
XM_GN:
    add.u32 %xg, %xg, 1;
    setp.lt.u32 %p1, %xg, {g_hi};
    @%p1 bra XM_G;
XM_END:
    mov.u32 %r1, xready;
    mad.lo.u32 %r1, %stage, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // x' of this warp's n-tiles is in the stage
""")
    return "\n".join(L).replace("XM_", f"{tag}_")


def coef_post_prologue(k):
    """Fused entry, coefficient warp: the lane constants of its x' share (the last CWT / 4
    4-token groups of each tile of its parity, every n-tile)."""
    assert k.cwt % 4 == 0 and k.cwt <= TT
    return f"""
    // x' share: tokens {TT - k.cwt} .. {TT - 1} of the tiles of this warp's rounds{post_lane_consts(0, 1)}"""


def coef_post_share(k):
    """Fused entry, coefficient warp, top of round kk: its share of x' of tile kk (if the cluster
    has one), before barrier 2 of round kk: the math warps wait for it (xready) before the mma
    of tile kk, and it starts right after the round kk - 2 coefficients."""
    assert STAGES == 4
    return f"""
    setp.ge.u32 %p1, %kk, %nr;              // round nr only finishes tile nr - 1
    @%p1 bra CX_SKIP;
    and.b32 %stage, %kk, {STAGES - 1};
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mad.lo.u32 %tile, %kk, %ncl, %cid;
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %kk, 2;
    and.b32 %r2, %r2, 1;                    // fill kk / {STAGES} of the stage: that phase's parity
CX_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra CX_WAIT;
{post_mma(k, "CX", 1, (TT - k.cwt) // 4, TT // 4)}
CX_SKIP:"""


def post_warps(k):
    """Fused entry, warps NW + NCW ..: for every tile of the cluster in order, wait for its stage
    (full[s]), compute x' of its first (TT - CWT) / 4 4-token groups (the n-tiles alternate
    between the warps) and arrive on xready[s], which the math warps wait for instead of
    full[s]. They run up to the ring's depth ahead of the math warps, so the post math overlaps
    the mma, exchange and mix of earlier tiles."""
    return f"""
    // ================= post warps: x' of each landed stage ======================================
POST_WARP:
    sub.u32 %r1, %warp, {NW + NCW};{post_lane_consts("%r1", NPW)}
    mov.u32 %tile, %cid;
    mov.u32 %stage, 0;
    mov.u32 %phb, 0;
POST_LOOP:
    setp.ge.u32 %p1, %tile, %ntiles;
    @%p1 bra TILE_END;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %phb, %stage;
    and.b32 %r2, %r2, 1;
POST_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra POST_WAIT;
    mov.u32 %r2, 1;
    shl.b32 %r2, %r2, %stage;
    xor.b32 %phb, %phb, %r2;
{post_mma(k, "XF", NPW, 0, (TT - k.cwt) // 4)}
    add.u32 %tile, %tile, %ncl;
    add.u32 %stage, %stage, 1;
    setp.eq.u32 %p1, %stage, {STAGES};
    selp.u32 %stage, 0, %stage, %p1;
    bra.uni POST_LOOP;"""


class Entry:
    """One entry of pre_pc.ptx under construction: its kind (fused post_pre or pre; mix warps;
    TMA-filled ring with the h_pre exchange), the experiments it is built with, and its text."""

    def __init__(self, fused, mixw, tma, exp, cwt, stamp_ids, pair=False):
        self.fused, self.mixw, self.tma, self.exp, self.cwt, self.pair = fused, mixw, tma, exp, cwt, pair
        self.stages = PAIR_STAGES_MAX if pair and tma else STAGES  # the ring's most stages (mbarriers)
        self.nst = "%nst" if pair and tma else str(STAGES)  # its depth: the pair pre entry's is the half's
        self.stamp_ids = stamp_ids  # PST label numbers: unique over the file
        self.L = []
        self.e = self.L.append
        self.NOSINK = "\n    mov.u32 %iters, 0;" if "nosink" in exp else ""
        self.NOMIX = "\n    bra MIX_END;" if "nomix" in exp else ""
        name = (ENTRY_POST_PRE_M if mixw else ENTRY_POST_PRE) if fused else ENTRY_PRE
        if tma:
            assert mixw and not fused
            name = ENTRY_PRE_PAIR if pair else ENTRY_PRE_TMA
        elif pair:  # the fused entry on two clusters per tile (its math warps mix)
            assert fused and not mixw
            name = ENTRY_POST_PRE_PAIR
        self.name = name
        self.SREG = "%SS" if fused else "%C8"  # stream slice stride in a stage row
        # the mix and the ring's fills run beside the math warps (pre: mix warps; fused: the post warps)
        self.MIXW = mixw
        self.MIXERS = 32 * (NPW if fused else NMW)  # with MIXW: the threads that mix (and fill the ring)
        self.STAMPS = "stamps" in exp and not fused
        self.HX = tma or pair  # h_pre exchanged (the TMA and pair entries; see HX_SLOTS)
        # rounds between a tile's projection and its mix by the math warps: the fused pair entry's
        # h_pre comes after the other part's sums, so its math warps mix tile kk-2 in round kk
        self.LAG = 2 if pair and not tma else 1
        self.arg_bytes = FUSED_ARG_BYTES if fused else (TMA_ARG_BYTES if tma else PRE_DECODE.size)
        # PHI_BAR (pre entries): the mix warps fill stage 0, then wait for phi before stages 1..
        self.phi_bar = mixw and not fused and "nophibar" not in exp
        self.phi_bar_threads = NW * 32 + self.MIXERS
        # the mixers' copies: each mixing thread stands for NW * 32 // MIXERS of the math warps'
        # copier threads (virtual thread tm + MIXERS v: the same chunk mapping and fill count as
        # the fused entry's), its registers suffixed v
        self.VT = NW * 32 // self.MIXERS

    def st(self, idx, who):
        """A round stamp of the stamps experiment (pre entries only), else nothing."""
        return self.stamp(idx, who) if self.STAMPS else ""

    def stamp(self, idx, who):
        """pre_pc.stamps (pre entries only; timing builds): one thread writes (%globaltimer, %clock64) of
    round %kk at stamp k to the debug buffer at PreDecodeArgs + 80 (the workspace; the pair
    entry's past its exchange rows, PAIR_STAMP_LOAD): u64 pairs [ctaid][STAMP_ROUNDS][16].
    `who`: "math" (thread 0), "coef" (lane 0 of the round's
    coefficient warp), "mix" (the first mix thread). Empty in normal builds; read by
    tests/gpu_pre.rs profile_pc_phases."""
        if "stamps" not in self.exp:
            return ""
        self.stamp_ids[0] += 1
        lab = f"PST{self.stamp_ids[0]}"
        cond = {"math": "setp.ne.u32 %pst, %tx, 0;",
                "hpre": f"setp.ne.u32 %pst, %tx, {32 * HW0};",
                "coef": "setp.ne.u32 %pst, %lane, 0;",
                "mix": f"setp.ne.u32 %pst, %tx, {32 * (NW + NCW)};"}[who]
        return f"""
    // ---- EXP stamp {idx} ({who})
    {cond}
    setp.ge.or.u32 %pst, %kk, {STAMP_ROUNDS - 3}, %pst;  // rows 93..95: fill and drain
    @%pst bra {lab};
    mov.u64 %sgt, %globaltimer;
    mov.u64 %sck, %clock64;
    mov.u32 %srr, %ctaid.x;
    mad.lo.u32 %srr, %srr, {STAMP_ROUNDS}, %kk;
    mad.lo.u32 %srr, %srr, 16, {idx};
    mul.wide.u32 %sad, %srr, 16;
    add.u64 %sad, %stb, %sad;
    st.global.v2.u64 [%sad], {{%sgt, %sck}};
{lab}:"""

    def text(self):
        return "\n".join(self.L)


def copy_regs(v=None):
    """The registers of a copier thread's chunk mapping (issue, mapping): its own, or those of
    virtual copier v of a mixing thread (suffixed v)."""
    sfx = "" if v is None else f"v{v}"
    return SimpleNamespace(cso=f"%cso{sfx}", cgo=f"%cgo{sfx}", ctk=f"%ctk{sfx}", p_cp=f"%p_cp{sfx}",
                           cfs=f"%cfs{sfx}", tx="%tx" if v is None else f"%tvv{v}")


def hx_broadcast(k):
    """TMA entry, coefficient warp: h_pre of the own token to every CTA's hin (HX in the header);
    lane 0 stores it and inv_rms."""
    HXS = "".join(f"""
    ld.shared.f32 %f4, [%lgb+{4 * (1 + i)}];
    ld.shared.f32 %f6, [sm_base+{4 * i}];
    mul.f32 %f5, %f4, %f2;
    fma.rn.f32 %f5, %f5, %sc0, %f6;
{sigmoid("%f5", f"%w{i}")}
    @!%p_paper add.f32 %w{i}, %w{i}, %eps_hc;""" for i in range(4))
    HX_BCAST = f"""
    // h_pre of the own token (lanes 0..15 alike) -> hin[(kk-1) % {HXB}][rank] of CTA lane (every
    // CTA's mix waits for all {CL}, past T too); lane 0 stores it and inv_rms (tokens < T)
    setp.ge.u32 %p1, %lane, {CL};
    @%p1 bra HX_BC_END;
    ld.shared.f32 %f1, [%lgb];
{inv_rms("%f1", "%f2")}{HXS}
    sub.u32 %r13, %kk, 1;
    and.b32 %r13, %r13, {HXB - 1};
    mov.u32 %r14, hin;
    mad.lo.u32 %r14, %r13, {TT * 16}, %r14;
    mad.lo.u32 %r14, %rank, 16, %r14;
    mov.u32 %r15, hbar;
    mad.lo.u32 %r15, %r13, 8, %r15;
    mapa.shared::cluster.u32 %r14, %r14, %lane;
    mapa.shared::cluster.u32 %r15, %r15, %lane;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%w0, %w1, %w2, %w3}}, [%r15];
    setp.ne.u32 %p1, %lane, 0;
    setp.ge.or.u32 %p1, %r12, %T, %p1;{PAIR_HALF0 if k.pair else ""}
    @%p1 bra HX_BC_END;
    mul.wide.u32 %rd1, %r12, 4;
    ld.param.u64 %rd2, [p_args+{ARG['inv_rms']}];
    add.u64 %rd2, %rd2, %rd1;
    st.global.f32 [%rd2], %f2;
    mul.wide.u32 %rd1, %r12, 16;
    ld.param.u64 %rd2, [p_args+{ARG['h_pre']}];
    add.u64 %rd2, %rd2, %rd1;
    st.global.v4.f32 [%rd2], {{%w0, %w1, %w2, %w3}};
HX_BC_END:"""
    return HX_BCAST


def entry_start(k):
    """The entry line, the registers, the parameters, the prologue's prefetches and the mbarriers."""
    NOSINK, e, name, fused, tma, MIXW, MIXERS, STAMPS, HX = k.NOSINK, k.e, k.name, k.fused, k.tma, k.MIXW, k.MIXERS, k.STAMPS, k.HX
    arg_bytes = k.arg_bytes
    CW = "%CH" if k.pair else "%C"  # this cluster's channels of a stream
    e(f""".visible .entry {name}(
    .param .align {64 if tma else 8} .b8 p_args[{arg_bytes}]
)
.reqntid {THREADS_F if fused else THREADS_P}, 1, 1
.reqnctapercluster {CL}, 1, 1
{{
    .reg .pred %p<8>;
    .reg .pred %p_paper, %p_gk, %p_math, %p_cur, %p_push;
    .reg .pred %pj<{RMAX}>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<{32 * RMAX}>, %fs<2>;
    .reg .b64 %x, %phi, %scale, %base, %gk, %a, %hpre, %hpost, %hres, %inv, %xsb, %asb;
    .reg .b32 %T, %n, %C, %M, %xs, %as, %iters, %flags, %K, %C16, %C8, %NR, %tstride, %sstage;
    .reg .f32 %eps_norm, %eps_hc, %sc0, %sc1, %sc2;
    .reg .b32 %tx, %warp, %lane, %gq, %q, %rank, %cid, %ncl, %ntiles, %tlast;
    .reg .b32 %ptile, %pstage, %tile, %stage, %kk, %phb, %dsm, %st0, %xw, %gbb, %gab;
    .reg .b32 %ph<{24 * RMAX}>;
    .reg .b32 %xa<4>;
    .reg .b32 %xb<4>;
    .reg .f32 %pv<4>;
    .reg .f32 %acc<24>;
    .reg .f32 %gr<8>;
    .reg .f32 %ss0, %ss1;
    .reg .f32 %v<4>;
    .reg .f32 %w<4>;
    .reg .f32 %u<4>;
    .reg .f32 %y<4>;
    .reg .f32 %z<4>;
    .reg .b32 %sa, %sn;
    .reg .pred %ps;
{COEF_REGS}
    .reg .f32 %inv_t;
    .reg .f32 %mo<8>;
    .reg .b32 %it, %lgb, %nr, %wsr, %wsx;
    .reg .f32 %hss, %invk;
    .reg .b32 %ctps, %ctk, %cgo, %cso;
    .reg .pred %p_cp, %p_mx;
    .reg .b32 %mtp, %mtk, %mch, %tm;
    .reg .b32 %mcp, %mdr, %mcc, %mib, %mcb, %mx<16>, %my<16>;
    .reg .f32 %mq<8>, %mg<4>;
    .reg .pred %p_mb;
    .reg .b32 %csov<4>, %cgov<4>, %ctkv<4>, %cfsv<4>, %tvv<4>;
    .reg .pred %p_cpv<4>;
    .reg .b64 %hpo, %hro, %mbs;{FUSED_REGS if fused else ""}{PAIR_REGS if k.pair else ""}{STAMP_REGS if STAMPS else ""}
{load_args(skip=("%part", "%sync", "%cpc"))}{NOSINK}
{(PAIR_STAMP_LOAD if k.pair else STAMP_LOAD) + exit_stamps("prewait") if STAMPS else ""}{PAIR_HALF + PAIR_SETUP + PAIR_PHI_TO_L2 if k.pair else PHI_TO_L2}{TMAP_PREFETCH if tma else ""}
{GRID_DEPENDENCY}
    mov.u32 %tx, %tid.x;
    shr.u32 %warp, %tx, 5;
    and.b32 %lane, %tx, 31;{exit_stamps("entry") if STAMPS else ""}
    shr.u32 %gq, %lane, 2;
    and.b32 %q, %lane, 3;
    setp.lt.u32 %p_math, %warp, {NW};
    mov.u32 %rank, %cluster_ctarank;
    mov.u32 %cid, %clusterid.x;
    mov.u32 %ncl, %nclusterid.x;{PAIR_WALK if k.pair else ""}
    and.b32 %r1, %flags, 1;
    setp.ne.u32 %p_paper, %r1, 0;
    and.b32 %r1, %flags, 2;
    setp.ne.u32 %p_gk, %r1, 0;
    ld.global.nc.f32 %sc0, [%scale];
    ld.global.nc.f32 %sc1, [%scale+4];
    ld.global.nc.f32 %sc2, [%scale+8];
    shl.b32 %K, %C, 2;                      // n C (n = 4)
    cvt.rn.f32.u32 %invk, %K;
    rcp.rn.f32 %invk, %invk;                // 1/K (ss/K as ss * (1/K): within 1 ulp)
    shr.u32 %C16, {CW}, 4;                    // channels per CTA and stream
    shr.u32 %C8, {CW}, 3;                     // bytes of one stream slice
    shr.u32 %NR, {CW}, 7;                     // 32-element runs per CTA (C/4 / 32)
{(F_ROW.replace("%C,", CW + ",") if fused else (TMA_ROW.replace("%C,", CW + ",") if tma else ROW)).lstrip(chr(10))}
    shl.b32 %sstage, %tstride, 4;           // stage bytes ({TT} rows){F_STAGE if fused else ""}
    add.u32 %ntiles, %T, {TT - 1};
    shr.u32 %ntiles, %ntiles, 4;
    sub.u32 %tlast, %T, 1;
    mov.u32 %dsm, dsm;{TMA_DSM if tma else ""}
    // mbarriers: full[s] (TMA: two arrivals, the mix warps' armings; else the math threads'
    // noinc cp.async arrivals), gbar[b] (one arrival: thread 0's arming each round; TMA: armed
    // here, then by the coefficient warp that waited the phase); initialised and fenced before
    // any CTA of the cluster may signal them
    setp.ne.u32 %p1, %tx, 0;
    @%p1 bra INIT_END;""")
    for s in range(k.stages):
        e(f"    mbarrier.init.shared::cta.b64 [full+{8 * s}], {2 if tma else NW * 32};")
    if MIXW:
        for b_ in range(2):
            e(f"""    mbarrier.init.shared::cta.b64 [hready+{8 * b_}], {TT};
    mbarrier.init.shared::cta.b64 [mixed+{8 * b_}], {MIXERS};""")
    if HX:
        # hbar[b]: one arrival (the mix warps' arming, here for tiles 0..HXB-1, then after each mix)
        for b_ in range(HXB):
            e(f"""    mbarrier.init.shared::cta.b64 [hbar+{8 * b_}], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [hbar+{8 * b_}], {TT * 16};""")
    if fused:
        for s_ in range(STAGES):
            e(f"    mbarrier.init.shared::cta.b64 [xready+{8 * s_}], {NPW * 32 + (32 if k.cwt else 0)};")
    for b_ in range(HXG if HX else 2):
        e(f"    mbarrier.init.shared::cta.b64 [gbar+{8 * b_}], 1;")
        if HX:  # armed here for tiles 0..HXG-1, then by the coefficient warp that waited the phase
            e(f"    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [gbar+{8 * b_}], {CL * HX_SLOTS * 16};")
    e("""    fence.mbarrier_init.release.cluster;
INIT_END:
    // base[24] -> shared (warp NW's coefficient bodies read sm_base)
    setp.ge.u32 %p1, %tx, 24;
    @%p1 bra BASE_END;
    mul.wide.u32 %rd1, %tx, 4;
    add.u64 %rd1, %base, %rd1;
    ld.global.nc.f32 %f1, [%rd1];
    shl.b32 %r1, %tx, 2;
    mov.u32 %r2, sm_base;
    add.u32 %r2, %r2, %r1;
    st.shared.f32 [%r2], %f1;
BASE_END:""" + (f"""
    setp.eq.u32 %p1, %tx, 0;
    @%p1 st.shared.u32 [sm_base+{4 * 24}], %C0;     // fused pair entry: C0 for the math warps' mix""" if k.pair and not tma else "") + (exit_stamps("init") if STAMPS else "") + """
    barrier.cluster.arrive.release;         // the math warps wait after phi's loads are issued""")


def issue(k, tile_reg, stage_reg, tag, v=None):
    """Every math thread: its 16-byte cp.async copies of tile tile_reg into stage
        stage_reg (a fixed (stream, chunk) per thread, tokens %ctk + p %ctps), then
        cp.async.mbarrier.arrive.noinc on full[stage] (256 arrivals complete it); nothing past
        the last tile. (cp.async.bulk measures slower: one bulk copy per (token, stream)
        is issued from uniform registers, the lanes of a warp taking turns at ~50 cycles
        each: 0.25 us per tile on every warp.)
        Fused entry: a copier of stream s also copies the f chunk (same chunk of the slice, same
        token) on the passes p with p % 4 == s (every f chunk exactly once, spread over the
        streams), and threads < {TT} x 5 copy one 16-byte chunk of the tile's h_post / h_res."""
    R = copy_regs(v)
    e, fused = k.e, k.fused
    F_FAST_PRE = f"""    // f: the same chunk of f's slice (cgo less the stream's offset), rows step by f_stride
    ld.param.u32 %r18, [p_args+{A_FS}];
    ld.param.u64 %rd5, [p_args+{A_F}];
    mul.wide.u32 %rd6, %r14, %r18;
    shl.b64 %rd6, %rd6, 1;
    add.u64 %rd5, %rd5, %rd6;
    mul.lo.u32 %r19, {R.cfs}, %C;
    shl.b32 %r19, %r19, 1;
    sub.u32 %r19, {R.cgo}, %r19;
    cvt.u64.u32 %rd6, %r19;
    add.u64 %rd5, %rd5, %rd6;               // &f[first token][r C/16 + 8 chunk]
    mul.wide.u32 %rd6, %ctps, %r18;
    shl.b64 %rd6, %rd6, 1;                  // f: a step of tps rows
    mov.u32 %r19, 4;
    sub.u32 %r19, %r19, {R.cfs};
    mul.lo.u32 %r19, %r19, %SS;             // stage: f's slice is x slice 4 of the row
    mov.u32 %r13, 0;                        // pass
""" if fused else ""
    F_FAST = f"""
    and.b32 %r11, %r13, 3;
    setp.eq.u32 %p_f, %r11, {R.cfs};
    add.u32 %r11, %r16, %r19;
    @%p_f cp.async.cg.shared.global [%r11], [%rd5], 16;
    add.u64 %rd5, %rd5, %rd6;
    add.u32 %r13, %r13, 1;""" if fused else ""
    F_PASS = f"""
    sub.u32 %r11, %r12, {R.ctk};
    div.u32 %r11, %r11, %ctps;              // pass (the last tile only)
    and.b32 %r11, %r11, 3;
    setp.eq.u32 %p_f, %r11, {R.cfs};
    @!%p_f bra {tag}_PF;
    ld.param.u32 %r18, [p_args+{A_FS}];
    ld.param.u64 %rd5, [p_args+{A_F}];
    mul.wide.u32 %rd6, %r15, %r18;
    shl.b64 %rd6, %rd6, 1;
    add.u64 %rd5, %rd5, %rd6;
    mul.lo.u32 %r19, {R.cfs}, %C;
    shl.b32 %r19, %r19, 1;
    sub.u32 %r19, {R.cgo}, %r19;
    cvt.u64.u32 %rd6, %r19;
    add.u64 %rd5, %rd5, %rd6;
    mov.u32 %r19, 4;
    sub.u32 %r19, %r19, {R.cfs};
    mad.lo.u32 %r19, %r19, %SS, %r16;
    cp.async.cg.shared.global [%r19], [%rd5], 16;
{tag}_PF:""" if fused else ""
    F_HC = f"""
{tag}_HC:
    // h_post (chunk 0) / h_res rows (chunks 1..4) of token tx / 5 -> stage + {TT} rows + 80 tk + 16 c
    setp.ge.u32 %p3, {R.tx}, {TT * 5};
    @%p3 bra {tag}_ARRIVE;
    div.u32 %r12, {R.tx}, 5;
    mul.lo.u32 %r13, %r12, 5;
    sub.u32 %r13, {R.tx}, %r13;                // chunk c
    shl.b32 %r14, {tile_reg}, 4;
    add.u32 %r14, %r14, %r12;
    min.u32 %r14, %r14, %tlast;             // token (clamped)
    setp.eq.u32 %p3, %r13, 0;
    ld.param.u64 %rd2, [p_args+{A_HPI}];
    mul.wide.u32 %rd3, %r14, 16;
    @%p3 add.u64 %rd2, %rd2, %rd3;
    @!%p3 ld.param.u64 %rd2, [p_args+{A_HRI}];
    mul.wide.u32 %rd3, %r14, 64;
    @!%p3 add.u64 %rd2, %rd2, %rd3;
    sub.u32 %r15, %r13, 1;
    mul.wide.u32 %rd3, %r15, 16;
    @!%p3 add.u64 %rd2, %rd2, %rd3;
    mad.lo.u32 %r16, {stage_reg}, %sstage, %dsm;
    mad.lo.u32 %r16, %tstride, {TT}, %r16;
    mad.lo.u32 %r16, {R.tx}, 16, %r16;
    cp.async.cg.shared.global [%r16], [%rd2], 16;""" if fused else ""
    e(f"""    // ---- refill: tile {tile_reg} -> stage {stage_reg}
    setp.ge.u32 %p2, {tile_reg}, %ntiles;
    @%p2 bra {tag}_END;
    mad.lo.u32 %r16, {stage_reg}, %sstage, %dsm;
    add.u32 %r16, %r16, {R.cso};               // this thread's chunk of token {R.ctk} in the stage
    @!{R.p_cp} bra {tag}_{"HC" if fused else "ARRIVE"};
    shl.b32 %r14, {tile_reg}, 4;
    add.u32 %r14, %r14, {R.ctk};               // token of the first pass
    mov.u32 %r12, {R.ctk};
    ld.param.u32 %r17, [p_args+{ARG['x_stride']}];        // x row stride (elements; parameters are re-read
    ld.param.u64 %rd4, [p_args+{ARG['x']}];          // where used: fewer live registers beside phi)
    shl.b32 %r15, {tile_reg}, 4;
    add.u32 %r15, %r15, {TT - 1};
    setp.gt.u32 %p3, %r15, %tlast;
    @%p3 bra {tag}_PASS;                    // the last tile: rows clamped to T - 1
    // a whole tile: row pointers step by tps rows
    mul.wide.u32 %rd2, %r14, %r17;
    shl.b64 %rd2, %rd2, 1;
    add.u64 %rd2, %rd2, %rd4;
    cvt.u64.u32 %rd3, {R.cgo};
    add.u64 %rd2, %rd2, %rd3;
    mul.wide.u32 %rd3, %ctps, %r17;
    shl.b64 %rd3, %rd3, 1;
    mul.lo.u32 %r15, %ctps, %tstride;
{F_FAST_PRE if fused else ""}{tag}_FAST:
    cp.async.cg.shared.global [%r16], [%rd2], 16;{F_FAST if fused else ""}
    add.u64 %rd2, %rd2, %rd3;
    add.u32 %r16, %r16, %r15;
    add.u32 %r12, %r12, %ctps;
    setp.lt.u32 %p3, %r12, {TT};
    @%p3 bra {tag}_FAST;
    bra {tag}_{"HC" if fused else "ARRIVE"};
{tag}_PASS:
    min.u32 %r15, %r14, %tlast;
    mul.wide.u32 %rd2, %r15, %r17;
    shl.b64 %rd2, %rd2, 1;
    add.u64 %rd2, %rd2, %rd4;
    cvt.u64.u32 %rd3, {R.cgo};
    add.u64 %rd2, %rd2, %rd3;
    cp.async.cg.shared.global [%r16], [%rd2], 16;{F_PASS if fused else ""}
    add.u32 %r12, %r12, %ctps;
    add.u32 %r14, %r14, %ctps;
    mad.lo.u32 %r16, %ctps, %tstride, %r16;
    setp.lt.u32 %p3, %r12, {TT};
    @%p3 bra {tag}_PASS;{F_HC if fused else ""}
{tag}_ARRIVE:
    mov.u32 %r10, full;
    mad.lo.u32 %r10, {stage_reg}, 8, %r10;
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r10];
{tag}_END:""")


def phi_fragments(k):
    """Math warps: phi's slice (times gamma_k) as bf16 hi / lo mma fragments in registers; the
    other warps wait for the opening cluster barrier and go to their own loops."""
    e, fused, tma, MIXW, STAMPS, phi_bar, phi_bar_threads = k.e, k.fused, k.tma, k.MIXW, k.STAMPS, k.phi_bar, k.phi_bar_threads
    e("""    @!%p_math bra CLUSTER_WAIT;
    // ================= math warps: phi fragments of runs w + 8j into registers ==============""")
    if STAMPS:
        e(exit_stamps("phi", "_s", 8))
    # pass 1: every run's loads (phi: rows g, g+8, 16+g x 8 floats; gamma_k: 8 floats) issued
    # before any is used. The fragments are the prologue's critical path: loaded run by run
    # (one trip each) they take 6 us, the later runs queued behind the first fills' traffic
    # (phase stamps); issued at once they land before it.
    for j in range(RMAX):
        e(f"""    // run j = {j}: rho = w + {NW * j}
    add.u32 %r1, %warp, {NW * j};
    setp.lt.u32 %pj{j}, %r1, %NR;
    @!%pj{j} bra PHL{j}_END;""")
        if tma:
            e("""    bfe.u32 %r3, %r1, 1, 2;                 // TMA entry: stream i = (rho / 2) % 4
    shr.u32 %r4, %r1, 3;
    shl.b32 %r4, %r4, 6;                    // block rho / 8: channels 64 (rho / 8) ..
    and.b32 %r2, %r1, 1;
    mad.lo.u32 %r4, %r2, 32, %r4;           // + 32 (rho % 2)
    mad.lo.u32 %r4, %q, 8, %r4;             // + 8q: local channel
    mad.lo.u32 %r5, %rank, %C16, %r4;""" + ("""
    add.u32 %r5, %r5, %C0;                  // pair entry: this half's first channel""" if k.pair else "") + """
    mad.lo.u32 %r5, %r3, %C, %r5;           // k = i C + r C/16 + cl""")
        else:
            e("""    shl.b32 %r2, %r1, 5;
    mad.lo.u32 %r2, %q, 8, %r2;             // slice element e = 32 rho + 8q
    div.u32 %r3, %r2, %C16;                 // stream i
    mul.lo.u32 %r4, %r3, %C16;
    sub.u32 %r4, %r2, %r4;                  // local channel
    mad.lo.u32 %r5, %rank, %C16, %r4;""" + ("""
    add.u32 %r5, %r5, %C0;                  // pair entry: this half's first channel""" if k.pair else "") + """
    mad.lo.u32 %r5, %r3, %C, %r5;           // k = i C + r C/16 + cl""")
        for ri, roff in enumerate((0, 8, 16)):
            f0 = 24 * j + 8 * ri
            e(f"""    add.u32 %r6, %gq, {roff};
    mad.lo.u32 %r6, %r6, %K, %r5;""")
            if "nophi" in k.exp:  # timing experiment: the fragments from a register, not memory
                e("\n".join(f"    mov.b32 %f{f0 + m}, %r6;" for m in range(8)))
            else:
                e(f"""    mul.wide.u32 %rd1, %r6, 4;
    add.u64 %rd1, %phi, %rd1;
    ld.global.nc.v4.f32 {{%f{f0}, %f{f0 + 1}, %f{f0 + 2}, %f{f0 + 3}}}, [%rd1];
    ld.global.nc.v4.f32 {{%f{f0 + 4}, %f{f0 + 5}, %f{f0 + 6}, %f{f0 + 7}}}, [%rd1+16];""")
        g0 = 24 * RMAX + 8 * j
        e(f"""    @!%p_gk bra PHL{j}_END;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
    ld.global.nc.v4.f32 {{%f{g0}, %f{g0 + 1}, %f{g0 + 2}, %f{g0 + 3}}}, [%rd1];
    ld.global.nc.v4.f32 {{%f{g0 + 4}, %f{g0 + 5}, %f{g0 + 6}, %f{g0 + 7}}}, [%rd1+16];
PHL{j}_END:""")
    # the opening cluster barrier's wait, with phi's loads in flight (they need no peer)
    e("""    barrier.cluster.wait.acquire;""" + (exit_stamps("clustered") if STAMPS else "") + """
    bra.uni PHI_SPLIT;
CLUSTER_WAIT:
    barrier.cluster.wait.acquire;""")
    if fused:
        e(f"""    setp.ge.u32 %p1, %warp, {NW + NCW};
    @%p1 bra POST_WARP;""")
    if MIXW and not fused:
        e(f"""    setp.ge.u32 %p1, %warp, {NW + NCW};
    @%p1 bra MIX_WARP;""")
    e("""    bra.uni COEF_WARP;
PHI_SPLIT:""")
    # pass 2: times gamma_k, then the split into hi and lo bf16 words
    for j in range(RMAX):
        base = 24 * j
        g0 = 24 * RMAX + 8 * j
        e(f"""    @!%pj{j} bra PHI{j}_ZERO;
    @!%p_gk bra GK{j};""")
        for m in range(24):
            e(f"    mul.f32 %f{base + m}, %f{base + m}, %f{g0 + m % 8};")
        e(f"GK{j}:")
        if STAMPS:
            e(exit_stamps("phi", f"_i{j}", 2 * j))
        for ri in range(3):
            for m in range(4):
                hi = base + ri * 4 + m          # hi words: 0..11 of the run
                lo = base + 12 + ri * 4 + m     # lo words: 12..23
                x0, x1 = base + 8 * ri + 2 * m, base + 8 * ri + 2 * m + 1
                e(split_bf16_via(f"%ph{hi}", f"%ph{lo}", f"%f{x0}", f"%f{x1}", "%r7", "%fs0", "%fs1", "%fs0", "%fs1"))
        e(f"    bra PHI{j}_END;")
        e(f"PHI{j}_ZERO:")
        for r_ in range(base, base + 24):
            e(f"    mov.b32 %ph{r_}, 0;")
        e(f"PHI{j}_END:")
        if STAMPS:
            e(exit_stamps("phi", f"_e{j}", 2 * j + 1))
    if phi_bar:
        e(f"""    barrier.arrive {PHI_BAR}, {phi_bar_threads};      // phi is in: the mix warps fill stages 1..""")
    if STAMPS:
        e(exit_stamps("ready", "_phi"))


def mapping(k, tid, nthr, v=None):
    """The copy (issue) and mix item mappings of `nthr` threads, `tid` this one's index."""
    R = copy_regs(v)
    fused, SREG = k.fused, k.SREG
    CW = "%CH" if k.pair else "%C"  # the mix items: this cluster's channels
    # the copies: the fused pair entry's of its part of C (the TMA entries' copy registers are unused)
    CC = "%CH" if k.pair and not k.tma else "%C"
    C0 = f"""
    add.u32 {R.cgo}, {R.cgo}, %C0;                 // pair entry: this half's first channel""" if k.pair and not k.tma else ""
    return f"""    // ---- copy mapping: ipt = C/32 16-byte chunks per token row (4 streams x C/128); thread t
    // < tps ipt (tps = 256 / ipt tokens per pass) copies chunk t % ipt of tokens t / ipt + p tps
    shr.u32 %r1, {CC}, 5;                     // ipt
    mov.u32 %ctps, {nthr};
    div.u32 %ctps, %ctps, %r1;
    mul.lo.u32 %r2, %ctps, %r1;
    setp.lt.u32 {R.p_cp}, {tid}, %r2;
    div.u32 {R.ctk}, {tid}, %r1;
    setp.lt.and.u32 {R.p_cp}, {R.ctk}, {TT}, {R.p_cp}; // C < 512: a pass holds more than the tile
    mul.lo.u32 %r2, {R.ctk}, %r1;
    sub.u32 %r2, {tid}, %r2;                  // chunk of the row
    shr.u32 %r3, {CC}, 7;                     // chunks per stream slice
    div.u32 %r4, %r2, %r3;                  // stream
{"    mov.u32 " + R.cfs + ", %r4;" + chr(10) if fused else ""}    mul.lo.u32 %r5, %r4, %r3;
    sub.u32 %r5, %r2, %r5;                  // chunk of the slice
    mul.lo.u32 {R.cgo}, %r4, %C;
    mad.lo.u32 {R.cgo}, %rank, %C16, {R.cgo};{C0}
    shl.b32 %r6, %r5, 3;
    add.u32 {R.cgo}, {R.cgo}, %r6;
    shl.b32 {R.cgo}, {R.cgo}, 1;                  // byte offset in an x row
    mul.lo.u32 {R.cso}, {R.ctk}, %tstride;
    mad.lo.u32 {R.cso}, %r4, {SREG}, {R.cso};
    mad.lo.u32 {R.cso}, %r5, 16, {R.cso};         // byte offset in a stage
    shr.u32 %r1, {CW}, 7;                     // cpt
    mov.u32 %mtp, {nthr};
    div.u32 %mtp, %mtp, %r1;
    mul.lo.u32 %r2, %mtp, %r1;
    setp.lt.u32 %p_mx, {tid}, %r2;
    div.u32 %mtk, {tid}, %r1;
    mul.lo.u32 %r2, %mtk, %r1;
    sub.u32 %mch, {tid}, %r2;
    // ---- prologue: tiles cid + j ncl into stages j < {STAGES}"""


def prologue_fill(k, tag):
    e = k.e
    for j in range(STAGES):
        e(f"""    mad.lo.u32 %r20, %ncl, {j}, %cid;
    mov.u32 %r21, {j};""")
        issue(k, "%r20", "%r21", f"{tag}{j}")


def tile_loop(k):
    """The prologue fills (math warps fill the ring themselves), then the round loop: wait for the
    stage, the projection's mma of the tile and the warp partials."""
    e, fused, tma, MIXW, st = k.e, k.fused, k.tma, k.MIXW, k.st
    if not MIXW:
        e(mapping(k, "%tx", NW * 32))
        prologue_fill(k, "PRO")
    e(f"""    mov.u32 %tile, %cid;
    mov.u32 %stage, 0;
    mov.u32 %kk, 0;
    mov.u32 %phb, 0;                        // parity bits of full[s]
{TMA_XW if tma else XW}{XADJ if fused else ""}{(WSUM_SETUP_PACKED if k.pair and not tma else WSUM_SETUP) if k.HX else ""}
    // ================= the tile loop: iteration kk computes tile kk's partials and pushes
    // them, then finishes tile kk-1 (its pushes had a whole mma phase to arrive) =============
TILE_LOOP:{st(0, "math")}
    setp.lt.u32 %p_cur, %tile, %ntiles;
    @!%p_cur bra MMA_END;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mov.u32 %r1, {"xready" if fused else "full"};{"                  // x' in the stage (the post warps)" if fused else ""}
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %phb, %stage;
    and.b32 %r2, %r2, 1;
FULL_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra FULL_WAIT;{st(1, "math")}
    mov.u32 %r2, 1;
    shl.b32 %r2, %r2, %stage;
    xor.b32 %phb, %phb, %r2;
    // mma: A = x (rows = tokens g, g+8), B = phi (columns = logits 8nb + g), D = acc[nb]""")
    for i in range(24):
        e(f"    mov.f32 %acc{i}, 0f00000000;")
    for i in range(8):
        e(f"    mov.f32 %gr{i}, 0f00000000;")
    e("""    add.u32 %r3, %st0, %xw;                 // token g""")
    if tma:
        e("""    add.u32 %r4, %r3, 1024;                 // token g + 8 (8 rows of 128 bytes; same swizzle)""")
    else:
        e("""    mad.lo.u32 %r4, %tstride, 8, %r3;       // token g + 8""")
    XSTEP = TBLK if tma else 64 * NW  # bytes from run w + 8j to run w + 8(j + 1)
    for j in range(RMAX):
        base = 24 * j
        if fused:  # the run's stream shift (fused rows: 16 bytes after each stream slice)
            e(f"""    @!%pj{j} bra MMA_{j}_END;
    bfe.u32 %r5, %xadj, {8 * j}, 8;
    add.u32 %r6, %r3, %r5;
    add.u32 %r7, %r4, %r5;
    ld.shared.v4.b32 {{%xa0, %xa1, %xa2, %xa3}}, [%r6+{64 * NW * j}];
    ld.shared.v4.b32 {{%xb0, %xb1, %xb2, %xb3}}, [%r7+{64 * NW * j}];""")
        else:
            e(f"""    @!%pj{j} bra MMA_{j}_END;
    ld.shared.v4.b32 {{%xa0, %xa1, %xa2, %xa3}}, [%r3+{XSTEP * j}];
    ld.shared.v4.b32 {{%xb0, %xb1, %xb2, %xb3}}, [%r4+{XSTEP * j}];""")
        # ss on the tensor cores: the Gram matrix x x^T of the tile (B = the same x fragments,
        # n-tile 0 = tokens 0..7, 1 = tokens 8..15); its diagonal is ss (bf16 products are exact,
        # f32 accumulation). 32 unpack + FMA instructions per run instead would bind the mma
        # phase by instruction issue, not by the tensor pipe.
        for kb in range(2):
            A = f"{{%xa{2 * kb}, %xb{2 * kb}, %xa{2 * kb + 1}, %xb{2 * kb + 1}}}"
            for nt, src in ((0, "%xa"), (1, "%xb")):
                acc = [f"%gr{4 * nt + i}" for i in range(4)]
                e(f"    {mma(MMA_BF16, acc, A, [f'{src}{2 * kb}', f'{src}{2 * kb + 1}'], acc)}")
        if "nomma" in k.exp:
            e(f"MMA_{j}_END:")
            continue
        for kb in range(2):
            A = f"{{%xa{2 * kb}, %xb{2 * kb}, %xa{2 * kb + 1}, %xb{2 * kb + 1}}}"
            for part in range(2):
                for nb in range(3):
                    w0 = base + 12 * part + 4 * nb + 2 * kb
                    acc = [f"%acc{12 * (j % 2) + 4 * nb + i}" for i in range(4)]
                    e(f"    {mma(MMA_BF16, acc, A, [f'%ph{w0}', f'%ph{w0 + 1}'], acc)}")
        e(f"MMA_{j}_END:")
    e("    // odd runs accumulated apart (two chains per logit tile in flight); joined in fixed order")
    for i in range(12):
        e(f"    add.f32 %acc{i}, %acc{i}, %acc{12 + i};")
    e("""    // the Gram diagonal: lane (g, q = g / 2) holds ss of token g (c0 / c1 of n-tile 0 for g
    // even / odd) and of token g + 8 (c2 / c3 of n-tile 1)
    and.b32 %r5, %gq, 1;
    setp.ne.u32 %p1, %r5, 0;
    selp.f32 %ss0, %gr1, %gr0, %p1;
    selp.f32 %ss1, %gr7, %gr6, %p1;""")
    e(f"""    // warp partials -> red[w][token][28] (logits 0..23, ss at 24): lane (g, q) holds tokens
    // g, g + 8 x logits 8nb + 2q, +1
    mov.u32 %r5, red;
    mad.lo.u32 %r5, %warp, {TT * 112}, %r5;
    mad.lo.u32 %r6, %gq, 112, %r5;          // &red[w][g][0]
    shl.b32 %r7, %q, 3;
    add.u32 %r7, %r6, %r7;                  // + logit 2q""")
    for nb in range(3):
        e(f"""    st.shared.v2.f32 [%r7+{32 * nb}], {{%acc{4 * nb}, %acc{4 * nb + 1}}};
    st.shared.v2.f32 [%r7+{32 * nb + 8 * 112}], {{%acc{4 * nb + 2}, %acc{4 * nb + 3}}};""")
    bar1 = "" if k.HX and "nowsum" in k.exp else f"\n    barrier.sync 1, {NW * 32};"
    e(f"""    shr.u32 %r5, %gq, 1;
    setp.eq.u32 %p1, %q, %r5;
    @%p1 st.shared.f32 [%r6+96], %ss0;
    @%p1 st.shared.f32 [%r6+{8 * 112 + 96}], %ss1;{st(2, "math")}
MMA_END:{bar1}{st(3, "math")}""")


# TMA entry, the math warps before their first round: what the warp sums of every round need of
# this lane (threads t < 224), computed once: %wsr = red[4h][tk][f] and %wsx = tk << 16 | the
# offset of [rank][f] in a gather buffer. Out of the round, the division by 7 and its address
# arithmetic gained at most 1% (H100, C = 7168, T = 8192: 258.9-259.0 us against 259.9-263.5 in
# one call): the warp sums' ~700 cycles a round are their shared loads and shuffles.
WSUM_SETUP = f"""
    shr.u32 %r12, %lane, 4;                 // h
    and.b32 %r13, %lane, 15;
    mad.lo.u32 %r13, %warp, 16, %r13;       // j
    div.u32 %r9, %r13, 7;                   // tk
    mul.lo.u32 %r10, %r9, 7;
    sub.u32 %r10, %r13, %r10;               // f
    mov.u32 %wsr, red;
    mad.lo.u32 %wsr, %r9, 112, %wsr;
    mad.lo.u32 %wsr, %r10, 16, %wsr;
    mad.lo.u32 %wsr, %r12, {4 * TT * 112}, %wsr;   // warp 4h
    mul.lo.u32 %wsx, %rank, {HX_SLOTS * 16};
    mad.lo.u32 %wsx, %r10, 16, %wsx;
    shl.b32 %r9, %r9, 16;
    or.b32 %wsx, %wsx, %r9;"""


# The fused pair entry's math warps sit at the 168 registers 12 warps allow: there the two words
# are one, %wsx = red offset (14 bits) | gather offset << 14 (11 bits) | tk << 25, unpacked each
# round (3 instructions).
WSUM_SETUP_PACKED = (WSUM_SETUP.replace("    mov.u32 %wsr, red;\n    mad.lo.u32 %wsr, %r9, 112, %wsr;",
                                        "    mul.lo.u32 %wsr, %r9, 112;")
                     .replace("    shl.b32 %r9, %r9, 16;\n    or.b32 %wsx, %wsx, %r9;", """    shl.b32 %wsx, %wsx, 14;
    or.b32 %wsx, %wsx, %wsr;
    shl.b32 %r9, %r9, 25;
    or.b32 %wsx, %wsx, %r9;"""))
assert "red" not in WSUM_SETUP_PACKED and "shl.b32 %r9, %r9, 25;" in WSUM_SETUP_PACKED


def warp_sums_hx(k):
    """TMA entry: the warp partials summed and pushed to the token's CTA (HX in the header)."""
    e, HX, st = k.e, k.HX, k.st
    packed = k.pair and not k.tma
    if HX:
        e(f"""    // ---- threads t < 224 (warps 0..6): lane l sums half h = l / 16 of the warps (4h .. 4h + 3)
    // for j = 16 w + l % 16 = (token tk = j / 7, float4 f = j % 7) in order; lane l + 16 hands its
    // half to lane l, which adds the two (h 0 + h 1: a fixed order) and st.async's the float4 to
    // CTA tk (the pushes after barrier 2, as 16 bulk copies from a staging buffer, cost the
    // math warps ~460-580 cycles a round: fence, barrier, serial issue). Addresses: WSUM_SETUP.
    setp.lt.u32 %p_push, %tx, {2 * TT * 7};
    and.pred %p_push, %p_push, %p_cur;
    @!%p_push bra WSUM_END;""")
        if "nowsum" in k.exp:
            e("\n".join(f"    mov.f32 %v{c}, 0f00000000;" for c in range(4)))
        elif packed:
            e("""    and.b32 %r11, %wsx, 0x3fff;
    mov.u32 %r10, red;
    add.u32 %r11, %r11, %r10;               // red[4h][tk][f]""")
            ordered_sum(e, "%r11", TT * 112, NW // 2, "WSUM")
        else:
            ordered_sum(e, "%wsr", TT * 112, NW // 2, "WSUM")
        e(f"""    shfl.sync.down.b32 %u0, %v0, 16, 31, -1;
    shfl.sync.down.b32 %u1, %v1, 16, 31, -1;
    shfl.sync.down.b32 %u2, %v2, 16, 31, -1;
    shfl.sync.down.b32 %u3, %v3, 16, 31, -1;
    setp.ge.u32 %p1, %lane, 16;
    @%p1 bra WSUM_END;
    add.f32 %v0, %v0, %u0;
    add.f32 %v1, %v1, %u1;
    add.f32 %v2, %v2, %u2;
    add.f32 %v3, %v3, %u3;
    and.b32 %r12, %kk, {HXG - 1};
    mov.u32 %r14, gat;
    mad.lo.u32 %r14, %r12, {CL * HX_SLOTS * 16}, %r14;
    {"bfe.u32 %r13, %wsx, 14, 11" if packed else "and.b32 %r13, %wsx, 0xffff"};
    add.u32 %r14, %r14, %r13;               // gat[kk % {HXG}][rank][f] ...
    mov.u32 %r15, gbar;
    mad.lo.u32 %r15, %r12, 8, %r15;
    shr.u32 %r9, %wsx, {25 if packed else 16};                  // tk
    mapa.shared::cluster.u32 %r14, %r14, %r9;   // ... of CTA tk
    mapa.shared::cluster.u32 %r15, %r15, %r9;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%v0, %v1, %v2, %v3}}, [%r15];
WSUM_END:{st(4, "math")}""")


def sums_and_h_pre(k):
    """The cp.async entries: threads < 112 sum the 8 warps' partials of tile kk, warps HW0..
        compute h_pre of tile kk-1 from the gathered logits (HX: the token's CTA does, see HX)."""
    e, MIXW, STAMPS, st = k.e, k.MIXW, k.STAMPS, k.st
    e(f"""    // ---- threads < 112: (token tk = t / 7, float4 f = t % 7) summed over the 8 warps in order
    // (pushed after barrier 2)
    setp.lt.u32 %p_push, %tx, {TT * 7};
    and.pred %p_push, %p_push, %p_cur;
    @!%p_push bra WSUM_END;
    div.u32 %r9, %tx, 7;                    // tk
    mul.lo.u32 %r10, %r9, 7;
    sub.u32 %r10, %tx, %r10;                // f
    mov.u32 %r11, red;
    mad.lo.u32 %r11, %r9, 112, %r11;
    mad.lo.u32 %r11, %r10, 16, %r11;""")
    ordered_sum(e, "%r11", TT * 112, NW, "WSUM")
    e(f"""    mov.u32 %r12, psum;
    mad.lo.u32 %r12, %tx, 16, %r12;
    setp.eq.u32 %p1, %r10, 6;
    @!%p1 st.shared.v4.f32 [%r12], {{%v0, %v1, %v2, %v3}};   // psum[tk][f]
    mov.u32 %r12, pss;
    mad.lo.u32 %r12, %r9, 4, %r12;
    @%p1 st.shared.f32 [%r12], %v0;         // f = 6: ss -> pss[tk] (pushed 4 tokens per float4)
WSUM_END:{st(4, "math")}
    // ---- math warps w >= HW0 (while warps < HW0 sum the partials above): tile kk-1's tokens
    // 4 (w - HW0) + t (b' = (kk-1) & 1). Lane = 8 t + g: the h_pre logits (slot tk) and the ss
    // (slot SS_SLOT + w - HW0, component t) of sources 2g and 2g + 1 added, then a butterfly over
    // the 8 lanes g (a fixed tree of commutative adds: the same bits in every lane and every CTA)
    setp.eq.u32 %p1, %kk, 0;
    setp.lt.or.u32 %p1, %warp, {HW0}, %p1;
    @%p1 bra HPRE_END;""")
    wait_gather(e, "GAT_WAIT0")
    if STAMPS:
        e(k.stamp(5, "hpre"))
    e(f"""    and.b32 %r10, %lane, 7;                 // g
    shr.u32 %r11, %lane, 3;                 // t
    sub.u32 %r13, %warp, {HW0};
    shl.b32 %r12, %r13, 2;
    add.u32 %r12, %r12, %r11;               // tk
    mul.lo.u32 %r10, %r10, {2 * SLOTS * 16};
    add.u32 %r10, %r10, %gab;               // source 2g
    mad.lo.u32 %r9, %r12, 16, %r10;
    ld.shared.v4.f32 {{%v0, %v1, %v2, %v3}}, [%r9];
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r9+{SLOTS * 16}];
    mad.lo.u32 %r9, %r13, 16, %r10;
    ld.shared.v4.f32 {{%u0, %u1, %u2, %u3}}, [%r9+{SS_SLOT * 16}];
    ld.shared.v4.f32 {{%y0, %y1, %y2, %y3}}, [%r9+{(SS_SLOT + SLOTS) * 16}];
    setp.eq.u32 %p1, %r11, 1;
    @%p1 mov.f32 %u0, %u1;
    @%p1 mov.f32 %y0, %y1;
    setp.eq.u32 %p1, %r11, 2;
    @%p1 mov.f32 %u0, %u2;
    @%p1 mov.f32 %y0, %y2;
    setp.eq.u32 %p1, %r11, 3;
    @%p1 mov.f32 %u0, %u3;
    @%p1 mov.f32 %y0, %y3;
    add.f32 %hss, %u0, %y0;""")
    for c in range(4):
        e(f"    add.f32 %v{c}, %v{c}, %w{c};")
    for off in (1, 2, 4):
        for v in ("%v0", "%v1", "%v2", "%v3", "%hss"):
            e(f"    shfl.sync.bfly.b32 %r11, {v}, {off}, 31, -1;")
            e("    mov.b32 %f0, %r11;")
            e(f"    add.f32 {v}, {v}, %f0;")
    e(f"""    and.b32 %r11, %lane, 7;
    setp.ne.u32 %p1, %r11, 0;
    @%p1 bra HPRE_END;
    // lanes 8 t: inv_rms and h_pre of token tk (-> shs; CTA tk stores token tk's)
    mul.f32 %f3, %hss, %invk;
    add.f32 %f3, %f3, %eps_norm;
    rsqrt.approx.f32 %f3, %f3;              // inv_rms (2 ulp: the bf16 kernel's tolerance is 1e-3)
    shl.b32 %r13, %ptile, 4;
    add.u32 %r13, %r13, %r12;               // token
    setp.lt.u32 %p2, %r13, %T;
    setp.eq.u32 %p3, %r12, %rank;
    and.pred %p2, %p2, %p3;                 // CTA tk stores token tk's h_pre and inv_rms
    mul.wide.u32 %rd1, %r13, 4;
    ld.param.u64 %rd2, [p_args+{ARG['inv_rms']}];
    add.u64 %rd2, %rd2, %rd1;
    @%p2 st.global.f32 [%rd2], %f3;
    mul.wide.u32 %rd1, %r13, 16;
    ld.param.u64 %rd2, [p_args+{ARG['h_pre']}];
    add.u64 %rd2, %rd2, %rd1;""")
    for i in range(4):
        e(f"""    ld.shared.f32 %f4, [sm_base+{4 * i}];
    mul.f32 %f5, %v{i}, %f3;
    fma.rn.f32 %f5, %f5, %sc0, %f4;
{sigmoid("%f5", f"%w{i}")}
    @!%p_paper add.f32 %w{i}, %w{i}, %eps_hc;
    @%p2 st.global.f32 [%rd2+{4 * i}], %w{i};""")
    if MIXW:
        e(f"""    // shs[p] (p = round kk-1's parity) is free once the mix warps mixed round kk-3
    sub.u32 %r15, %kk, 1;
    and.b32 %r16, %r15, 1;                  // p
    shr.u32 %r17, %r15, 1;                  // this is use u of shs[p]
    setp.eq.u32 %p3, %r17, 0;
    @%p3 bra SHS_FREE;
    sub.u32 %r17, %r17, 1;
    and.b32 %r17, %r17, 1;                  // parity of mixed[p]'s phase u - 1
    mov.u32 %r18, mixed;
    mad.lo.u32 %r18, %r16, 8, %r18;
SHS_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r18], %r17;
    @!%p3 bra SHS_WAIT;
SHS_FREE:
    mov.u32 %r14, shs;
    mad.lo.u32 %r14, %r16, {TT * 16}, %r14;""")
    else:
        e("    mov.u32 %r14, shs;")
    e("""    mad.lo.u32 %r14, %r12, 16, %r14;
    st.shared.v4.f32 [%r14], {%w0, %w1, %w2, %w3};""")
    if MIXW:
        e("""    // h_pre of this token of round kk-1 is in shs[p]: one of hready[p]'s 16 arrivals
    mov.u32 %r18, hready;
    mad.lo.u32 %r18, %r16, 8, %r18;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r18];""")


def exchange(k):
    """h_pre of the previous tile done, barrier 2, and (cp.async entries) the pushes of this tile's
    partials."""
    e, HX, st = k.e, k.HX, k.st
    if not HX:
        sums_and_h_pre(k)
    LAST = """
    // the round past this cluster's last (LAG 2: only the last tile's mix) has no coefficient warp
    sub.u32 %r1, %tile, %ncl;
    setp.lt.u32 %p1, %r1, %ntiles;
    setp.eq.or.u32 %p1, %kk, 0, %p1;
    @!%p1 bra BAR2_END;""" if k.LAG == 2 else ""
    e(f"""HPRE_END:{"" if k.pair else st(6, "hpre")}{LAST}
    // gat of tile kk-1 is read (math warps and the round's coefficient warp), psum and shs written
{BAR2_ID}
    barrier.sync %r9, {BAR2};{st(7, "math")}{chr(10) + "BAR2_END:" if k.LAG == 2 else ""}""")
    if not HX:  # (HX pushes from the warp sums; its gbar is armed by the coefficient warp)
        e(f"""    // ---- push tile kk's partials: slots s < {OWN_SLOT} (each token's h_pre logits, then the ss of 4
    // tokens per float4) to every CTA, float4s 1..5 of token tk to CTA tk; thread 0 arms
    // gbar[kk & 1] for the {CL * SLOTS * 16} bytes every CTA sends here
{arm_gather(SLOTS)}
    // jobs j = tid + 256 i < {BJOBS + OJOBS}: j < {BJOBS}: slot s = j / {CL} to CTA j % {CL}; else
    // jj = j - {BJOBS}: token jj / 5, float4 1 + jj % 5 to CTA jj / 5 (slot {OWN_SLOT} + jj % 5)
    @!%p_cur bra PUSH_END;""")
        for i in range((BJOBS + OJOBS + NW * 32 - 1) // (NW * 32)):
            e(f"""    add.u32 %r9, %tx, {i * NW * 32};
    setp.ge.u32 %p2, %r9, {BJOBS + OJOBS};
    @%p2 bra PUSH_END;
    setp.lt.u32 %p3, %r9, {BJOBS};
    @!%p3 bra PJ{i}_OWN;
    shr.u32 %r10, %r9, 4;                   // s
    and.b32 %r16, %r9, {CL - 1};            // destination
    mov.u32 %r14, psum;
    mul.lo.u32 %r13, %r10, {7 * 16};
    add.u32 %r14, %r14, %r13;               // s < {SS_SLOT}: psum[s][0]
    setp.ge.u32 %p3, %r10, {SS_SLOT};
    mov.u32 %r13, pss;
    mad.lo.u32 %r13, %r10, 16, %r13;
    @%p3 sub.u32 %r14, %r13, {SS_SLOT * 16}; // else pss[4 (s - {SS_SLOT})..]
    bra PJ{i}_GO;
    PJ{i}_OWN:
    sub.u32 %r9, %r9, {BJOBS};
    div.u32 %r11, %r9, 5;                   // token
    mul.lo.u32 %r12, %r11, 5;
    sub.u32 %r12, %r9, %r12;                // f - 1
    add.u32 %r10, %r12, {OWN_SLOT};           // slot
    mov.u32 %r16, %r11;
    mad.lo.u32 %r13, %r11, 7, %r12;
    mov.u32 %r14, psum;
    mad.lo.u32 %r14, %r13, 16, %r14;
    add.u32 %r14, %r14, 16;                 // psum[token][f]
    PJ{i}_GO:
    ld.shared.v4.f32 {{%pv0, %pv1, %pv2, %pv3}}, [%r14];
    mad.lo.u32 %r13, %rank, {SLOTS}, %r10;
    mad.lo.u32 %r13, %r13, 16, %gab;
    mapa.shared::cluster.u32 %r14, %r13, %r16;
    mapa.shared::cluster.u32 %r15, %gbb, %r16;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%pv0, %pv1, %pv2, %pv3}}, [%r15];""")


def mix_fmas(xs, w, acc, tmp):
    """acc[0..7] += w * the 8 bf16 channels in registers xs[0..3] (one stream of a 16-byte chunk;
    tmp: a scratch register): the mix's per-stream step, in the same order wherever it is used."""
    return "\n".join(f"""    shl.b32 {tmp}, {x}, 16;
    mov.b32 %f0, {tmp};
    and.b32 {tmp}, {x}, -65536;
    mov.b32 %f1, {tmp};
    fma.rn.f32 {acc}{2 * u}, {w}, %f0, {acc}{2 * u};
    fma.rn.f32 {acc}{2 * u + 1}, {w}, %f1, {acc}{2 * u + 1};""" for u, x in enumerate(xs))


def mix_code(k, mw):
    """The pre-mix of tile %ptile from stage %pstage: math warps (iteration kk >= 1, shs) or,
        mw, the mix warps (shs[%r19], any round); its labels MIX_*."""
    NOMIX, fused, tma, SREG, HX = k.NOMIX, k.fused, k.tma, k.SREG, k.HX
    if mw and not fused:
        return mix_items(k)
    PAIR_A = """
    add.u32 %r10, %r10, %C0;                // pair entry: this half's channels"""
    if not tma:  # the fused pair entry's math warps: C0 from shared memory (no register beside phi)
        PAIR_A = f"""
    ld.shared.u32 %r16, [sm_base+{4 * 24}];
    add.u32 %r10, %r10, %r16;               // pair entry: this half's channels (C0)"""
    M = []
    em = M.append
    # stage address of the item's 16 bytes of stream 0 (%r5) and the step to the next stream
    if tma:  # block mch / 8, row (stream, token it), chunk (mch % 8) xor (it % 8)
        MIX_BASE = f"""
    shr.u32 %r16, %mch, 3;
    mad.lo.u32 %r7, %r16, {TBLK}, %r7;      // the chunk's 64-channel block
    and.b32 %r16, %mch, 7;                  // its chunk of a 128-byte row"""
        MIX_ITEM = """
    and.b32 %r17, %it, 7;
    xor.b32 %r17, %r17, %r16;
    shl.b32 %r17, %r17, 4;
    mad.lo.u32 %r5, %it, 128, %r7;
    add.u32 %r5, %r5, %r17;                 // &x[it][stream 0][8 ch] (swizzled)"""
        MIX_NEXT = ""
        XS = TT * 128
    else:
        MIX_BASE = """
    mad.lo.u32 %r7, %mtk, %tstride, %r7;
    mad.lo.u32 %r7, %mch, 16, %r7;          // &x[tk][stream 0][8 ch]"""
        MIX_ITEM = """
    mov.u32 %r5, %r7;"""
        MIX_NEXT = """
    mad.lo.u32 %r7, %mtp, %tstride, %r7;"""
        XS = SREG
    SKIP0 = "" if mw else """
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra MIX_END;"""
    if HX and not mw:  # the fused pair entry's math warps: h_pre of tile kk-LAG from the token's CTA
        SKIP0 = f"""
    setp.lt.u32 %p1, %kk, {k.LAG};
    @%p1 bra MIX_END;
    sub.u32 %r17, %kk, {k.LAG};
    and.b32 %r19, %r17, {HXB - 1};             // hin / hbar buffer of tile kk-{k.LAG}
    shr.u32 %r17, %r17, {HXB.bit_length() - 1};
    and.b32 %r17, %r17, 1;
    mov.u32 %r18, hbar;
    mad.lo.u32 %r18, %r19, 8, %r18;
MIX_HWAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r18], %r17;
    @!%p1 bra MIX_HWAIT;"""
    SHSP = f"""
    mad.lo.u32 %r8, %r19, {TT * 16}, %r8;   // {("hin[kk % HXB]" if mw else f"hin[(kk-{k.LAG}) % HXB]") if HX else "shs[p]"}""" if mw or HX else ""
    em(f"""    // ---- mix tile ptile (stage pstage): thread t < mtp cpt (cpt = C/128 chunks per token and
    // slice, mtp = threads / cpt tokens per pass) takes chunk %mch of tokens %mtk + p mtp{SKIP0}
    @!%p_mx bra MIX_END;
    shl.b32 %r3, %ptile, 4;                 // t0
    mad.lo.u32 %r7, %pstage, %sstage, %dsm;{MIX_BASE}
    mov.u32 %r8, {"hin" if HX else "shs"};{SHSP}
    mad.lo.u32 %r8, %mtk, 16, %r8;          // &h_pre[tk]
    add.u32 %r6, %r3, %mtk;                 // token
    ld.param.u32 %r9, [p_args+{ARG['a_stride']}];
    mul.wide.u32 %rd1, %r6, %r9;
    shl.b64 %rd1, %rd1, 1;
    ld.param.u64 %rd2, [p_args+{ARG['a']}];
    add.u64 %rd1, %rd1, %rd2;
    shl.b32 %r10, %mch, 3;
    mad.lo.u32 %r10, %rank, %C16, %r10;{PAIR_A if k.pair else ""}
    mul.wide.u32 %rd2, %r10, 2;
    add.u64 %rd1, %rd1, %rd2;               // &a[token][r C/16 + 8 ch]
    mul.wide.u32 %rd3, %mtp, %r9;
    shl.b64 %rd3, %rd3, 1;                  // a step of mtp rows
    mov.u32 %it, %mtk;
MIX_LOOP:{NOMIX}
    setp.ge.u32 %p1, %it, {TT};
    @%p1 bra MIX_END;
    setp.ge.u32 %p1, %r6, %T;
    @%p1 bra MIX_END;
{MIX_ITEM.lstrip(chr(10))}
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r8];""")
    if fused and "noxo" not in k.exp:
        em(f"""    // fused entry: x' of this chunk to x_out too (16-byte stores, consecutive lanes adjacent);
    // the row pointer is rebuilt per item from the parameters, not carried: in the pc16 entry
    // the math warps mix, and they sit at 163 of the 168 registers 12 warps allow
    ld.param.u32 %r14, [p_args+{A_XOS}];
    ld.param.u64 %rd4, [p_args+{A_XO}];
    mul.wide.u32 %rd5, %r6, %r14;
    shl.b64 %rd5, %rd5, 1;
    add.u64 %rd4, %rd4, %rd5;
    add.u64 %rd4, %rd4, %rd2;               // &x_out[token][stream 0][r C/16 + 8 ch]
    mul.wide.u32 %rd5, %C, 2;""")
    for j in range(8):
        em(f"    mov.f32 %mo{j}, 0f00000000;")
    for i in range(4):
        if i:
            em(f"    add.u32 %r5, %r5, {XS};")
        em("    ld.shared.v4.b32 {%xa0, %xa1, %xa2, %xa3}, [%r5];")
        if fused and "noxo" not in k.exp:
            if i:
                em("    add.u64 %rd4, %rd4, %rd5;")
            em("    st.global.v4.b32 [%rd4], {%xa0, %xa1, %xa2, %xa3};")
        em(mix_fmas([f"%xa{u}" for u in range(4)], f"%w{i}", "%mo", "%r9"))
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %r{10 + j}, %mo{2 * j + 1}, %mo{2 * j};")
    em(f"""    st.global.v4.b32 [%rd1], {{%r10, %r11, %r12, %r13}};
    add.u64 %rd1, %rd1, %rd3;{MIX_NEXT}
    mad.lo.u32 %r8, %mtp, 16, %r8;
    add.u32 %r6, %r6, %mtp;
    add.u32 %it, %it, %mtp;
    bra MIX_LOOP;""")
    em("MIX_END:")
    return "\n".join(M)


def mix_items(k):
    """The pre entries' mix warps: the pre-mix of tile %ptile from stage %pstage (h_pre in
    hin[%r19] / shs[%r19]). The tile's TT x cpt items (token, 8-channel chunk; cpt = C/128 per
    slice) are dealt to the mixers in order, item i to thread i % MIXERS (every thread busy: one
    token's chunks need not fill whole passes), two items per step with all their shared loads
    issued before the first FMA: one item at a time leaves each step waiting on its loads (2 mix
    warps: the loop's latency, not its issue, sets the mix's time). The sums are the fused
    entries' one-item form's: a = sum over the streams in order of h_pre[i] x[i], rounded once
    to bf16."""
    NOMIX, tma, SREG, HX, MIXERS = k.NOMIX, k.tma, k.SREG, k.HX, k.MIXERS
    CW = "%CH" if k.pair else "%C"
    XS = TT * 128 if tma else SREG
    M = []
    em = M.append

    def x_addr(it, mc, dst):
        """dst = &x[token it][stream 0][chunk mc] in the stage at %r7."""
        if tma:  # block mc / 8, row it, chunk (mc % 8) xor (it % 8) of the 128-byte swizzle
            return f"""
    shr.u32 %r16, {mc}, 3;
    mad.lo.u32 {dst}, %r16, {TBLK}, %r7;
    mad.lo.u32 {dst}, {it}, 128, {dst};
    xor.b32 %r16, {it}, {mc};
    and.b32 %r16, %r16, 7;
    shl.b32 %r16, %r16, 4;
    add.u32 {dst}, {dst}, %r16;"""
        return f"""
    mad.lo.u32 {dst}, {it}, %tstride, %r7;
    mad.lo.u32 {dst}, {mc}, 16, {dst};"""

    def a_addr(it, mc, dst):
        """dst = &a[t0 + it][this CTA's channels + 8 mc]."""
        return f"""
    add.u32 %r17, %r3, {it};
    mul.wide.u32 {dst}, %r17, %r9;
    mad.lo.u32 %r17, {mc}, 8, %r10;
    cvt.u64.u32 %rd6, %r17;
    add.u64 {dst}, {dst}, %rd6;
    shl.b64 {dst}, {dst}, 1;
    add.u64 {dst}, {dst}, %rd2;"""

    def step(it, mc, dit, dmc):
        """(dit, dmc) = the item MIXERS after (it, mc)."""
        return f"""
    add.u32 {dit}, {it}, %mtp;
    add.u32 {dmc}, {mc}, %mdr;
    setp.ge.u32 %p2, {dmc}, %mcp;
    @%p2 sub.u32 {dmc}, {dmc}, %mcp;
    @%p2 add.u32 {dit}, {dit}, 1;"""

    def sums(xr, w, acc):
        out = [f"    mov.f32 {acc}{j}, 0f00000000;" for j in range(8)]
        out += [mix_fmas([f"{xr}{4 * i + u}" for u in range(4)], f"{w}{i}", acc, "%r16") for i in range(4)]
        return "\n".join(out)

    PAIR_A = """
    add.u32 %r10, %r10, %C0;                // pair entry: this half's channels""" if k.pair else ""
    em(f"""    // ---- mix tile ptile (stage pstage): items (token, chunk) dealt in order, two per step
    shl.b32 %r3, %ptile, 4;                 // t0
    mad.lo.u32 %r7, %pstage, %sstage, %dsm;
    mov.u32 %r8, {"hin" if HX else "shs"};
    mad.lo.u32 %r8, %r19, {TT * 16}, %r8;   // {"hin[kk % HXB]" if HX else "shs[p]"}
    ld.param.u32 %r9, [p_args+{ARG['a_stride']}];
    ld.param.u64 %rd2, [p_args+{ARG['a']}];
    mul.lo.u32 %r10, %rank, %C16;{PAIR_A}
    shr.u32 %mcp, {CW}, 7;                  // cpt
    mul.lo.u32 %mdr, %mtp, %mcp;
    sub.u32 %mdr, {MIXERS}, %mdr;           // MIXERS = mtp cpt + mdr
    mov.u32 %it, %mtk;
    mov.u32 %mcc, %mch;
MIX_LOOP:{NOMIX}
    setp.ge.u32 %p1, %it, {TT};
    @%p1 bra MIX_END;
    add.u32 %r6, %r3, %it;
    setp.ge.u32 %p1, %r6, %T;
    @%p1 bra MIX_END;
    // item b = the next one of this thread; past the tile or T it re-reads item a, not stored{step("%it", "%mcc", "%mib", "%mcb")}
    add.u32 %r6, %r3, %mib;
    setp.lt.u32 %p_mb, %mib, {TT};
    setp.lt.and.u32 %p_mb, %r6, %T, %p_mb;
    selp.u32 %r11, %mib, %it, %p_mb;
    selp.u32 %r12, %mcb, %mcc, %p_mb;{x_addr("%it", "%mcc", "%r5")}{x_addr("%r11", "%r12", "%r14")}
    mad.lo.u32 %r13, %it, 16, %r8;          // &h_pre[token a]
    mad.lo.u32 %r15, %r11, 16, %r8;         // &h_pre[token b]
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r13];
    ld.shared.v4.f32 {{%mg0, %mg1, %mg2, %mg3}}, [%r15];""")
    for i in range(4):
        off = "" if i == 0 else (f"+{i * XS}" if tma else "")
        if not tma and i:
            em(f"""    add.u32 %r5, %r5, {XS};
    add.u32 %r14, %r14, {XS};""")
        em(f"""    ld.shared.v4.b32 {{%mx{4 * i}, %mx{4 * i + 1}, %mx{4 * i + 2}, %mx{4 * i + 3}}}, [%r5{off}];
    ld.shared.v4.b32 {{%my{4 * i}, %my{4 * i + 1}, %my{4 * i + 2}, %my{4 * i + 3}}}, [%r14{off}];""")
    em(sums("%mx", "%w", "%mo"))
    em(sums("%my", "%mg", "%mq"))
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %xa{j}, %mo{2 * j + 1}, %mo{2 * j};")
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %xb{j}, %mq{2 * j + 1}, %mq{2 * j};")
    em(a_addr("%it", "%mcc", "%rd1").lstrip("\n"))
    em("    st.global.v4.b32 [%rd1], {%xa0, %xa1, %xa2, %xa3};")
    em(a_addr("%mib", "%mcb", "%rd3").lstrip("\n"))
    em(f"""    @%p_mb st.global.v4.b32 [%rd3], {{%xb0, %xb1, %xb2, %xb3}};
    // the next step's item a: the one after item b{step("%mib", "%mcb", "%it", "%mcc")}
    bra MIX_LOOP;
MIX_END:""")
    return "\n".join(M)


def round_end(k):
    """The math warps' mix and refill (pre entries without mix warps), the next round; then the
    coefficient warp's loop head."""
    e, fused, MIXW, st = k.e, k.fused, k.MIXW, k.st
    e("PUSH_END:" + st(8, "math"))
    if not MIXW:
        e(mix_code(k, False))
        e(f"""    // stage pstage is free once every math warp is here: refill it with tile kk-{k.LAG}+{STAGES}
    barrier.sync 1, {NW * 32};
    {"setp.eq.u32 %p1, %kk, 0" if k.LAG == 1 else f"setp.lt.u32 %p1, %kk, {k.LAG}"};
    @%p1 bra REFILL_END;""")
        if k.HX:
            e(f"""    // and hin[(kk-{k.LAG}) % {HXB}] is read: thread 0 re-arms hbar for tile kk-{k.LAG}+{HXB}
    sub.u32 %r19, %kk, {k.LAG};
    and.b32 %r19, %r19, {HXB - 1};
    mov.u32 %r18, hbar;
    mad.lo.u32 %r18, %r19, 8, %r18;
    setp.eq.u32 %p1, %tx, 0;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r18], {TT * 16};""")
        e(f"""    mad.lo.u32 %r20, %ncl, {STAGES}, %ptile;""")
        issue(k, "%r20", "%pstage", "REFILL")
    if k.LAG == 2:
        e(f"""    // the next round mixes tile kk-1 (stage - 1): go on while this tile or that one exists
    sub.u32 %r1, %tile, %ncl;
    setp.lt.u32 %p1, %r1, %ntiles;
    or.pred %p1, %p1, %p_cur;
    @!%p1 bra TILE_END;
    mov.u32 %ptile, %r1;
    add.u32 %r2, %stage, {STAGES - 1};
    and.b32 %pstage, %r2, {STAGES - 1};""")
    else:
        e("""    @!%p_cur bra TILE_END;
    mov.u32 %ptile, %tile;
    mov.u32 %pstage, %stage;""")
    e(f"""    add.u32 %tile, %tile, %ncl;
    add.u32 %stage, %stage, 1;
    setp.eq.u32 %p1, %stage, {k.nst};
    selp.u32 %stage, 0, %stage, %p1;
    add.u32 %kk, %kk, 1;
    bra.uni TILE_LOOP;

    // ================= warp {NW}: the CTA's own token (tile token = rank) of tile kk-1 ============
COEF_WARP:
    // warp NW + c takes the rounds kk = c, c + 2, ... <= nr (nr = this cluster's tile count:
    // round nr only finishes tile nr - 1); its own row copy sm_lg[c]
    sub.u32 %r1, %warp, {NW};
    mov.u32 %kk, %r1;
    mov.u32 %lgb, sm_lg;
    mad.lo.u32 %lgb, %r1, {LG_ROW}, %lgb;{PAIR_EPOCH if k.pair else ""}
{sk_clear()}
    mov.u32 %nr, 0;
    setp.le.u32 %p1, %ntiles, %cid;
    @%p1 bra COEF_CHECK;
    sub.u32 %nr, %ntiles, %cid;
    sub.u32 %nr, %nr, 1;
    div.u32 %nr, %nr, %ncl;
    add.u32 %nr, %nr, 1;
COEF_CHECK:{coef_post_prologue(k) if fused and k.cwt else ""}
    setp.gt.u32 %p1, %kk, %nr;
    @%p1 bra TILE_END;
COEF_LOOP:{coef_post_share(k) if fused and k.cwt else ""}
    bar.warp.sync -1;
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra ROW_END;""")


PAIR_HALF0 = """
    or.pred %p1, %p1, %p_ns;                // pair entry: the other half stores this round's coefficients"""


def prev_tile(reg):
    """%reg = tile kk-1, the tile this cluster finishes in round kk (it walks cid, cid + ncl, ...)."""
    return f"""
    sub.u32 {reg}, %kk, 1;
    mad.lo.u32 {reg}, {reg}, %ncl, %cid;      // tile kk-1"""


def pair_row(half, what):
    """Pair entry, lanes 0..6 of the coefficient warp of round kk: %rd1 = the lane's 4 words (32
    bytes at 32 lane) in the exchange row of tile kk-1's own token of half `half` (`what`): row
    ((tile 2 + half) 16 + rank) after the PAIR_HEAD bytes of the workspace region (one row per
    tile, token and half: no row is written twice in a call); %r16 = the call's tag."""
    return f"""
    // pair entry: the {what} half's exchange row of the token (tile kk-1) and the call's tag
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];{prev_tile("%r13")}
    mov.u32 %r16, %ptag;
    shl.b32 %r13, %r13, 1;
    add.u32 %r14, %r13, {half};
    mad.lo.u32 %r14, %r14, {CL}, %rank;
    mul.wide.u32 %rd1, %r14, {PAIR_ROW};
    add.u64 %rd1, %xch, %rd1;
    mul.wide.u32 %rd3, %lane, 32;
    add.u64 %rd1, %rd1, %rd3;
    add.u64 %rd1, %rd1, {PAIR_HEAD};               // the lane's 4 words, past the region's head"""


def pair_write():
    """Pair entry, lanes 0..6 of the coefficient warp: %v0..3 (this half's sums of the own token)
    to its exchange row, each as a tagged 8-byte word (the value's bits, then the tag), stored
    relaxed: a word carries its own proof of arrival, so no fence orders them."""
    return pair_row("%half", "own") + "".join(f"""
    mov.b32 %r17, %v{c};
    mov.b64 %pw{c}, {{%r17, %r16}};""" for c in range(4)) + """
    st.relaxed.gpu.global.v2.b64 [%rd1], {%pw0, %pw1};
    st.relaxed.gpu.global.v2.b64 [%rd1+16], {%pw2, %pw3};"""


def pair_add(k):
    """Pair entry, after barrier 2: lanes 0..6 poll the other half's 4 words of the own token until
    each carries the round's tag (relaxed loads: each word is checked by itself), and add the
    values to sm_lg's row. Both halves add the same two values (f32 addition commutes): the same
    bits in both. Stamp 6 (lane 0): the words are in."""
    exp = k.exp
    CHECK = "".join(f"""
    mov.b64 {{%r17, %r18}}, %pw{c};
    mov.b32 %u{c}, %r17;
    setp.ne.or.u32 %p3, %r18, %r16, %p3;""" for c in range(4))
    return pair_row("%r15", "other").replace("    add.u32 %r14, %r13, %r15;", """    xor.b32 %r15, %half, 1;
    add.u32 %r14, %r13, %r15;""").replace("    ld.param.u64 %xch", """    setp.ge.u32 %p1, %lane, 7;
    @%p1 bra PX_END;""" + (pair_write() if "xlate" in exp else "") + """
    ld.param.u64 %xch""") + """
PX_PEER:
    ld.relaxed.gpu.global.v2.b64 {%pw0, %pw1}, [%rd1];
    ld.relaxed.gpu.global.v2.b64 {%pw2, %pw3}, [%rd1+16];
    setp.ne.u32 %p3, 0, 0;""" + CHECK + (f"""
    @!%p3 bra PX_GOT;
    nanosleep.u32 {PAIR_POLL_SLEEP};
    bra PX_PEER;
PX_GOT:""" if "nowait" not in exp else "") + k.st(6, "coef") + """
    setp.eq.u32 %p2, %lane, 6;
    @%p2 ld.shared.f32 %f1, [%lgb];
    @%p2 add.f32 %f1, %f1, %u0;
    @%p2 st.shared.f32 [%lgb], %f1;         // ss
    @%p2 bra PX_END;
    mad.lo.u32 %r11, %lane, 16, %lgb;""" + "".join(f"""
    ld.shared.f32 %f1, [%r11+{4 + 4 * c}];
    add.f32 %f1, %f1, %u{c};
    st.shared.f32 [%r11+{4 + 4 * c}], %f1;""" for c in range(4)) + """
PX_END:
    bar.warp.sync -1;
    // tile kk-1's coefficients (h_pre, inv_rms stores; h_post and the h_res batch): half (tile / 8) % 2 (the
    // halves walk the tiles with different strides: the choice is the tile's, and bit 3 mixes
    // the two coefficient warps' rounds for strides 3 and 4)""" + prev_tile("%r13") + """
    bfe.u32 %r13, %r13, 3, 1;
    setp.ne.u32 %p_ns, %r13, %half;"""


# pair entry, the coefficient warps before their first round: the call count E (the region's first
# word; the previous call wrote it, and griddepcontrol.wait made it visible): this call's tag is
# 2 E + 1 (never 0, the fresh workspace's words)
PAIR_EPOCH = f"""
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];
    ld.relaxed.gpu.global.u32 %ptag, [%xch];
    shl.b32 %ptag, %ptag, 1;
    or.b32 %ptag, %ptag, 1;"""
# pair entry, after the closing cluster barrier: lane 0 of coefficient warp 0 in CTA 0 of every
# cluster counts its cluster finished (atom.inc wraps at Q - 1: the count is 0 again after each
# call); the last one, which sees Q - 1, counts the call (E + 1). Every read of E in the call came
# before: each cluster's before its closing barrier, ordered by the acq_rel count.
PAIR_COUNT = f"""
    setp.ne.u32 %p1, %tx, {32 * NW};
    setp.ne.or.u32 %p1, %rank, 0, %p1;
    @%p1 bra PAIR_COUNTED;
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];
    mov.u32 %r2, %nclusterid.x;
    sub.u32 %r2, %r2, 1;
    atom.acq_rel.gpu.global.inc.u32 %r1, [%xch+4], %r2;
    setp.ne.u32 %p1, %r1, %r2;
    @%p1 bra PAIR_COUNTED;
    shr.u32 %r1, %ptag, 1;
    add.u32 %r1, %r1, 1;
    st.relaxed.gpu.global.u32 [%xch], %r1;
PAIR_COUNTED:"""


def coef_warp(k):
    """The round's coefficient warp: the own token's row, barrier 2, inv_rms, h_post and the
    token's z_res rows (4 lanes), and every SKB rounds the h_res batch (all lanes)."""
    e, fused, MIXW, STAMPS, HX, st = k.e, k.fused, k.MIXW, k.STAMPS, k.HX, k.st
    wait_gather(e, "GAT_WAIT1", HX_SLOTS if HX else SLOTS, HXG if HX else 2)
    if HX:
        e(f"""    // gbar[(kk-1) % {HXG}]'s phase for tile kk-1 is complete: arm it for tile kk-1+{HXG} (the pushes
    // of that tile may land before: the phase cannot complete before this arrival)
    setp.eq.u32 %p1, %lane, 0;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%gbb], {CL * HX_SLOTS * 16};""")
    if STAMPS:
        e(k.stamp(9, "coef"))
    def row_store(off):
        """%v0..3 of this lane -> sm_lg[c] at byte off + 16 lane; the ss lane (%p2): %v0 -> [0]."""
        return f"""
    mov.u32 %r11, %lgb;
    @%p2 st.shared.f32 [%r11], %v0;
    @%p2 bra ROW_END;
    mad.lo.u32 %r11, %lane, 16, %r11;
    st.shared.f32 [%r11+{off}], %v0;
    st.shared.f32 [%r11+{off + 4}], %v1;
    st.shared.f32 [%r11+{off + 8}], %v2;
    st.shared.f32 [%r11+{off + 12}], %v3;"""

    if HX:
        e(f"""    // lanes 0..5: float4 lane of the own token (logits 4 lane ..), lane 6: ss, summed over the
    // sources in rank order -> sm_lg[c]: [0] ss, [1 + m] logit m
    setp.ge.u32 %p1, %lane, {HX_SLOTS};
    @%p1 bra ROW_END;
    mad.lo.u32 %r9, %lane, 16, %gab;""")
        ordered_sum(e, "%r9", HX_SLOTS * 16, CL, "GSUM1")
        if k.pair and "xlate" not in k.exp:
            e(pair_write() + k.st(5, "coef"))
        e("    setp.eq.u32 %p2, %lane, 6;" + row_store(4))
    else:
        e(f"""    // lanes 0..4: float4 1 + lane of the own token (logits 4 + 4 lane ..); lane 5: ss (component
    // rank % 4 of slot {SS_SLOT} + rank / 4)
    setp.ge.u32 %p1, %lane, 6;
    @%p1 bra ROW_END;
    add.u32 %r9, %lane, {OWN_SLOT};
    setp.eq.u32 %p2, %lane, 5;
    shr.u32 %r10, %rank, 2;
    add.u32 %r10, %r10, {SS_SLOT};
    @%p2 mov.u32 %r9, %r10;
    mad.lo.u32 %r9, %r9, 16, %gab;""")
        ordered_sum(e, "%r9", SLOTS * 16, CL, "GSUM1")
        e("""    // sm_lg[c]: [0] ss, [1 + m] logit m
    and.b32 %r11, %rank, 3;
    setp.eq.and.u32 %p1, %r11, 1, %p2;
    @%p1 mov.f32 %v0, %v1;
    setp.eq.and.u32 %p1, %r11, 2, %p2;
    @%p1 mov.f32 %v0, %v2;
    setp.eq.and.u32 %p1, %r11, 3, %p2;
    @%p1 mov.f32 %v0, %v3;""" + row_store(20))
    TOKEN = prev_tile("%r12") + """
    shl.b32 %r12, %r12, 4;
    add.u32 %r12, %r12, %rank;              // token of tile kk-1"""
    # the pair entry adds the other half's sums after barrier 2: before it, the exchange's latency
    # held the math warps at the barrier (H100, C = 7168, T = 8192: 480.8 against 446.2 us)
    e(f"""ROW_END:{st(10, "coef")}
    bar.warp.sync -1;{BAR2_ID}
    barrier.sync %r9, {BAR2};{st(11, "coef")}
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra PC_CB_DONE;{pair_add(k) if k.pair else ""}{TOKEN}{hx_broadcast(k) if HX else ""}
    setp.ge.u32 %p1, %r12, %T;{PAIR_HALF0 if k.pair else ""}""")
    e(f"""    setp.ge.or.u32 %p1, %lane, 4, %p1;      // lanes 0..3: h_post and the token's z_res row
    @%p1 bra PC_CB_DONE;
    ld.shared.f32 %f1, [%lgb];
{inv_rms("%f1", "%inv_t")}
    mul.wide.u32 %rd1, %r12, 16;
    add.u64 %hpo, %hpost, %rd1;
    mul.wide.u32 %rd1, %r12, 64;
    add.u64 %hro, %hres, %rd1;
""")
    e(coef_lanes())
    # one loop with one entry: a second way into the batch (a flush after the loop) would make the
    # control flow irreducible; ptxas then loses the warp's reconvergence, and lanes reach
    # barrier 2 a round early and hang the cluster
    e(f"""PC_CB_DONE:{st(12, "coef")}
    bar.warp.sync -1;                       // lanes 0..3 back (the next barrier 2 and the batch need the whole warp)
    bfe.u32 %r16, %kk, 1, {SKB.bit_length() - 1};
    setp.ne.u32 %p1, %r16, {SKB - 1};
    add.u32 %r17, %kk, 2;
    setp.le.and.u32 %p1, %r17, %nr, %p1;
    @%p1 bra PC_CB_NEXT;                    // the batch's last slot, or this warp's last round: run it""")
    e(sk_batch())
    e(f"""PC_CB_NEXT:
    add.u32 %kk, %kk, 2;
    setp.le.u32 %p1, %kk, %nr;
    @%p1 bra COEF_LOOP;
    bra TILE_END;{post_warps(k) if fused and not MIXW else ""}""")


def side_warps(k):
    """The warps beside the math and coefficient warps: the pre entry's mix warps or the fused
    entry's post warps (the ring's fills, x', the pre-mix)."""
    e, fused, tma, MIXW, MIXERS, STAMPS, phi_bar, phi_bar_threads, VT = k.e, k.fused, k.tma, k.MIXW, k.MIXERS, k.STAMPS, k.phi_bar, k.phi_bar_threads, k.VT
    if MIXW and fused:
        e(f"""
    // ================= post warps: the ring's fills, x' of each landed stage, the pre-mix =======
    // Step j: x' of round j (wait full[j % {STAGES}], arrive on xready), then round j - 3: wait
    // hready[(j-3) & 1], mix it (and store x' to x_out), arrive on mixed, refill its stage with
    // round j + 1. x' runs up to 3 rounds ahead of the math warps, the mix behind them.
POST_WARP:
    sub.u32 %r1, %warp, {NW + NCW};{post_lane_consts("%r1", NPW)}
    sub.u32 %tm, %tx, {32 * (NW + NCW)};""")
    elif MIXW:
        e(f"""
    // ================= mix warps: the ring's fills and the pre-mix of every tile ================
    // Round j (tile cid + j ncl, stage j % {STAGES}): wait hready[j & 1] (the math warps wrote its
    // h_pre to shs[j & 1]), mix it, arrive on mixed[j & 1] (shs[j & 1] may be rewritten), refill
    // the stage with round j + {STAGES}. Off the math warps, the mix overlaps their next rounds.
MIX_WARP:
    sub.u32 %tm, %tx, {32 * (NW + NCW)};""")
        if STAMPS:
            e(exit_stamps("mix", "_start", 9))
    if MIXW:
        if not tma:
            for v in range(VT):
                e(f"    add.u32 %tvv{v}, %tm, {MIXERS * v};")
                e(mapping(k, f"%tvv{v}", NW * 32, v))
        e(mapping(k, "%tm", MIXERS))           # the mix items (its copy registers unused)
        if tma:
            e(f"""    mov.u64 %rd7, p_args;
    cvta.param.u64 %rd7, %rd7;
    add.u64 %rd7, %rd7, {A_TMAP};              // the tensor map of x (generic address of the parameter)""")
        else:
            e(f"""    shr.u32 %r1, %C, 5;
    mov.u32 %ctps, {NW * 32};
    div.u32 %ctps, %ctps, %r1;              // the fills' tokens per pass (virtual threads)""")


        if STAMPS:
            e(exit_stamps("mix", "_pro", 10))
        for j in range(k.stages):
            e(f"""    mad.lo.u32 %r20, %ncl, {j}, %cid;
    mov.u32 %r21, {j};""")
            if k.pair and j >= PAIR_STAGES:  # stages past this half's depth: no fill
                e(f"""    setp.ge.u32 %p1, %r21, %nst;
    @%p1 mov.u32 %r20, %ntiles;""")
            fill(k, "%r20", "%r21", f"PRO{j}")
            if j == 0 and phi_bar:  # the first tile iteration needs stage 0 and phi: stages 1.. wait for phi
                e(f"""    barrier.sync {PHI_BAR}, {phi_bar_threads};         // the math warps' phi fragments are in""")
        if STAMPS:
            e(exit_stamps("ready", "_fill"))
        e("""    mov.u32 %nr, 0;
    setp.le.u32 %p1, %ntiles, %cid;
    @%p1 bra TILE_END;
    sub.u32 %nr, %ntiles, %cid;
    sub.u32 %nr, %nr, 1;
    div.u32 %nr, %nr, %ncl;
    add.u32 %nr, %nr, 1;                    // this cluster's rounds""")
        if fused:
            e(f"""    // x' of rounds 0, 1, 2 (their stages come from the first fills)
    mov.u32 %r23, 0;
PW_PRO:
{xprime(k, "XP", "%r23")}
    add.u32 %r23, %r23, 1;
    setp.lt.u32 %p1, %r23, 3;
    @%p1 bra.uni PW_PRO;
    // round m: the mix (round m's h_pre comes at the end of the math warps' round m + 1), the
    // refill with round m + {STAGES}, then x' of round m + 3 (refilled one step ago)""")
            mix_rounds(k, "PW", f"""    add.u32 %r23, %kk, 3;
{xprime(k, "XF", "%r23")}""")
        else:
            mix_rounds(k, "MW", "")


def fill(k, tile_reg, stage_reg, tag):
    tma, VT = k.tma, k.VT
    if tma:
        tma_fill(k, tile_reg, stage_reg, tag)
        return
    for v in range(VT):
        issue(k, tile_reg, stage_reg, f"{tag}V{v}", v)


def tma_fill(k, tile_reg, stage_reg, tag):
    """TMA entry: lane 0 of each mix warp arms full[stage] (two arrivals) for its half of the
            stage, 4C bytes, and copies it: streams 2 w .. 2 w + 1 of tile tile_reg, C/1024 blocks
            of 64 channels x 16 tokens each (tokens past T read as zeros; nothing is stored for
            them); nothing past the last tile. One thread issuing all 16 copies of a stage
            (C = 4096) spends ~1200 cycles a round on them and barrier 3 behind it (phase
            stamps, docs/kernels/pre.md); split, each warp's lane 0 issues 8."""
    e = k.e
    CW = "%CH" if k.pair else "%C"
    C0 = """
    add.u32 %r14, %r14, %C0;                // pair entry: this half's channels""" if k.pair else ""
    e(f"""    // ---- fill: tile {tile_reg} -> stage {stage_reg} (TMA)
    and.b32 %r16, %tm, 31;
    setp.ne.u32 %p2, %r16, 0;
    setp.ge.or.u32 %p2, {tile_reg}, %ntiles, %p2;
    @%p2 bra {tag}_END;
    mov.u32 %r10, full;
    mad.lo.u32 %r10, {stage_reg}, 8, %r10;
    shl.b32 %r11, {CW}, 2;
    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r10], %r11;
    shr.u32 %r17, %tm, 4;                   // first stream: 2 w
    mad.lo.u32 %r12, {stage_reg}, %sstage, %dsm;
    mad.lo.u32 %r12, %r17, {TT * 128}, %r12;
    shl.b32 %r13, {tile_reg}, 4;            // token coordinate
    mul.lo.u32 %r14, %rank, %C16;           // element of the token row: stream 2 w, block 0{C0}
    mad.lo.u32 %r14, %r17, %C, %r14;
    shr.u32 %r15, {CW}, 10;                   // blocks
{tag}_BLK:
    add.u32 %r16, %r14, %C;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r12], [%rd7, {{%r14, %r13}}], [%r10];
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r12+{TT * 128}], [%rd7, {{%r16, %r13}}], [%r10];
    add.u32 %r12, %r12, {TBLK};
    add.u32 %r14, %r14, {TBOX};
    sub.u32 %r15, %r15, 1;
    setp.ne.u32 %p2, %r15, 0;
    @%p2 bra {tag}_BLK;
{tag}_END:""")


def mix_rounds(k, tag, after):
    """Rounds kk = 0 .. nr - 1: wait hready[kk & 1], mix the tile, free shs and the stage
            (mixed[kk & 1]), refill the stage with round kk + STAGES; then `after`."""
    e, MIXERS, STAMPS, HX, st = k.e, k.MIXERS, k.STAMPS, k.HX, k.st
    WAIT_ON = (f"""    and.b32 %r19, %kk, {HXB - 1};             // hin / hbar buffer
    shr.u32 %r2, %kk, {HXB.bit_length() - 1};
    and.b32 %r2, %r2, 1;
    mov.u32 %r1, hbar;
    mad.lo.u32 %r1, %r19, 8, %r1;""" if HX else """    and.b32 %r19, %kk, 1;                   // p
    shr.u32 %r2, %kk, 1;
    and.b32 %r2, %r2, 1;
    mov.u32 %r1, hready;
    mad.lo.u32 %r1, %r19, 8, %r1;""")
    e(f"""    mov.u32 %kk, 0;
{tag}_LOOP:
    setp.ge.u32 %p1, %kk, %nr;
    @%p1 bra TILE_END;
{WAIT_ON}
{tag}_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra {tag}_WAIT;{st(13, "mix")}
    mad.lo.u32 %ptile, %kk, %ncl, %cid;
    {"rem.u32 %pstage, %kk, %nst" if k.pair else "and.b32 %pstage, %kk, " + str(STAGES - 1)};""")
    e(mix_code(k, True))
    if STAMPS:
        e(k.stamp(14, "mix"))
    if HX:
        e(f"""    // hin[kk % {HXB}] and the stage are read (every mixer): re-arm hbar for tile kk + {HXB}, refill
    barrier.sync 3, {MIXERS};
    setp.eq.u32 %p1, %tm, 0;
    and.b32 %r19, %kk, {HXB - 1};
    mov.u32 %r1, hbar;
    mad.lo.u32 %r1, %r19, 8, %r1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r1], {TT * 16};
    mad.lo.u32 %r20, %ncl, {k.nst}, %ptile;""")
    else:
        e(f"""    // the stage's chunks are refilled by other threads than the ones that mixed them
    barrier.sync 3, {MIXERS};
    mov.u32 %r1, mixed;
    and.b32 %r19, %kk, 1;
    mad.lo.u32 %r1, %r19, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // this thread's reads of shs[p] and the stage are done
    mad.lo.u32 %r20, %ncl, {STAGES}, %ptile;""")
    fill(k, "%r20", "%pstage", "REFILL")
    if STAMPS:
        e(k.stamp(15, "mix"))
    e(f"""{after}
    add.u32 %kk, %kk, 1;
    bra.uni {tag}_LOOP;""")


def xprime(k, tag, round_reg):
    """x' of round `round_reg` (if < nr): wait for its stage, post_mma, xready."""
    return f"""    setp.ge.u32 %p1, {round_reg}, %nr;
    @%p1 bra {tag}_SKIP;
    and.b32 %stage, {round_reg}, {STAGES - 1};
    mad.lo.u32 %tile, {round_reg}, %ncl, %cid;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, {round_reg}, 2;
    and.b32 %r2, %r2, 1;                    // fill round / {STAGES} of the stage
{tag}_FULL:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra {tag}_FULL;
{post_mma(k, tag, NPW, 0, (TT - k.cwt) // 4)}
{tag}_SKIP:"""


def exit_cluster(k):
    """TILE_END: every warp leaves together with the cluster."""
    e, STAMPS = k.e, k.STAMPS
    e(f"""TILE_END:{exit_stamps("warp") if STAMPS else ""}
    // leave together (no CTA's shared memory may vanish while the cluster still runs)
    barrier.cluster.arrive.release;
    barrier.cluster.wait.acquire;{exit_stamps("cluster") if STAMPS else ""}{PAIR_COUNT if k.pair else ""}
    ret;
}}
""")


def kernel(fused, mixw, tma=False, exp=frozenset(), cwt=0, stamp_ids=None, pair=False):
    """One entry: pre (mix warps; tma: the ring filled by TMA, h_pre exchanged; pair: two
    clusters per tile) or the fused post_pre (mixw: its post warps also mix and fill the ring)."""
    k = Entry(fused, mixw, tma, exp, cwt, stamp_ids if stamp_ids is not None else [0], pair)
    for part_ in (entry_start, phi_fragments, tile_loop, warp_sums_hx, exchange, round_end, coef_warp,
                  side_warps, exit_cluster):
        part_(k)
    return k.text()


# the file's shared memory (every entry of a file uses these names; {stages}: the ring's depth)
SHARED = f"""
.shared .align 16 .b8 red[{NW * TT * 28 * 4}];        // warp partials [{NW}][{TT}][28]
.shared .align 16 .b8 gat[{2 * CL * SLOTS * 16}];       // gathered partials [2][{CL}][{SLOTS}] float4
.shared .align 16 .b8 shs[{2 * TT * 16}];          // h_pre [2][{TT}][4] (the pre entry's mix warps: by round parity)
.shared .align 16 .b8 pss[{TT * 4}];            // this CTA's ss of the tile's tokens
.shared .align 16 .b8 psum[{TT * 7 * 16}];       // the cp.async entries: this CTA's partials of the tile [{TT}][7] float4
.shared .align 16 .b8 sm_lg[{NCW * LG_ROW}];        // per coefficient warp: the own token's row (ss, logits), the h_res batch
.shared .align 16 .b8 sm_base[128];       // base[24]
.shared .align 8 .b64 full[{{stages}}];
.shared .align 8 .b64 gbar[{HXG}];            // gat[b] complete (TMA entry: {HXG} buffers, else 2)
.shared .align 8 .b64 xready[{STAGES}];      // fused entry: x' of stage s computed (the post warps)
.shared .align 8 .b64 hready[2];             // pre entry: h_pre of the round of this parity in shs
.shared .align 8 .b64 mixed[2];              // pre entry: the mix warps are done with shs[parity]
.shared .align 16 .b8 hin[{HXB * TT * 16}];         // TMA entry: h_pre [tile % {HXB}][token] (CTA j sends token j's)
.shared .align 8 .b64 hbar[{HXB}];           // TMA entry: hin[b] complete ({TT} x 16 bytes)
.extern .shared .align 1024 .b8 dsm[];     // the ring: {{stages}} stages of {TT} x (C/2 + {PAD}) bytes (fused: rows of 5 (C/8 + 16) bytes and a pad, + {HC_TILE})

"""


def main(exp=frozenset(), cwt=0):
    ids = [0]  # PST label numbers of the stamps experiment, unique over the file
    text = HEADER + SHARED.format(stages=STAGES)
    text += kernel(False, True, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(False, True, tma=True, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(True, False, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(True, True, exp=exp, cwt=cwt, stamp_ids=ids)
    return text


def main_pair(exp=frozenset()):
    """pre_pc_pair.ptx: the pair entries (pre; the fused post_pre)."""
    ids = [0]
    return (PAIR_HEADER + SHARED.format(stages=PAIR_STAGES_MAX)
            + kernel(False, True, tma=True, exp=exp, stamp_ids=ids, pair=True)
            + "\n" + kernel(True, False, exp=exp, stamp_ids=ids, pair=True))


def generate(experiments):
    """pre_pc.ptx and pre_pc_pair.ptx; experiments: nosink, nomma, nomix, stamps, nophi, nophibar,
    noxf, noxo, cwt=N (timing builds)."""
    exp = frozenset(k for k in experiments if k != "cwt")
    return {"asm/ptx/sm90/pre_pc.ptx": main(exp, int(experiments.get("cwt") or 0)),
            "asm/ptx/sm90/pre_pc_pair.ptx": main_pair(exp)}


def catalogue_rows():
    """The catalogue rows of the four entries (the TMA pre entry first: the selector takes it ahead
    of the cp.async one where C allows)."""
    G = catalogue.geometry
    traits = ["persistent", "grid_dependency", "tile_in_shared"]
    min_tokens, post_min = pre_decode.DECODE_TOKENS + 1, pre_decode.MID_TOKENS + 1
    fused_params = (f"{POST_PRE_PC.name} ({POST_PRE_PC.size} B, {RUST_MIRROR}): {PRE_DECODE.name}, then "
                    "f, h_post_in, h_res_in, x_out (u64), f_stride, x_out_stride (u32)")
    post_pre_note = ["post_pre at T >= 65 where pre_pc16 serves pre (bf16, n = 4, C % 128 == 0 up to 4096, no gamma_f;",
                     "h_post / h_res 16-byte aligned); the post kernel followed by pre serves the rest."]

    def row(id_, stage, entry, c_multiple, tokens, params, launch, rank, ring_c, why, comment, c_range=None,
            file="pre_pc"):
        return catalogue.row(id_, stage, ["v4", "paper"], "sm_90a", f"asm/bin/sm90/{file}.cubin", entry, ["bf16"], [4],
                             (c_multiple, *(c_range or (c_multiple, C_MAX))), tokens, (TT, CL), THREADS_P, why, launch, x_passes=1,
                             params=params, rank=rank, options=["gamma_k"],
                             geometry=G(channels_per_thread=8, cluster=CL, dynamic_shared_max=ring_c,
                                        traits=traits), comment=comment)

    return [
        row("pre_pc16t_sm90_bf16_n4", "pre", ENTRY_PRE_TMA, TMA_C_MULTIPLE, (min_tokens, TMAX),
            f"PreTmaArgs ({TMA_PARAM_BYTES} B: {PRE_DECODE.name}, then the CUtensorMap of x at {TMA_TMAP}; "
            f"{RUST_MIRROR})", "pre_cluster_tma", 31, ring("tma_ring_bytes", C_MAX),
            "the pre_pc entry with its ring filled by TMA (lane 0 of each mix warp issues half of each stage's "
            "64-channel x 16-token boxes, 128-byte swizzle: the 2 mix warps only mix) and h_pre exchanged instead of "
            "its logits (token j's partials go to CTA j only, st.async'd from the warp sums; its coefficient warp "
            "sends h_pre to every CTA): H100 T = 8192 C = 4096 141-142 us, 79-80% of copy",
            ["pre for many tokens with the ring filled by TMA (sm_90a): the same file's entry for C a multiple",
             "of 1024, ahead of the cp.async entry below."]),
        row("pre_pc16p_sm90_bf16_n4", "pre", ENTRY_PRE_PAIR, TMA_C_MULTIPLE, (min_tokens, TMAX),
            f"PreTmaArgs ({TMA_PARAM_BYTES} B, as pre_pc16t; ws_part: the pair exchange rows)", "pre_cluster_pair", 31,
            ring("pair_ring_bytes", PAIR_C_MAX),
            "C beyond one cluster's phi registers and ring (DeepSeek-V4-Pro's 7168): two 16-CTA clusters per "
            "tile, each the TMA entry on its part of C (whole 1024-channel blocks), their token sums added "
            "through global memory by the coefficient warps; x read once, phi once",
            ["pre for many tokens at C = 5120..8192 (sm_90a): asm/ptx/sm90/pre_pc_pair.ptx, the TMA entry on two",
             "clusters per tile (generated by python3 -m asm.gen)."],
            c_range=(PAIR_C_MIN, PAIR_C_MAX), file="pre_pc_pair"),
        row("pre_pc16_sm90_bf16_n4", "pre", ENTRY_PRE, 128, (min_tokens, TMAX),
            f"{PRE_DECODE.name} ({PRE_DECODE.size} B, {RUST_MIRROR})", "pre_cluster", 30,
            ring("ring_bytes", C_MAX),
            "prefill pre with x read once: persistent 16-CTA clusters, phi slice in registers (bf16 hi/lo mma), x "
            "slice in a shared-memory ring, partial logits through distributed shared memory; 2 mix warps fill the "
            "ring and mix each tile beside the math warps' next tiles",
            ["pre for many tokens (sm_90a): asm/ptx/sm90/pre_pc.ptx (generated by python3 -m asm.gen).",
             "The CUDA plan selects it for T >= 17 when n = 4, bf16, no gamma_f and C is a multiple of 128",
             "up to 4096, after the mid entries of pre_decode (T = 1..64 where C >= 512); the general pre",
             "kernel serves the rest."]),
        row("post_pre_pc16m_sm90_bf16_n4", "post_pre", ENTRY_POST_PRE_M, 128, (post_min, PCM_MAX_TOKENS),
            fused_params, "post_pre_cluster", 20, ring("fused_ring_bytes", C_MAX),
            "post_pre at 65..448 tokens: the fused pass with its 2 post warps computing x' (tensor cores), mixing "
            "each tile and filling the ring, so the math warps only project and exchange (H100 C = 4096 T = 65 / "
            "128: 16.8 / 20.1 us against 18.4 / 22.7)",
            ["post_pre for 65..448 tokens (sm_90a): the same file's fused entry whose post warps also mix",
             "each tile and fill the ring (faster while a cluster walks few tiles). Same selection otherwise",
             "as the entry below. The CUDA plan runs it for"]
            + post_pre_note),
        row("post_pre_pc16p_sm90_bf16_n4", "post_pre", ENTRY_POST_PRE_PAIR, TMA_C_MULTIPLE, (PAIR_FUSED_MIN_TOKENS, TMAX),
            fused_params + "; ws_part: the pair exchange rows", "post_pre_cluster_pair", 10,
            ring("fused_pair_ring_bytes", PAIR_C_MAX),
            "post_pre at C beyond one cluster (DeepSeek-V4-Pro's 7168): the fused pass on two 16-CTA clusters per "
            "tile, each on its part of C (whole 1024-channel blocks): post warps compute x' of the part's channels "
            "in the ring, the math warps project it, mix and store x' and a; the parts' token sums meet through the "
            "workspace as the pair pre entry's do, and h_pre comes from the token's CTA; x' is never read back",
            ["post_pre for many tokens at C = 5120..8192 (sm_90a): asm/ptx/sm90/pre_pc_pair.ptx, the fused entry",
             "on two clusters per tile (generated by python3 -m asm.gen). The CUDA plan runs it for post_pre at",
             f"T >= {PAIR_FUSED_MIN_TOKENS} (bf16, n = 4, C a multiple of 1024, no gamma_f; h_post / h_res 16-byte aligned) where two",
             "clusters fit the device; the post kernel followed by the pair pre entry serves the rest."],
            c_range=(PAIR_C_MIN, PAIR_C_MAX), file="pre_pc_pair"),
        row("post_pre_pc16_sm90_bf16_n4", "post_pre", ENTRY_POST_PRE, 128, (post_min, TMAX), fused_params,
            "post_pre_cluster", 10, ring("fused_ring_bytes", C_MAX),
            "layer boundary in one pass: pre_pc16's ring also brings f and layer l's h_post / h_res; 2 post warps "
            "compute x' = post(x) in the stage on the tensor cores (h_res / h_post in bf16 hi + lo), the projection "
            "runs on it and the mix stores it to x_out, so x' is never read back",
            ["post_pre for many tokens (sm_90a): the same file's fused entry. The CUDA plan runs it for"]
            + post_pre_note),
    ]
