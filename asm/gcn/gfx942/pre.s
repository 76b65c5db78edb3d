// mhc_pre: the whole `pre` stage of docs/math.md (Stages 1-3) in ONE launch, gfx942 (CDNA3), wave64;
// also `head` (flags bit 2: the same projection with M = n, sigmoid weights, the collapse) and
// `post_pre` (flags bit 3: a post prologue writes x' = post(x, f, h_post, h_res) for the
// workgroup's k slice, and everything below runs on x', read back from the slice just written).
// A workgroup owns a tile of 4 tokens; the K = n C reduction of the tile is split over G
// workgroups (G = 1 for many tokens; G > 1 for decode), and the last one to finish completes it.
//
//   P_t = x_t . phi^T, ss_t = |x_t|^2           (workgroup g sums k in [g Kc, (g+1) Kc))
//   last workgroup of the tile (atomic counter): P, ss = fixed-order sums of the G partials
//   (deterministic), inv_rms, h_pre/h_post (sigmoids), h_res (Sinkhorn, both formulations),
//   a_t = sum_i h_pre[i] x_t[i]; then it resets the counter to 0 for the next launch.
//
// Tile: grid = (G, ceil(T / 4)), 256 work-items (4 waves) per workgroup, tokens t0 .. t0 + 3.
//   Post prologue (post_pre only): coefficient rows of the tile's tokens to LDS; for each
//     token and stream i, the channels of stream i inside the k slice (lane = channel):
//     x'[i][c] = h_post[i] f[c] + sum_j H(i, j) x[j][c] (V4 / Paper by the strides res_si,
//     res_sj as in mhc_post), stored to `out`; vmcnt(0), barrier, then x := out.
//   Phase A (every workgroup): projection of the tile's k slice, 16 phi rows at a time: each
//     lane loads 16 phi values and 4 x values per k and does 64 + 4 FMAs (16 logits and the sum
//     of squares of 4 tokens), so one phi load feeds 4 tokens (phi traffic / 4 against one token
//     per workgroup); with gamma_k (flags bit 4) each lane also loads gamma_k[k] and weights its
//     4 x values after their squares (4 multiplies; ss stays unweighted); per token a two-level
//     LDS reduction; partials to work[t][g][0..M] (+ ss at M), f32. Tokens past T read the last
//     token's row; their results are dropped.
//   Phase B: every wave waits for its stores (vmcnt(0)), barrier; work-item 0 releases
//     (buffer_wbl2 sc1), increments counter[tile] (global_atomic_add sc0 sc1: returns the old
//     value, agent scope) and acquires (buffer_inv sc1); the old value goes through LDS to every
//     wave; all but the last workgroup (old == G - 1) end.
//   Phase C (last workgroup): sums the G partials of each logit in g order (lane = logit);
//     wave w computes the coefficients of token t0 + w exactly as mhc_coeffs (one lane per
//     logit; Sinkhorn with lane i owning row / column i: S in LDS, each half-step loads the
//     lane's whole line into VGPRs, sums and rescales it there, stores it back: one LDS round
//     trip per half-step; the body is unrolled per n); then all 256 lanes compute
//     a for each token (lane = channel, runtime loop over the n streams, weights from LDS).
// LDS: phase A 18496 B (17 x 256 + 17 x 16 partials); phase C: token w's sums at 4608 w
//   (<= 4356 B), its Sinkhorn matrix S over them (same base), h_pre at 18432 + 128 w, the counter
//   value at 18944: 18960 B in all, so three workgroups fit a CU's 64 KiB.
// VGPRs: v0 tid, v1 k * 4, v2 x offset, v3 temp, v[4:68) accumulators (token tt, row q at
//   4 + 16 tt + q), v[68:72) sums of squares, v[72:76) x, v[76:92) phi, v92.. work: 100.
// SGPRs: 102 (s[60:92) phi row bases, s[94:102) x row pointers in phase A).
// Kernargs (184 B): x, phi, scale, base, h_pre, h_post, h_res, inv_rms, a, work, counter (u64),
//   tokens, streams, channels, x_stride, a_stride, splits (G), iters, eps_norm (f32),
//   eps_hc (f32), flags (bit 0 bf16 storage, bit 1 Paper, bit 2 head: M = n logits, h = sigma + eps
//   into h_pre, no Sinkhorn, a = the head's output; bit 3 post prologue; bit 4 gamma_k), then for
//   post_pre only f, post_h_post, post_h_res, out (u64), f_stride, res_si, res_sj (u32), and
//   gamma_k (u64 at 176, read with bit 4 only: the pre-norm weight [n C], f32). work: T G (M + 1)
//   f32; counter: ceil(T / 4) u32, zero before the first launch (the kernel leaves it zero).
//   x_stride is shared by x and out.
// Per token, measured on the simulator (n = 4, C = 4096, bf16): see asm/gcn/README.md. Phi is
//   read from L2 once per 4 tokens (M K 4 B / 4 = 0.4 MB at n = 4, C = 4096), x once per 16
//   logits (L2 after the first), a written once; decode (T <= 64): G = ceil(K / 2048).

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"

