// mhc_coeffs: docs/math.md Stages 1 (after the projection) and 2, gfx942 (CDNA3), wave64.
//
//   g = P[t] * inv_rms[t];  z_pre = g[0:n] s0 + b,  z_post = g[n:2n] s1 + b,  Z = g[2n:M] s2 + b
//   h_pre = sigma(z_pre) (+ eps_hc for V4),  h_post = 2 sigma(z_post)
//   V4:    S = softmax_row(Z) + eps;     S /= colsum + eps;  (iters-1) x { rows; cols }
//   Paper: S = exp(Z - max_col(Z));      iters x { cols; rows }       (every sum + eps)
//   h_res = S.  Head mode (flags bit 1): M = n, h = sigma(g s0 + b) + eps_hc into h_pre only.
// Static layer: the host passes the logits as P with inv_rms = 1, scale = 1, base = 0 (exact).
//
// Tile: one wave = one token; a workgroup = 4 waves = 4 tokens; grid = ceil(T / 4).
// Lane mapping: stage 1: lane = logit m (m = lane + 64 r); Sinkhorn: lane i < n owns row i for
//   row steps and column i for column steps: each half-step loads the lane's whole line into
//   v[20:20+n) (one LDS round trip), sums and rescales it there and stores it back (no
//   cross-lane reduction; unrolled per n); Z and S live in the wave's 4 KiB LDS slice,
//   row-major (S[i][j] at 4 (i n + j)).
// Division: q = a * rcp(d) refined by one Newton step (e = a - d q; q += e rcp(d)), which
//   is within 1 ulp of a / d; exp(x) = exp2(x log2 e).
// LDS: 4 waves x 4096 B = 16384 B. VGPRs: 52 (v0 tid; v1 lane; v2..v18 work; v[20:52) a line).
// SGPRs: 58.
// Kernargs (80 B): P, inv_rms, scale, base, h_pre, h_post, h_res (u64), tokens, streams,
//   iters, eps_hc (f32), flags (bit 0 Paper, bit 1 head), p_stride (elements per row of P).
// Estimated per token (n = 4, 20 iterations): M*4 + 4 B read, (n^2 + 2n)*4 B written;
//   about 40 steps x (3n + 8) wave instructions of Sinkhorn. Measured: asm/gcn/README.md.

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"

.set LOG2E, 0x3fb8aa3b
.set NEG_LOG2E, 0xbfb8aa3b
.set NEG_INF, 0xff800000

// The Sinkhorn bodies (one per n), shared with mhc_pre.
.include "sinkhorn.inc"

.text
.globl mhc_coeffs
.p2align 8
.type mhc_coeffs,@function
mhc_coeffs:
  s_load_dwordx8 s[4:11], s[0:1], 0x0    // P, inv_rms, scale, base
  s_load_dwordx4 s[12:15], s[0:1], 0x20  // h_pre, h_post
  s_load_dwordx2 s[16:17], s[0:1], 0x30  // h_res
  s_load_dwordx4 s[20:23], s[0:1], 0x38  // tokens, streams, iters, eps_hc
  s_load_dwordx2 s[24:25], s[0:1], 0x48  // flags, p_stride
  v_lshrrev_b32 v1, 6, v0
  s_nop 0                                // gfx94x: VALU result -> v_readfirstlane needs 1 wait state
  v_readfirstlane_b32 s3, v1             // wave in the workgroup
  v_and_b32 v1, 63, v0                   // lane
  s_lshl_b32 s26, s2, 2
  s_add_u32 s3, s26, s3                  // token t
  s_waitcnt lgkmcnt(0)
  s_cmp_ge_u32 s3, s20
  s_cbranch_scc1 .Lend
  s_load_dword s28, s[8:9], 0x0          // scale[0]
  s_and_b32 s26, s24, 2
  s_cmp_lg_u32 s26, 0
  s_cbranch_scc1 .Lhead_scale
  s_load_dwordx2 s[30:31], s[8:9], 0x4   // scale[1], scale[2]
.Lhead_scale:
  s_lshl_b32 s26, s3, 2
  s_load_dword s19, s[6:7], s26          // inv_rms[t]
  // Sizes: s21 n, s32 2n, s33 M, s34 4n, s35 eps added to h_pre, s36 LDS base of this wave.
  s_lshl_b32 s32, s21, 1
  s_lshl_b32 s34, s21, 2
  s_mul_i32 s33, s21, s21
  s_add_u32 s33, s33, s32
  s_and_b32 s26, s24, 2
  s_cselect_b32 s33, s21, s33            // head: M = n
  s_and_b32 s26, s24, 3
  s_cmp_eq_u32 s26, 1
  s_cselect_b32 s35, 0, s23              // Paper (not head): no eps on h_pre
  v_lshrrev_b32 v2, 6, v0
  s_nop 0                                // gfx94x: VALU result -> v_readfirstlane needs 1 wait state
  v_readfirstlane_b32 s36, v2
  s_lshl_b32 s36, s36, 12
  // Row pointers: s[38:39] = &P[t], s[40:41] = &h_pre[t], s[42:43] = &h_post[t].
  ROW_OFFSET 26, s3, s25, 2
  ADD64 38, 4, 26
  s_mul_i32 s26, s3, s34
  s_add_u32 s40, s12, s26
  s_addc_u32 s41, s13, 0
  s_add_u32 s42, s14, s26
  s_addc_u32 s43, s15, 0
  s_waitcnt lgkmcnt(0)

  // ---- Stage 1: z for every logit m = lane + 64 r.
  v_mov_b32 v2, v1
  s_mov_b32 s37, 0
