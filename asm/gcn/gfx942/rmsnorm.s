// mhc_rmsnorm: the optional F-pre-norm of `pre` (docs/math.md, Stage 3), gfx942 (CDNA3), wave64.
//
//   y_t[c] = a_t[c] gamma_f[c] / sqrt(mean_c(a_t^2) + eps_f)
//
// Tile: one workgroup = 256 work-items = one token, C in chunks of 256; grid = T.
//   Pass 1 sums a^2 (lanes = channels), the workgroup reduces it through LDS in two levels
//   (256 -> 16 -> every lane sums the 16 in the same order), pass 2 writes y.
// Storage: a and y f32 or bf16 (flags bit 0), gamma_f f32.
// LDS: 1024 + 64 = 1088 B. VGPRs: 32 (v0 tid, v1 c, v2 offset, v3 a, v4 sum, v5..v7 work,
//   v[16:32) reduction). SGPRs: 40.
// Kernargs (48 B): a, gamma, out (= y; `y` is a YAML bool) (u64), tokens, channels, a_stride, y_stride, eps_f (f32), flags.
// Estimated per token: 2 C (4 or 2) B read (the second pass hits L2), C (4 or 2) B written,
//   C 4 B of gamma; ~12 wave instructions per 256 channels and pass.

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"

.macro LOAD_ACT dst, voff, sbase
  s_cmp_eq_u32 s35, 0
  s_cbranch_scc1 .Lf32_\@
  global_load_ushort \dst, \voff, \sbase
  s_waitcnt vmcnt(0)
  v_lshlrev_b32 \dst, 16, \dst
  s_branch .Ldone_\@
.Lf32_\@:
  global_load_dword \dst, \voff, \sbase
  s_waitcnt vmcnt(0)
.Ldone_\@:
.endm

.text
.globl mhc_rmsnorm
.p2align 8
.type mhc_rmsnorm,@function
mhc_rmsnorm:
  s_load_dwordx4 s[4:7], s[0:1], 0x0     // a, gamma
  s_load_dwordx2 s[8:9], s[0:1], 0x10    // y
  s_load_dwordx4 s[12:15], s[0:1], 0x18  // tokens, channels, a_stride, y_stride
  s_load_dwordx2 s[16:17], s[0:1], 0x28  // eps_f, flags
  s_waitcnt lgkmcnt(0)
  s_movk_i32 s42, 0x7fff
  s_and_b32 s35, s17, 1                  // bf16?
  s_sub_u32 s33, 2, s35                  // log2(bytes per element)
  ROW_OFFSET 26, s2, s14, s33
  ADD64 36, 4, 26                // &a[t]
  ROW_OFFSET 26, s2, s15, s33
  ADD64 38, 8, 26                // &y[t]
  // ---- pass 1
  v_mov_b32 v4, 0
  s_mov_b32 s28, 0
.Lp1:
  v_add_u32 v1, s28, v0
  v_cmp_gt_u32 vcc, s13, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lp1_next
  v_lshlrev_b32 v2, s33, v1
  LOAD_ACT v3, v2, s[36:37]
  v_fmac_f32 v4, v3, v3
.Lp1_next:
  s_mov_b64 exec, s[30:31]
  s_addk_i32 s28, 0x100
  s_cmp_lt_u32 s28, s13
  s_cbranch_scc1 .Lp1
  // ---- reduce
  v_lshlrev_b32 v5, 2, v0
  ds_write_b32 v5, v4
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_cmp_gt_u32 vcc, 16, v0
  s_and_saveexec_b64 s[30:31], vcc
  v_lshlrev_b32 v5, 6, v0
  .set i, 0
  .rept 16
    ds_read_b32 v[16+i], v5 offset:4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v6, 0
  .set i, 0
  .rept 16
    v_add_f32 v6, v6, v[16+i]
    .set i, i+1
  .endr
  v_lshlrev_b32 v5, 2, v0
  ds_write_b32 v5, v6 offset:1024
  s_mov_b64 exec, s[30:31]
  s_waitcnt lgkmcnt(0)
  s_barrier
  v_mov_b32 v5, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[16+i], v5 offset:1024+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  v_mov_b32 v6, 0
  .set i, 0
  .rept 16
    v_add_f32 v6, v6, v[16+i]
    .set i, i+1
  .endr
  v_cvt_f32_u32 v7, s13
  v_rcp_f32 v7, v7
  s_nop 0                                // gfx94x: transcendental result -> VALU needs 1
  v_mul_f32 v6, v6, v7
  v_add_f32 v6, s16, v6
  v_rsq_f32 v4, v6                       // 1 / rms
  // ---- pass 2
  s_mov_b32 s28, 0
.Lp2:
  v_add_u32 v1, s28, v0
  v_cmp_gt_u32 vcc, s13, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lp2_next
  v_lshlrev_b32 v2, s33, v1
  v_lshlrev_b32 v5, 2, v1
  global_load_dword v6, v5, s[6:7]       // gamma_f[c]
  LOAD_ACT v3, v2, s[36:37]
  v_mul_f32 v3, v3, v6
  v_mul_f32 v3, v3, v4
  s_cmp_eq_u32 s35, 0
  s_cbranch_scc1 .Lstore_f32
  v_bfe_u32 v7, v3, 16, 1
  v_add3_u32 v7, v3, v7, s42
  v_lshrrev_b32 v7, 16, v7
  global_store_short v2, v7, s[38:39]
  s_branch .Lp2_next
.Lstore_f32:
  global_store_dword v2, v3, s[38:39]
.Lp2_next:
  s_mov_b64 exec, s[30:31]
  s_addk_i32 s28, 0x100
  s_cmp_lt_u32 s28, s13
  s_cbranch_scc1 .Lp2
  s_endpgm
.Lrmsnorm_end:
.size mhc_rmsnorm, .Lrmsnorm_end - mhc_rmsnorm

KERNEL_DESCRIPTOR mhc_rmsnorm, 1088, 48, 32, 44, 0

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_rmsnorm
    .symbol: mhc_rmsnorm.kd
    .kernarg_segment_size: 48
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 1088
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 50
    .vgpr_count: 32
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: a, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: gamma, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: out, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 24, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 28, .size: 4, .value_kind: by_value }
      - { .name: a_stride, .offset: 32, .size: 4, .value_kind: by_value }
      - { .name: y_stride, .offset: 36, .size: 4, .value_kind: by_value }
      - { .name: eps_f, .offset: 40, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 44, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