.set ROWS, 16
.set LOG2E, 0x3fb8aa3b
.set NEG_LOG2E, 0xbfb8aa3b
.set NEG_INF, 0xff800000
.set L_HPRE, 18432
.set L_FLAG, 18944
.set TILE, 4

.macro LOAD_X_DYN dst
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc1 .Lxf32_\@
  global_load_ushort \dst, v2, s[54:55]
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 \dst, 16, \dst
  s_branch .Lxdone_\@
.Lxf32_\@:
  global_load_dword \dst, v2, s[54:55]
  s_waitcnt vmcnt(0)
.Lxdone_\@:
.endm

.macro LOAD_X dst, voff, sbase, bf
  .if \bf
    global_load_ushort \dst, \voff, \sbase
  .else
    global_load_dword \dst, \voff, \sbase
  .endif
.endm

// Phase A inner loop over this workgroup's k slice for the current chunk of 16 rows and the
// tile's 4 tokens (x row pointers s[94:102)); bf selects the storage of x; gk (flags bit 4)
// weights each x value by gamma_k[k] (base in s[54:55], byte offset k * 4 like phi's) after
// its square is summed: the projection reads v gamma_k, the sum of squares stays unweighted.
.macro KLOOP bf, gk
  .if \gk
    s_load_dwordx2 s[54:55], s[0:1], 0xb0 // gamma_k
    s_waitcnt lgkmcnt(0)
  .endif
  s_mov_b32 s50, s41                     // k0 = k_begin
  v_add_u32 v1, s41, v0
  v_lshlrev_b32 v1, 2, v1                // k * 4 (phi byte offset)
.Lk_\bf\()_\gk:
  v_lshrrev_b32 v93, 2, v1
  v_cmp_gt_u32 vcc, s42, v93             // k < k_end
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lk_next_\bf\()_\gk
  .if \bf
    v_lshrrev_b32 v2, 1, v1
  .else
    v_mov_b32 v2, v1
  .endif
  .set tt, 0
  .rept TILE
    LOAD_X v[72+tt], v2, s[94+2*tt:95+2*tt], \bf
    .set tt, tt+1
  .endr
  .set q, 0
  .rept ROWS
    global_load_dword v[76+q], v1, s[60+2*q:61+2*q]
    .set q, q+1
  .endr
  .if \gk
    global_load_dword v93, v1, s[54:55]  // gamma_k[k]
  .endif
  s_waitcnt vmcnt(0)
  .set tt, 0
  .rept TILE
    .if \bf
      v_lshlrev_b32 v[72+tt], 16, v[72+tt]
    .endif
    v_fmac_f32 v[68+tt], v[72+tt], v[72+tt]
    .set tt, tt+1
  .endr
  .if \gk
    .set tt, 0
    .rept TILE
      v_mul_f32 v[72+tt], v[72+tt], v93
      .set tt, tt+1
    .endr
  .endif
  .set tt, 0
  .rept TILE
    .set q, 0
    .rept ROWS
      v_fmac_f32 v[4+16*tt+q], v[76+q], v[72+tt]
      .set q, q+1
    .endr
    .set tt, tt+1
  .endr
.Lk_next_\bf\()_\gk:
  s_mov_b64 exec, s[52:53]
  v_add_u32 v1, 0x400, v1
  s_addk_i32 s50, 0x100
  s_cmp_lt_u32 s50, s42
  s_cbranch_scc1 .Lk_\bf\()_\gk
.endm

// Reduces token tt's 17 per-lane sums over the workgroup and stores the partials of rows
// m0 .. m0 + 15 (and ss at M in the first chunk) to work[t0 + tt][g] when t0 + tt < T.
.macro REDUCE tt
  .set q, 0
  .rept ROWS
    ds_write_b32 v92, v[4+16*\tt+q] offset:1024*q
    .set q, q+1
  .endr
  ds_write_b32 v92, v[68+\tt] offset:16384
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_lshrrev_b32 v93, 4, v0
  v_and_b32 v94, 15, v0
  v_lshlrev_b32 v95, 10, v93
  v_lshl_add_u32 v95, v94, 6, v95       // 1024 q + 64 part
  v_mov_b32 v96, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[76+i], v95 offset:4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v96, v96, v[76+i]
    .set i, i+1
  .endr
  ds_write_b32 v92, v96 offset:17408
  v_cmp_gt_u32 vcc, 16, v0
  s_and_saveexec_b64 s[52:53], vcc
  v_lshlrev_b32 v95, 6, v0
  v_mov_b32 v96, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[76+i], v95 offset:16384+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v96, v96, v[76+i]
    .set i, i+1
  .endr
  ds_write_b32 v92, v96 offset:18432
  s_mov_b64 exec, s[52:53]
  s_waitcnt lgkmcnt(0)
  s_barrier
  // work-items 0..16 finish row q = tid; token t0 + tt must exist.
  s_add_u32 s48, s92, \tt
  s_cmp_lt_u32 s48, s26
  s_cbranch_scc0 .Lred_done_\@
  v_cmp_gt_u32 vcc, 17, v0
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lred_exit_\@
  v_lshlrev_b32 v95, 6, v0
  v_mov_b32 v96, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[76+i], v95 offset:17408+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v96, v96, v[76+i]
    .set i, i+1
  .endr
  // &work[t][g] = work + ((t G + g)(M + 1)) 4
  s_mul_i32 s49, s48, s31
  s_add_u32 s49, s49, s2
  s_add_u32 s51, s37, 1
  s_mul_i32 s49, s49, s51
  s_lshl_b32 s49, s49, 2
  s_add_u32 s58, s22, s49
  s_addc_u32 s59, s23, 0
  v_add_u32 v93, s46, v0
  v_cmp_gt_u32 vcc, s37, v93
  s_and_b64 vcc, vcc, exec
  v_cmp_gt_u32 s[54:55], 16, v0
  s_and_b64 vcc, vcc, s[54:55]
  s_mov_b64 s[56:57], exec
  s_mov_b64 exec, vcc
  v_lshlrev_b32 v93, 2, v93
  global_store_dword v93, v96, s[58:59]
  s_mov_b64 exec, s[56:57]
  s_cmp_eq_u32 s46, 0
  s_cbranch_scc0 .Lred_exit_\@
  v_cmp_eq_u32 vcc, 16, v0
  s_and_b64 exec, exec, vcc
  s_cbranch_execz .Lred_exit_\@
  s_lshl_b32 s48, s37, 2
  v_mov_b32 v93, s48
  global_store_dword v93, v96, s[58:59]
