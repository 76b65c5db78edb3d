// mhc_static: the static mHC layer of docs/math.md (mHC.cu parity), gfx942 (CDNA3), wave64.
//
//   a_t = sum_i h_pre[i] x_t[i];   y_t = a_t gamma / sqrt(mean_c(a_t^2) + eps_f)
//   out_t[i] = h_post[i] y_t + sum_j h_res[i][j] x_t[j]           (h_res untransposed)
// The coefficients are shared by all tokens; the host computes them once per call with
// mhc_coeffs (Paper formulation) on the logits, so this kernel reads f32 h_pre[n], h_post[n],
// h_res[n][n].
//
// Tile: one workgroup = 256 work-items (4 waves) = one token, all C channels in chunks of 256;
//   grid = T. Two passes over the token's x: pass 1 computes a and sum(a^2) (the RMS needs the
//   whole row before any y exists); pass 2 re-reads x (an L2 hit on hardware for C*n*4 <= 4 MiB),
//   recomputes a, and writes out. Reduction of sum(a^2): LDS, two levels, two barriers.
// Lane mapping: lane = channel; x column in VGPRs; h_pre in SGPRs s[64:64+n) (scalar operand of
//   the FMA); h_res rows and h_post in LDS, read at a uniform address (broadcast), as in mhc_post.
// Specialisation: unrolled per n in {1,2,4,8,16,32} and dtype by macros, scalar dispatch.
// LDS: 4096 (h_res) + 128 (h_post) + 1024 (partials) + 64 (second level) = 5312 B.
// VGPRs: v0 tid, v1 c, v2 byte offset, v3 a, v4 acc, v5/v6 LDS addresses, v7 temp, v8 sum a^2,
//   v9 y, v10 1/rms, v11..v13 work, v[16:16+n) x, v[48:48+n) coefficients: 80. SGPRs: 96.
// Kernargs (72 B): x, h_pre, h_post, h_res, gamma, out (u64), tokens, streams, channels,
//   x_stride (elements per token, shared by x and out), eps_f (f32), flags (bit 0 bf16).
// Estimated per token (n = 4, C = 1280, f32): 2 n C 4 B read (second pass from L2), n C 4 B
//   written, C 4 B of gamma; per 256 channels ~ 2n loads + n (n + 3) FMA + n stores.
//   Measured on the simulator (n = 4, C = 1280, bf16, per token): 1561 VALU, 1008 SALU,
//   182 + 80 VMEM, 298 LDS wave instructions; 26 KB read, 10 KB written.

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"
// LOAD_ACT, WIDEN, STORE_ACT (shared with mhc_post).
.include "activations.inc"

.macro LOAD_WEIGHTS N
  .if \N == 1
    s_load_dword s64, s[6:7], 0x0
  .elseif \N == 2
    s_load_dwordx2 s[64:65], s[6:7], 0x0
  .elseif \N == 4
    s_load_dwordx4 s[64:67], s[6:7], 0x0
  .elseif \N == 8
    s_load_dwordx8 s[64:71], s[6:7], 0x0
  .elseif \N == 16
    s_load_dwordx16 s[64:79], s[6:7], 0x0
  .else
    s_load_dwordx16 s[64:79], s[6:7], 0x0
    s_load_dwordx16 s[80:95], s[6:7], 0x40
  .endif
.endm

// x column of channel v1 into v[16:16+N) (f32), and a = sum_j h_pre[j] x[j] into v3.
.macro LOAD_X_AND_A N, BF
  v_lshlrev_b32 v2, s33, v1
  s_mov_b64 s[44:45], s[36:37]
  .set j, 0
  .rept \N
    LOAD_ACT v[16+j], v2, s[44:45], \BF
    s_add_u32 s44, s44, s34
    s_addc_u32 s45, s45, 0
    .set j, j+1
  .endr
  s_waitcnt vmcnt(0)
  .set j, 0
  .rept \N
    WIDEN v[16+j], \BF
    .set j, j+1
  .endr
  v_mul_f32 v3, s64, v16
  .set j, 1
  .rept \N - 1
    v_fmac_f32 v3, s[64+j], v[16+j]
    .set j, j+1
  .endr
.endm

.macro STATIC_BODY N, BF
.Lstatic_\N\()_\BF:
  LOAD_WEIGHTS \N
  s_waitcnt lgkmcnt(0)
  // ---- pass 1: sum over c of a^2
  v_mov_b32 v8, 0
  s_mov_b32 s28, 0
