"""The kernel's geometry and limits: cluster and tile sizes, warp roles, the exchange's slots and
buffers, parameter offsets, entry names, and the ring's size formulas (shared with the Rust side)."""

from ..abi import POST_PRE_PC, PRE_DECODE, TMA_PARAM_BYTES, TMA_TMAP


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
# The fused pair entry's rings. Its math warps mix a tile two rounds after its projection, so a
# stage of x is held from its fill to that mix; f (and the layer-l coefficients) only until the
# post warps computed x'. So f has a ring of its own: PAIR_F_STAGES stages of the part's f rows,
# beside PAIR_FUSED_STAGES stages of x rows (4 slices; the tile's h_post / h_res after them).
# The prologue fills tiles 0 .. PAIR_F_STAGES - 1, and round kk, after its mix of tile kk-2,
# fills tile kk + PAIR_F_STAGES: x into the stage it just mixed, f into the stage of tile kk,
# whose x' every math thread has waited for in round kk. 5 + 3 stages fit beside the static
# shared memory at a 4096-channel part, where 4 stages of rows with f did before.
PAIR_FUSED_STAGES = 5
PAIR_F_STAGES = 3
assert PAIR_FUSED_STAGES == PAIR_F_STAGES + 2 and PAIR_FUSED_STAGES <= PAIR_STAGES_MAX
ENTRY_POST_PRE, ENTRY_POST_PRE_M = "mhc_post_pre_pc16_bf16_n4", "mhc_post_pre_pc16m_bf16_n4"
ENTRY_POST_PRE_PAIR = "mhc_post_pre_pc16p_bf16_n4"  # the fused entry on two clusters per tile
PCM_MAX_TOKENS = 448  # the fused entry with mixing post warps wins up to here (H100, C = 4096)
# the fused pair entry serves post_pre from here: below, post then the pair pre entry is faster
# (H100, C = 7168: T = 192 23.4 against 22.7 us, T = 256 27.1 against 27.3, T = 320 30.7 against
# 32.2; docs/kernels/post_pre.md)
PAIR_FUSED_MIN_TOKENS = 256
# The ring's dynamic shared memory at C (Rust expressions over c and the constants above; "/" is
# integer division): the pre entry's stages of TT token rows (4 stream slices and a pad), the TMA
# entry's (no pad; 1 KB to align the ring to the swizzle's 1024-byte period), the fused entry's
# rows (5 slices of C/16 channels + 16 bytes, padded to 4 mod 8 in 16-byte units) and h_post /
# h_res per token, the fused pair entry's x rows (4 such slices) and f rows (one slice) of the
# larger part.
RING_FORMULAS = {
    "ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (c / 2 + PC_ROW_PAD)",
    "tma_ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (c / 2) + 1024",
    "pair_ring_bytes": "PC_PAIR_STAGES * PC_TILE_TOKENS * ((c + 1024) / 2048 * 512) + 1024",
    "fused_row_bytes": "16 * (5 * (c / 128 + 1) + (4 + 8 - 5 * (c / 128 + 1) % 8) % 8)",
    "fused_ring_bytes": "PC_STAGES * PC_TILE_TOKENS * (fused_row_bytes(c) + PC_POST_COEF_BYTES)",
    "fused_x_row_bytes": "16 * (4 * (c / 128 + 1) + (4 + 8 - 4 * (c / 128 + 1) % 8) % 8)",
    "fused_pair_ring_bytes": "PC_PAIR_FUSED_STAGES * PC_TILE_TOKENS * (fused_x_row_bytes((c + 1024) / 2048 * 1024) + PC_POST_COEF_BYTES) "
                             "+ PC_PAIR_F_STAGES * PC_TILE_TOKENS * ((c + 1024) / 2048 * 128 + 16)",
}


def ring(name, c):
    """RING_FORMULAS[name] at c."""
    env = {"PC_STAGES": STAGES, "PC_PAIR_STAGES": PAIR_STAGES, "PC_TILE_TOKENS": TT, "PC_ROW_PAD": PAD, "PC_POST_COEF_BYTES": HC, "c": c,
           "PC_PAIR_FUSED_STAGES": PAIR_FUSED_STAGES, "PC_PAIR_F_STAGES": PAIR_F_STAGES,
           "fused_row_bytes": lambda c_: ring("fused_row_bytes", c_), "fused_x_row_bytes": lambda c_: ring("fused_x_row_bytes", c_)}
    return eval(RING_FORMULAS[name].replace("/", "//"), {}, env)
TBLK = 4 * TT * 2 * TBOX  # one block of a stage: [stream 4][token 16][64 channels], 8 KB