.Lm_loop:
  v_cmp_gt_u32 vcc, s33, v2
  s_and_saveexec_b64 s[44:45], vcc
  s_cbranch_execz .Lm_next
  v_lshlrev_b32 v3, 2, v2
  global_load_dword v4, v3, s[38:39]     // P[t][m]
  global_load_dword v5, v3, s[10:11]     // base[m]
  v_mov_b32 v6, s31
  v_mov_b32 v7, s30
  v_cmp_gt_u32 vcc, s32, v2
  s_nop 1                                // gfx94x: v_cmp writes VCC -> VALU reads it: 2 wait states
  v_cndmask_b32 v6, v6, v7, vcc
  v_mov_b32 v7, s28
  v_cmp_gt_u32 vcc, s21, v2
  s_nop 1                                // gfx94x: v_cmp writes VCC -> VALU reads it: 2 wait states
  v_cndmask_b32 v6, v6, v7, vcc          // scale of m's group
  s_waitcnt vmcnt(0)
  v_mul_f32 v4, s19, v4                  // g = P inv_rms
  v_fma_f32 v4, v4, v6, v5               // z = g scale + base
  // m < 2n: sigmoid -> h_pre / h_post
  v_cmp_gt_u32 vcc, s32, v2
  s_and_saveexec_b64 s[46:47], vcc
  s_cbranch_execz .Lz_res
  v_mul_f32 v6, NEG_LOG2E, v4
  v_exp_f32 v6, v6
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_add_f32 v6, 1.0, v6
  v_rcp_f32 v6, v6                       // sigma(z)
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_add_f32 v7, s35, v6                  // h_pre
  v_add_f32 v8, v6, v6                   // h_post
  v_cmp_gt_u32 vcc, s21, v2
  s_and_saveexec_b64 s[48:49], vcc
  global_store_dword v3, v7, s[40:41]
  s_andn2_b64 exec, s[48:49], vcc
  v_subrev_u32 v9, s34, v3
  global_store_dword v9, v8, s[42:43]
.Lz_res:
  // m >= 2n: Z[m - 2n] -> LDS
  s_mov_b64 exec, s[46:47]
  v_cmp_le_u32 vcc, s32, v2
  s_and_b64 exec, exec, vcc
  s_cbranch_execz .Lm_next
  v_subrev_u32 v9, s32, v2
  v_lshl_add_u32 v9, v9, 2, s36
  ds_write_b32 v9, v4
.Lm_next:
  s_mov_b64 exec, s[44:45]
  v_add_u32 v2, 64, v2
  s_add_u32 s37, s37, 64
  s_cmp_lt_u32 s37, s33
  s_cbranch_scc1 .Lm_loop
  s_and_b32 s26, s24, 2
  s_cmp_lg_u32 s26, 0
  s_cbranch_scc1 .Lend                   // head: no Sinkhorn
  s_waitcnt lgkmcnt(0)

  // ---- Stage 2: Sinkhorn on lanes < n. v16 = row base, v17 = column base (LDS bytes).
  v_cmp_gt_u32 vcc, s21, v1
  s_and_saveexec_b64 s[44:45], vcc
  v_mul_lo_u32 v16, v1, s34
  v_add_u32 v16, s36, v16
  v_lshl_add_u32 v17, v1, 2, s36
  // n = s21, eps_hc = s23, iters = s22, Paper = flags (s24) bit 0, scratch s26.
  SINKHORN_BY_N s21, s23, s22, s24, 1, s26
.Lwrite:
  // ---- h_res[t] = S (lane e = lane + 64 r < n^2).
  s_mov_b64 exec, s[44:45]               // all lanes again
  s_waitcnt lgkmcnt(0)
  s_mul_i32 s26, s21, s21                // n^2
  s_mul_i32 s27, s3, s26
  s_lshl_b32 s27, s27, 2
  s_add_u32 s46, s16, s27
  s_addc_u32 s47, s17, 0                 // &h_res[t]
  v_lshlrev_b32 v2, 2, v1
  s_mov_b32 s37, 0
.Lw_loop:
  v_lshrrev_b32 v3, 2, v2
  v_cmp_gt_u32 vcc, s26, v3
  s_and_saveexec_b64 s[44:45], vcc
  s_cbranch_execz .Lw_next
  v_add_u32 v4, s36, v2
  ds_read_b32 v5, v4
  s_waitcnt lgkmcnt(0)
  global_store_dword v2, v5, s[46:47]
.Lw_next:
  s_mov_b64 exec, s[44:45]
  v_add_u32 v2, 0x100, v2
  s_add_u32 s37, s37, 64
  s_cmp_lt_u32 s37, s26
  s_cbranch_scc1 .Lw_loop
.Lend:
  s_endpgm
.Lcoeffs_end:
.size mhc_coeffs, .Lcoeffs_end - mhc_coeffs

KERNEL_DESCRIPTOR mhc_coeffs, 16384, 80, 52, 52, 0

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_coeffs
    .symbol: mhc_coeffs.kd
    .kernarg_segment_size: 80
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 16384
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 58
    .vgpr_count: 52
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: p, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: inv_rms, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: scale, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: base, .offset: 24, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_pre, .offset: 32, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: h_post, .offset: 40, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: h_res, .offset: 48, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 56, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 60, .size: 4, .value_kind: by_value }
      - { .name: iters, .offset: 64, .size: 4, .value_kind: by_value }
      - { .name: eps_hc, .offset: 68, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 72, .size: 4, .value_kind: by_value }
      - { .name: p_stride, .offset: 76, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