.Lred_exit_\@:
  s_mov_b64 exec, s[52:53]
.Lred_done_\@:
.endm

// acc += sum_j LDS[vlds + 4 j] * x_j[c] over the n streams, x_j at s[54:55] + j sstride with byte
// offset v2 (s[54:55] and vlds are consumed). Four streams per round (four loads, one
// ds_read_b128, one wait) when n >= 4; the FMA order is j = 0, 1, ... in both paths.
.macro LOAD4 bf, sstride
  .set q, 0
  .rept 4
    LOAD_X v[12+q], v2, s[54:55], \bf
    s_add_u32 s54, s54, \sstride
    s_addc_u32 s55, s55, 0
    .set q, q+1
  .endr
.endm

.macro STREAM_DOT acc, vlds, sstride, tag
  s_mov_b32 s50, 0
  s_cmp_ge_u32 s27, 4
  s_cbranch_scc0 .Lsd1_\tag
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc0 .Lsd4b_\tag
.Lsd4f_\tag:
  LOAD4 0, \sstride
  ds_read_b128 v[8:11], \vlds
  s_waitcnt vmcnt(0) lgkmcnt(0)
  .set q, 0
  .rept 4
    v_fmac_f32 \acc, v[8+q], v[12+q]
    .set q, q+1
  .endr
  v_add_u32 \vlds, 16, \vlds
  s_add_u32 s50, s50, 4
  s_cmp_lt_u32 s50, s27
  s_cbranch_scc1 .Lsd4f_\tag
  s_branch .Lsd_done_\tag
.Lsd4b_\tag:
  LOAD4 1, \sstride
  ds_read_b128 v[8:11], \vlds
  s_waitcnt vmcnt(0) lgkmcnt(0)
  .set q, 0
  .rept 4
    v_lshlrev_b32 v[12+q], 16, v[12+q]
    .set q, q+1
  .endr
  .set q, 0
  .rept 4
    v_fmac_f32 \acc, v[8+q], v[12+q]
    .set q, q+1
  .endr
  v_add_u32 \vlds, 16, \vlds
  s_add_u32 s50, s50, 4
  s_cmp_lt_u32 s50, s27
  s_cbranch_scc1 .Lsd4b_\tag
  s_branch .Lsd_done_\tag
.Lsd1_\tag:
  ds_read_b32 v8, \vlds
  LOAD_X_DYN v12
  s_waitcnt lgkmcnt(0)
  v_fmac_f32 \acc, v8, v12
  v_add_u32 \vlds, 4, \vlds
  s_add_u32 s54, s54, \sstride
  s_addc_u32 s55, s55, 0
  s_add_u32 s50, s50, 1
  s_cmp_lt_u32 s50, s27
  s_cbranch_scc1 .Lsd1_\tag
.Lsd_done_\tag:
.endm

// The Sinkhorn bodies (one per n), shared with mhc_coeffs.
.include "sinkhorn.inc"

.text
.globl mhc_pre
.p2align 8
.type mhc_pre,@function
mhc_pre:
  s_load_dwordx16 s[4:19], s[0:1], 0x0   // x, phi, scale, base, h_pre, h_post, h_res, inv_rms
  s_load_dwordx8 s[20:27], s[0:1], 0x40  // a, work, counter, tokens, streams
  s_load_dwordx8 s[28:35], s[0:1], 0x60  // C, x_stride, a_stride, G, iters, eps_norm, eps_hc, flags
  s_waitcnt lgkmcnt(0)
  s_mul_i32 s36, s27, s28                // K
  s_mul_i32 s37, s27, s27
  s_lshl_b32 s47, s27, 1
  s_add_u32 s37, s37, s47                // M
  s_and_b32 s48, s35, 4
  s_cselect_b32 s37, s27, s37            // head (flags bit 2): M = n
  s_and_b32 s39, s35, 1                  // bf16?
  s_sub_u32 s38, 2, s39                  // log2(bytes per element)
  s_movk_i32 s43, 0x7fff
  s_lshl_b32 s92, s3, 2                  // t0 = 4 tile
  s_sub_u32 s93, s26, s92
  s_min_u32 s93, s93, TILE               // tokens of this tile
  // k slice per workgroup: Kc = the least multiple of 256 with Kc G >= K.
  s_movk_i32 s40, 0x100