.Lp1_\N\()_\BF:
  v_add_u32 v1, s28, v0
  v_cmp_gt_u32 vcc, s18, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lp1_next_\N\()_\BF
  LOAD_X_AND_A \N, \BF
  v_fmac_f32 v8, v3, v3
.Lp1_next_\N\()_\BF:
  s_mov_b64 exec, s[30:31]
  s_addk_i32 s28, 0x100
  s_cmp_lt_u32 s28, s18
  s_cbranch_scc1 .Lp1_\N\()_\BF
  // ---- reduce: 256 partials -> 16 -> 1 (every lane sums the last 16 the same way)
  v_lshlrev_b32 v11, 2, v0
  ds_write_b32 v11, v8 offset:4224
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_cmp_gt_u32 vcc, 16, v0
  s_and_saveexec_b64 s[30:31], vcc
  v_lshlrev_b32 v11, 6, v0
  .set i, 0
  .rept 16
    ds_read_b32 v[48+i], v11 offset:4224+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v12, 0
  .set i, 0
  .rept 16
    v_add_f32 v12, v12, v[48+i]
    .set i, i+1
  .endr
  v_lshlrev_b32 v11, 2, v0
  ds_write_b32 v11, v12 offset:5248
  s_mov_b64 exec, s[30:31]
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_mov_b32 v11, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[48+i], v11 offset:5248+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v12, 0
  .set i, 0
  .rept 16
    v_add_f32 v12, v12, v[48+i]
    .set i, i+1
  .endr
  v_cvt_f32_u32 v13, s18
  v_rcp_f32 v13, v13
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_mul_f32 v12, v12, v13                // mean(a^2)
  v_add_f32 v12, s20, v12
  v_rsq_f32 v10, v12                     // 1 / rms
  // ---- pass 2: out
  s_mov_b32 s28, 0
.Lp2_\N\()_\BF:
  v_add_u32 v1, s28, v0
  v_cmp_gt_u32 vcc, s18, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lp2_next_\N\()_\BF
  v_lshlrev_b32 v11, 2, v1
  global_load_dword v9, v11, s[12:13]    // gamma[c]
  LOAD_X_AND_A \N, \BF
  v_mul_f32 v9, v9, v3
  v_mul_f32 v9, v9, v10                  // y = a gamma / rms
  s_mov_b64 s[46:47], s[38:39]
  s_mov_b32 s29, 0
  v_mov_b32 v5, 0
  v_mov_b32 v6, 0x1000
.Lrow_\N\()_\BF:
  ds_read_b32 v4, v6
  // Coefficient row i: 16 bytes per LDS instruction when n >= 4 (the row starts 16-aligned).
  .if \N >= 4
    .set j, 0
    .rept \N / 4
      ds_read_b128 v[48+j:51+j], v5 offset:j*4
      .set j, j+4
    .endr
  .else
    .set j, 0
    .rept \N
      ds_read_b32 v[48+j], v5 offset:j*4
      .set j, j+1
    .endr
  .endif
  s_waitcnt lgkmcnt(0)
  v_mul_f32 v4, v4, v9                   // h_post[i] y
  .set j, 0
  .rept \N
    v_fmac_f32 v4, v[48+j], v[16+j]      // + h_res[i][j] x[j]
    .set j, j+1
  .endr
  STORE_ACT v4, v2, s[46:47], \BF, v7
  s_add_u32 s46, s46, s34
  s_addc_u32 s47, s47, 0
  v_add_u32 v5, \N*4, v5
  v_add_u32 v6, 4, v6
  s_add_u32 s29, s29, 1
  s_cmp_lt_u32 s29, \N
  s_cbranch_scc1 .Lrow_\N\()_\BF
.Lp2_next_\N\()_\BF:
  s_mov_b64 exec, s[30:31]
  s_addk_i32 s28, 0x100
  s_cmp_lt_u32 s28, s18
  s_cbranch_scc1 .Lp2_\N\()_\BF
  s_branch .Ldone
.endm