.Lkc:
  s_mul_i32 s48, s40, s31
  s_cmp_ge_u32 s48, s36
  s_cbranch_scc1 .Lkc_done
  s_addk_i32 s40, 0x100
  s_branch .Lkc
.Lkc_done:
  s_mul_i32 s41, s2, s40                 // k_begin
  s_add_u32 s42, s41, s40
  s_min_u32 s42, s42, s36                // k_end
  s_lshl_b32 s47, s36, 2                 // K * 4
  // ================= Post prologue (post_pre, flags bit 3) =================
  // x' = post(x, f, h_post, h_res) for this workgroup's k slice of the tile's tokens, written to
  // `out`; the rest of the kernel then runs on x' (x := out), reading back only its own slice
  // (phase A) or, in the last workgroup, the whole rows after the counter's acquire (phase C).
  s_and_b32 s48, s35, 8
  s_cbranch_scc0 .Lpost_done
  s_load_dwordx8 s[60:67], s[0:1], 0x80  // f, h_post, h_res, out
  s_load_dwordx4 s[68:71], s[0:1], 0xa0  // f_stride, res_si, res_sj, (pad)
  s_waitcnt lgkmcnt(0)
  // Coefficients of token tt at LDS 4224 tt: row i of the mixing (H(i, j) at 4 (i n + j)) and
  // h_post[i] at 4096 + 4 i.
  s_mul_i32 s72, s27, s27                // n^2
  s_ff1_i32_b32 s73, s27                 // log2 n
  s_sub_u32 s74, s27, 1
  s_mov_b32 s84, 0                       // tt
.Lps_token:
  s_add_u32 s48, s92, s84
  s_mul_i32 s49, s48, s72
  s_lshl_b32 s49, s49, 2
  s_add_u32 s76, s64, s49
  s_addc_u32 s77, s65, 0                 // &h_res[t]
  s_lshl_b32 s49, s48, 2
  s_mul_i32 s49, s49, s27
  s_add_u32 s78, s62, s49
  s_addc_u32 s79, s63, 0                 // &h_post[t]
  s_mul_i32 s85, s84, 4224               // LDS base of token tt
  v_mov_b32 v1, v0                       // e
  s_mov_b32 s50, 0
.Lps_stage:
  v_cmp_gt_u32 vcc, s72, v1
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lps_stage_next
  v_lshrrev_b32 v2, s73, v1              // i
  v_and_b32 v3, s74, v1                  // j
  v_mul_lo_u32 v2, v2, s69
  v_mul_lo_u32 v3, v3, s70
  v_add_lshl_u32 v2, v2, v3, 2
  global_load_dword v4, v2, s[76:77]
  v_lshl_add_u32 v5, v1, 2, s85
  s_waitcnt vmcnt(0)
  ds_write_b32 v5, v4
.Lps_stage_next:
  s_mov_b64 exec, s[52:53]
  v_add_u32 v1, 0x100, v1
  s_addk_i32 s50, 0x100
  s_cmp_lt_u32 s50, s72
  s_cbranch_scc1 .Lps_stage
  v_cmp_gt_u32 vcc, s27, v0
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lps_staged
  v_lshlrev_b32 v1, 2, v0
  global_load_dword v4, v1, s[78:79]
  v_add_u32 v5, s85, v1
  s_waitcnt vmcnt(0)
  ds_write_b32 v5, v4 offset:4096
.Lps_staged:
  s_mov_b64 exec, s[52:53]
  s_add_u32 s84, s84, 1
  s_cmp_lt_u32 s84, s93
  s_cbranch_scc1 .Lps_token
  s_waitcnt lgkmcnt(0)
  s_barrier
  s_lshl_b32 s80, s28, s38               // bytes per stream (C elements)
  s_mov_b32 s84, 0                       // tt
.Lpt_token:
  s_add_u32 s48, s92, s84                // t
  ROW_OFFSET 50, s48, s29, s38
  ADD64 76, 4, 50                // &x[t]
  ADD64 78, 66, 50               // &out[t]
  ROW_OFFSET 50, s48, s68, s38
  ADD64 86, 60, 50               // &f[t]
  s_mul_i32 s85, s84, 4224               // LDS base of token tt
  s_mov_b32 s88, 0                       // i
  s_mov_b32 s89, 0                       // i C (first k of stream i)
.Lpt_stream:
  s_cmp_ge_u32 s89, s42                  // stream starts past the slice: done with this token
  s_cbranch_scc1 .Lpt_token_next
  s_sub_u32 s90, s41, s89                // c_lo = max(k_begin - i C, 0)
  s_cmp_lt_u32 s41, s89
  s_cselect_b32 s90, 0, s90
  s_sub_u32 s91, s42, s89                // c_hi = min(k_end - i C, C)
  s_min_u32 s91, s91, s28
  s_cmp_ge_u32 s90, s91
  s_cbranch_scc1 .Lpt_stream_next
  s_mov_b32 s94, s90                     // c0
.Lpt_chunk:
  v_add_u32 v1, s94, v0                  // c
  v_cmp_gt_u32 vcc, s91, v1
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lpt_chunk_next
  v_lshlrev_b32 v2, s38, v1              // byte offset of c
  s_lshl_b32 s48, s88, 2
  s_add_u32 s48, s48, s85
  v_mov_b32 v6, s48
  ds_read_b32 v3, v6 offset:4096         // h_post[i]
  s_mov_b64 s[54:55], s[86:87]
  LOAD_X_DYN v4                          // f[t][c]
  s_waitcnt lgkmcnt(0)
  v_mul_f32 v3, v3, v4                   // h_post[i] f
  s_mul_i32 s48, s88, s27
  s_lshl_b32 s48, s48, 2
  s_add_u32 s48, s48, s85
  v_mov_b32 v6, s48                      // LDS address of H(i, 0)
  s_mov_b64 s[54:55], s[76:77]
  STREAM_DOT v3, v6, s80, post           // + sum_j H(i, j) x[t][j][c]
  s_mul_i32 s48, s88, s80                // out[t][i][c]
  s_add_u32 s54, s78, s48
  s_addc_u32 s55, s79, 0
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc1 .Lpt_f32
  v_bfe_u32 v7, v3, 16, 1
  v_add3_u32 v7, v3, v7, s43
  v_lshrrev_b32 v7, 16, v7
  global_store_short v2, v7, s[54:55]
  s_branch .Lpt_chunk_next
.Lpt_f32:
  global_store_dword v2, v3, s[54:55]
.Lpt_chunk_next:
  s_mov_b64 exec, s[52:53]
  s_addk_i32 s94, 0x100
  s_cmp_lt_u32 s94, s91
  s_cbranch_scc1 .Lpt_chunk
.Lpt_stream_next:
  s_add_u32 s88, s88, 1
  s_add_u32 s89, s89, s28
  s_cmp_lt_u32 s88, s27
  s_cbranch_scc1 .Lpt_stream
.Lpt_token_next:
  s_add_u32 s84, s84, 1
  s_cmp_lt_u32 s84, s93
  s_cbranch_scc1 .Lpt_token
  // x' is complete for this slice: every wave waits for its stores, then x := out.
  s_waitcnt vmcnt(0)
  s_barrier
  buffer_inv sc0                         // no stale L1 lines of out for the read-back
  s_mov_b64 s[4:5], s[66:67]
.Lpost_done:
  // x row pointers of the tile's tokens (past T: the last token, results dropped).
  s_sub_u32 s50, s26, 1
  .set tt, 0
  .rept TILE
    s_add_u32 s48, s92, tt
    s_min_u32 s48, s48, s50
    s_mul_hi_u32 s49, s48, s29
    s_mul_i32 s48, s48, s29
    s_lshl_b64 s[48:49], s[48:49], s38
    s_add_u32 s[94+2*tt], s4, s48
    s_addc_u32 s[95+2*tt], s5, s49
    .set tt, tt+1
  .endr
  v_lshlrev_b32 v92, 2, v0

  // ================= Phase A: partial projection over the k slice =================
  s_mov_b32 s46, 0                       // m0
.Lchunk:
  s_sub_u32 s48, s37, 1
  .set q, 0
  .rept ROWS
    s_add_u32 s49, s46, q
    s_min_u32 s49, s49, s48
    s_mul_i32 s51, s49, s47
    s_mul_hi_u32 s50, s49, s47
    s_add_u32 s[60+2*q], s6, s51
    s_addc_u32 s[61+2*q], s7, s50
    .set q, q+1
  .endr
  .set q, 0
  .rept 68
    v_mov_b32 v[4+q], 0
    .set q, q+1
  .endr
  s_and_b32 s48, s35, 16                 // gamma_k (flags bit 4)?
  s_cbranch_scc1 .Lgk
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc0 .Lbf16
  KLOOP 0, 0
  s_branch .Lreduce
.Lbf16:
  KLOOP 1, 0
  s_branch .Lreduce
.Lgk:
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc0 .Lbf16_gk
  KLOOP 0, 1
  s_branch .Lreduce
.Lbf16_gk:
  KLOOP 1, 1