.text
.globl mhc_static
.p2align 8
.type mhc_static,@function
mhc_static:
  s_load_dwordx8 s[4:11], s[0:1], 0x0    // x, h_pre, h_post, h_res
  s_load_dwordx4 s[12:15], s[0:1], 0x20  // gamma, out
  s_load_dwordx4 s[16:19], s[0:1], 0x30  // tokens, streams, channels, x_stride
  s_load_dwordx2 s[20:21], s[0:1], 0x40  // eps_f, flags
  s_waitcnt lgkmcnt(0)
  s_ff1_i32_b32 s24, s17                 // log2 n
  s_mul_i32 s25, s17, s17                // n^2
  s_movk_i32 s42, 0x7fff
  // Stage h_res (rows, as given) and h_post into LDS.
  v_lshlrev_b32 v1, 2, v0
  s_mov_b32 s27, 0
.Lstage:
  v_lshrrev_b32 v2, 2, v1
  v_cmp_gt_u32 vcc, s25, v2
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lstage_next
  global_load_dword v4, v1, s[10:11]
  s_waitcnt vmcnt(0)
  ds_write_b32 v1, v4
.Lstage_next:
  s_mov_b64 exec, s[30:31]
  v_add_u32 v1, 0x400, v1
  s_addk_i32 s27, 0x100
  s_cmp_lt_u32 s27, s25
  s_cbranch_scc1 .Lstage
  v_cmp_gt_u32 vcc, s17, v0
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lstaged
  v_lshlrev_b32 v1, 2, v0
  global_load_dword v4, v1, s[8:9]
  s_waitcnt vmcnt(0)
  ds_write_b32 v1, v4 offset:0x1000
.Lstaged:
  s_mov_b64 exec, s[30:31]
  s_waitcnt lgkmcnt(0)
  s_barrier
  s_and_b32 s35, s21, 1                  // bf16?
  s_sub_u32 s33, 2, s35                  // log2(bytes per element)
  s_lshl_b32 s34, s18, s33               // bytes per stream
  ROW_OFFSET 26, s2, s19, s33
  ADD64 36, 4, 26                // &x[t]
  ADD64 38, 14, 26               // &out[t]
  s_lshl_b32 s26, s24, 1
  s_add_u32 s26, s26, s35
  s_cmp_eq_u32 s26, 0
  s_cbranch_scc1 .Lstatic_1_0
  s_cmp_eq_u32 s26, 1
  s_cbranch_scc1 .Lstatic_1_1
  s_cmp_eq_u32 s26, 2
  s_cbranch_scc1 .Lstatic_2_0
  s_cmp_eq_u32 s26, 3
  s_cbranch_scc1 .Lstatic_2_1
  s_cmp_eq_u32 s26, 4
  s_cbranch_scc1 .Lstatic_4_0
  s_cmp_eq_u32 s26, 5
  s_cbranch_scc1 .Lstatic_4_1
  s_cmp_eq_u32 s26, 6
  s_cbranch_scc1 .Lstatic_8_0
  s_cmp_eq_u32 s26, 7
  s_cbranch_scc1 .Lstatic_8_1
  s_cmp_eq_u32 s26, 8
  s_cbranch_scc1 .Lstatic_16_0
  s_cmp_eq_u32 s26, 9
  s_cbranch_scc1 .Lstatic_16_1
  s_cmp_eq_u32 s26, 10
  s_cbranch_scc1 .Lstatic_32_0
  s_cmp_eq_u32 s26, 11
  s_cbranch_scc1 .Lstatic_32_1
  s_branch .Ldone
  STATIC_BODY 1, 0
  STATIC_BODY 1, 1
  STATIC_BODY 2, 0
  STATIC_BODY 2, 1
  STATIC_BODY 4, 0
  STATIC_BODY 4, 1
  STATIC_BODY 8, 0
  STATIC_BODY 8, 1
  STATIC_BODY 16, 0
  STATIC_BODY 16, 1
  STATIC_BODY 32, 0
  STATIC_BODY 32, 1
.Ldone:
  s_endpgm
.Lstatic_end:
.size mhc_static, .Lstatic_end - mhc_static

KERNEL_DESCRIPTOR mhc_static, 5312, 72, 80, 96, 0

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_static
    .symbol: mhc_static.kd
    .kernarg_segment_size: 72
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 5312
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 102
    .vgpr_count: 80
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: x, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_pre, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_post, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_res, .offset: 24, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: gamma, .offset: 32, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: out, .offset: 40, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 48, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 52, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 56, .size: 4, .value_kind: by_value }
      - { .name: x_stride, .offset: 60, .size: 4, .value_kind: by_value }
      - { .name: eps_f, .offset: 64, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 68, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