.Lreduce:
  REDUCE 0
  REDUCE 1
  REDUCE 2
  REDUCE 3
  s_add_u32 s46, s46, ROWS
  s_cmp_lt_u32 s46, s37
  s_cbranch_scc1 .Lchunk

  // ================= Phase B: count finished workgroups of this tile =================
  s_waitcnt vmcnt(0)
  s_barrier
  v_cmp_eq_u32 vcc, 0, v0
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lcounted
  buffer_wbl2 sc1
  s_waitcnt vmcnt(0)
  s_lshl_b32 s48, s3, 2
  v_mov_b32 v1, s48
  v_mov_b32 v2, 1
  global_atomic_add v3, v1, v2, s[24:25] sc0 sc1   // sc0: return the old value; sc1: agent scope
  s_waitcnt vmcnt(0)
  buffer_inv sc1
  v_mov_b32 v4, L_FLAG
  ds_write_b32 v4, v3
.Lcounted:
  s_mov_b64 exec, s[52:53]
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_mov_b32 v4, L_FLAG
  ds_read_b32 v3, v4
  s_waitcnt lgkmcnt(0)
  v_readfirstlane_b32 s48, v3
  s_sub_u32 s49, s31, 1
  s_cmp_lg_u32 s48, s49
  s_cbranch_scc1 .Lend                   // not the last workgroup of this tile

  // ================= Phase C: the last workgroup finishes the tile =================
  // Sums of the G partials, in g order: lane = logit m (m <= M; m = M is the sum of squares);
  // token tt's sums at LDS 4608 tt.
  s_add_u32 s48, s37, 1                  // M + 1
  s_lshl_b32 s51, s48, 2                 // bytes per partial row
  s_mov_b32 s84, 0                       // tt
.Lsum_t:
  s_add_u32 s49, s92, s84
  s_mul_i32 s49, s49, s31
  s_mul_i32 s49, s49, s48
  s_lshl_b32 s49, s49, 2
  s_add_u32 s58, s22, s49
  s_addc_u32 s59, s23, 0                 // &work[t][0]
  s_mul_i32 s85, s84, 4608               // LDS base of token tt's sums
  v_lshlrev_b32 v1, 2, v0                // m * 4
  s_mov_b32 s46, 0
.Lsum_m:
  v_lshrrev_b32 v2, 2, v1
  v_cmp_ge_u32 vcc, s37, v2              // m <= M
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lsum_m_next
  v_mov_b32 v3, 0
  v_mov_b32 v4, v1
  s_mov_b32 s50, 0
  // Four partials per round (one wait), then one at a time; the adds stay in g order.
.Lsum_g4:
  s_add_u32 s75, s50, 4
  s_cmp_gt_u32 s75, s31
  s_cbranch_scc1 .Lsum_g1
  .set q, 0
  .rept 4
    global_load_dword v[8+q], v4, s[58:59]
    v_add_u32 v4, s51, v4
    .set q, q+1
  .endr
  s_waitcnt vmcnt(0)
  .set q, 0
  .rept 4
    v_add_f32 v3, v3, v[8+q]
    .set q, q+1
  .endr
  s_mov_b32 s50, s75
  s_branch .Lsum_g4
.Lsum_g1:
  s_cmp_ge_u32 s50, s31
  s_cbranch_scc1 .Lsum_g_done
  global_load_dword v5, v4, s[58:59]
  s_waitcnt vmcnt(0)
  v_add_f32 v3, v3, v5
  v_add_u32 v4, s51, v4
  s_add_u32 s50, s50, 1
  s_branch .Lsum_g1
.Lsum_g_done:
  v_add_u32 v5, s85, v1
  ds_write_b32 v5, v3
.Lsum_m_next:
  s_mov_b64 exec, s[52:53]
  v_add_u32 v1, 0x400, v1
  s_addk_i32 s46, 0x100
  s_cmp_le_u32 s46, s37
  s_cbranch_scc1 .Lsum_m
  s_add_u32 s84, s84, 1
  s_cmp_lt_u32 s84, s93
  s_cbranch_scc1 .Lsum_t
  s_waitcnt lgkmcnt(0)
  s_barrier
  s_mov_b32 s83, s3                      // keep the tile index (counter reset)
  v_lshrrev_b32 v1, 6, v0
  s_nop 0                                // gfx94x: VALU result -> v_readfirstlane needs 1 wait state
  v_readfirstlane_b32 s48, v1            // wave w
  s_cmp_ge_u32 s48, s93
  s_cbranch_scc1 .Lcoeffs_done           // no token for this wave
  s_add_u32 s3, s92, s48                 // t = t0 + w
  s_mul_i32 s80, s48, 4608
  // S aliases this token's sums: S[m - 2n] is written after the round that read sums[m - 2n]
  // (one ds_read for all lanes of a round, then one ds_write), and inv_rms reads sums[M] first.
  s_mov_b32 s81, s80
  s_lshl_b32 s82, s48, 7
  s_add_u32 s82, s82, L_HPRE
  // ---- wave w: coefficients of token t0 + w (as mhc_coeffs); LDS bases s80 (sums), s81 (S),
  // s82 (h_pre) of this token.
  v_and_b32 v1, 63, v0                   // lane
  s_load_dword s60, s[8:9], 0x0          // scale[0]
  s_and_b32 s48, s35, 4
  s_cbranch_scc1 .Lhead_scale            // head: scale has one element
  s_load_dwordx2 s[62:63], s[8:9], 0x4   // scale[1], scale[2]
.Lhead_scale:
  s_lshl_b32 s64, s27, 1                 // 2n
  s_lshl_b32 s65, s27, 2                 // 4n
  s_and_b32 s48, s35, 2
  s_cmp_lg_u32 s48, 0
  s_cselect_b32 s66, 0, s34              // eps added to h_pre (V4 only)
  s_and_b32 s48, s35, 4
  s_cselect_b32 s66, s34, s66            // head: + eps_hc as well
  s_mul_i32 s74, s27, s27                // n^2
  s_mul_i32 s48, s3, s65
  s_add_u32 s68, s12, s48
  s_addc_u32 s69, s13, 0                 // &h_pre[t]
  s_add_u32 s70, s14, s48
  s_addc_u32 s71, s15, 0                 // &h_post[t]
  s_mul_i32 s48, s3, s74
  s_lshl_b32 s48, s48, 2
  s_add_u32 s72, s16, s48
  s_addc_u32 s73, s17, 0                 // &h_res[t]
  // inv_rms = 1 / sqrt(ss / K + eps_norm), ss = L_PSUM[M]
  s_lshl_b32 s48, s37, 2
  s_add_u32 s48, s48, s80
  v_mov_b32 v2, s48
  ds_read_b32 v3, v2
  v_cvt_f32_u32 v4, s36
  v_rcp_f32 v4, v4
  s_waitcnt lgkmcnt(0)
  v_mul_f32 v3, v3, v4
  v_add_f32 v3, s33, v3
  v_rsq_f32 v3, v3
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_readfirstlane_b32 s61, v3            // inv_rms (scale[1] moves to s62..s63 below)
  s_waitcnt lgkmcnt(0)
  v_cmp_eq_u32 vcc, 0, v1
  s_and_saveexec_b64 s[52:53], vcc
  s_lshl_b32 s48, s3, 2
  v_mov_b32 v4, s48
  global_store_dword v4, v3, s[18:19]
  s_mov_b64 exec, s[52:53]
  // z for every logit m = lane + 64 r < M
  v_mov_b32 v2, v1
  s_mov_b32 s46, 0
.Lm_loop:
  v_cmp_gt_u32 vcc, s37, v2
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lm_next
  v_lshlrev_b32 v3, 2, v2
  v_add_u32 v4, s80, v3
  ds_read_b32 v4, v4                     // P[m]
  global_load_dword v5, v3, s[10:11]     // base[m]
  v_mov_b32 v6, s63
  v_mov_b32 v7, s62
  v_cmp_gt_u32 vcc, s64, v2
  s_nop 1                                // gfx94x: v_cmp writes VCC -> VALU reads it: 2 wait states
  v_cndmask_b32 v6, v6, v7, vcc
  v_mov_b32 v7, s60
  v_cmp_gt_u32 vcc, s27, v2
  s_nop 1                                // gfx94x: v_cmp writes VCC -> VALU reads it: 2 wait states
  v_cndmask_b32 v6, v6, v7, vcc
  s_waitcnt vmcnt(0) lgkmcnt(0)
  v_mul_f32 v4, s61, v4
  v_fma_f32 v4, v4, v6, v5               // z
  v_cmp_gt_u32 vcc, s64, v2
  s_and_saveexec_b64 s[54:55], vcc
  s_cbranch_execz .Lz_res
  v_mul_f32 v6, NEG_LOG2E, v4
  v_exp_f32 v6, v6
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_add_f32 v6, 1.0, v6
  v_rcp_f32 v6, v6
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_add_f32 v7, s66, v6                  // h_pre
  v_add_f32 v8, v6, v6                   // h_post
  v_cmp_gt_u32 vcc, s27, v2
  s_and_saveexec_b64 s[56:57], vcc
  global_store_dword v3, v7, s[68:69]
  v_add_u32 v9, s82, v3
  ds_write_b32 v9, v7
  s_andn2_b64 exec, s[56:57], vcc
  v_subrev_u32 v9, s65, v3
  global_store_dword v9, v8, s[70:71]
.Lz_res:
  s_mov_b64 exec, s[54:55]
  v_cmp_le_u32 vcc, s64, v2
  s_and_b64 exec, exec, vcc
  s_cbranch_execz .Lm_next
  v_subrev_u32 v9, s64, v2
  v_lshl_add_u32 v9, v9, 2, s81
  ds_write_b32 v9, v4
.Lm_next:
  s_mov_b64 exec, s[52:53]
  v_add_u32 v2, 64, v2
  s_add_u32 s46, s46, 64
  s_cmp_lt_u32 s46, s37
  s_cbranch_scc1 .Lm_loop
  s_waitcnt lgkmcnt(0)
  s_and_b32 s48, s35, 4
  s_cbranch_scc1 .Lcoeffs_done           // head: no h_post, no Sinkhorn
  // Sinkhorn on lanes < n: v16 row base, v17 column base.
  v_cmp_gt_u32 vcc, s27, v1
  s_and_saveexec_b64 s[52:53], vcc
  v_mul_lo_u32 v16, v1, s65
  v_add_u32 v16, s81, v16
  v_lshl_add_u32 v17, v1, 2, s81
  // n = s27, eps_hc = s34, iters = s32, Paper = flags (s35) bit 1, scratch s48.
  SINKHORN_BY_N s27, s34, s32, s35, 2, s48
.Lwrite:
  s_mov_b64 exec, s[52:53]
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v2, 2, v1
  s_mov_b32 s46, 0
.Lw_loop:
  v_lshrrev_b32 v3, 2, v2
  v_cmp_gt_u32 vcc, s74, v3
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lw_next
  v_add_u32 v6, s81, v2
  ds_read_b32 v5, v6
  s_waitcnt lgkmcnt(0)
  global_store_dword v2, v5, s[72:73]
.Lw_next:
  s_mov_b64 exec, s[52:53]
  v_add_u32 v2, 0x100, v2
  s_add_u32 s46, s46, 64
  s_cmp_lt_u32 s46, s74
  s_cbranch_scc1 .Lw_loop
.Lcoeffs_done:
  s_waitcnt lgkmcnt(0)
  s_barrier

  // ---- all waves: a_t[c] = sum_i h_pre[i] x_t[i][c] for the tile's tokens (lane = channel,
  // runtime loop over i, weight read from LDS by broadcast).
  s_lshl_b32 s78, s28, s38               // bytes per stream
  s_mov_b32 s84, 0                       // tt
.La_token:
  s_add_u32 s3, s92, s84                 // t
  ROW_OFFSET 48, s3, s30, s38
  ADD64 76, 20, 48               // &a[t]
  ROW_OFFSET 48, s3, s29, s38
  ADD64 44, 4, 48                // &x[t]
  s_lshl_b32 s85, s84, 7
  s_add_u32 s85, s85, L_HPRE             // LDS h_pre of token tt
  s_mov_b32 s46, 0
.La_chunk:
  v_add_u32 v1, s46, v0
  v_cmp_gt_u32 vcc, s28, v1
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .La_next
  v_lshlrev_b32 v2, s38, v1
  v_mov_b32 v3, 0                        // acc
  v_mov_b32 v4, s85
  s_mov_b64 s[54:55], s[44:45]
  STREAM_DOT v3, v4, s78, apply
  s_cmp_eq_u32 s39, 0
  s_cbranch_scc1 .La_f32
  v_bfe_u32 v7, v3, 16, 1
  v_add3_u32 v7, v3, v7, s43
  v_lshrrev_b32 v7, 16, v7
  global_store_short v2, v7, s[76:77]
  s_branch .La_next
.La_f32:
  global_store_dword v2, v3, s[76:77]
.La_next:
  s_mov_b64 exec, s[52:53]
  s_addk_i32 s46, 0x100
  s_cmp_lt_u32 s46, s28
  s_cbranch_scc1 .La_chunk
  s_add_u32 s84, s84, 1
  s_cmp_lt_u32 s84, s93
  s_cbranch_scc1 .La_token
  // Leave the counter at zero for the next launch (stream order makes this safe).
  v_cmp_eq_u32 vcc, 0, v0
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lend
  s_lshl_b32 s48, s83, 2
  v_mov_b32 v1, s48
  v_mov_b32 v2, 0
  global_store_dword v1, v2, s[24:25]
.Lend:
  s_endpgm
.Lpre_end:
.size mhc_pre, .Lpre_end - mhc_pre

KERNEL_DESCRIPTOR mhc_pre, 18960, 184, 100, 102, 1

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_pre
    .symbol: mhc_pre.kd
    .kernarg_segment_size: 184
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 18960
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 108
    .vgpr_count: 100
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: x, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: phi, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: scale, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: base, .offset: 24, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_pre, .offset: 32, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: h_post, .offset: 40, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: h_res, .offset: 48, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: inv_rms, .offset: 56, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: a, .offset: 64, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: work, .offset: 72, .size: 8, .value_kind: global_buffer, .address_space: global }
      - { .name: counter, .offset: 80, .size: 8, .value_kind: global_buffer, .address_space: global }
      - { .name: tokens, .offset: 88, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 92, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 96, .size: 4, .value_kind: by_value }
      - { .name: x_stride, .offset: 100, .size: 4, .value_kind: by_value }
      - { .name: a_stride, .offset: 104, .size: 4, .value_kind: by_value }
      - { .name: splits, .offset: 108, .size: 4, .value_kind: by_value }
      - { .name: iters, .offset: 112, .size: 4, .value_kind: by_value }
      - { .name: eps_norm, .offset: 116, .size: 4, .value_kind: by_value }
      - { .name: eps_hc, .offset: 120, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 124, .size: 4, .value_kind: by_value }
      - { .name: f, .offset: 128, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: post_h_post, .offset: 136, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: post_h_res, .offset: 144, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: out, .offset: 152, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: f_stride, .offset: 160, .size: 4, .value_kind: by_value }
      - { .name: res_si, .offset: 164, .size: 4, .value_kind: by_value }
      - { .name: res_sj, .offset: 168, .size: 4, .value_kind: by_value }
      - { .name: gamma_k, .offset: 176, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
...
.end_amdgpu_metadata
