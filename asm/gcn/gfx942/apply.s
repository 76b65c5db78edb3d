// mhc_apply: MATH.md stage 3 (pre-apply) and the collapse of `head`, gfx942 (CDNA3), wave64.
//
//   a_t[c] = sum_i h[t][i] x_t[i][c]      (h = h_pre for `pre`, the head weights for `head`)
//
// Tile: one workgroup = 256 work-items (4 waves) = 256 channels of one token;
//   grid = (ceil(C / 256), T); lanes with c >= C are masked off.
// Lane mapping: lane = channel c. The token's n weights are loaded once per wave into SGPRs
//   (s[64:64+n), scalar loads) and used as the scalar operand of v_fmac_f32, so the inner
//   product costs one FMA per stream and nothing else.
// Specialisation: unrolled per n in {1,2,4,8,16,32} and per dtype (f32 / bf16) by macros; a
//   scalar branch on (log2 n, bf16) picks the body.
// LDS: none. VGPRs: v0 tid, v1 c, v2 byte offset, v3 acc, v4 temp, v[8:8+n) x: 40.
// SGPRs: s[0:1] kernarg, s2 group x, s3 token, s[4:9] pointers, s[12:17] ints, s20.. work,
//   s[64:96) weights: 96.
// Kernargs (48 B): x, h, a (u64), tokens, streams, channels, x_stride, a_stride, flags.
// Estimated per token: n C (4 or 2) B read + C (4 or 2) B written + 4n B of weights; per 256
//   channels: n loads, n FMA, 1 store, ~6 address ops.

.macro LOAD_ACT dst, voff, sbase, bf
  .if \bf
    global_load_ushort \dst, \voff, \sbase
  .else
    global_load_dword \dst, \voff, \sbase
  .endif
.endm

.macro STORE_ACT src, voff, sbase, bf, tmp
  .if \bf
    v_bfe_u32 \tmp, \src, 16, 1
    v_add3_u32 \tmp, \src, \tmp, s42
    v_lshrrev_b32 \tmp, 16, \tmp
    global_store_short \voff, \tmp, \sbase
  .else
    global_store_dword \voff, \src, \sbase
  .endif
.endm

// Loads h[t][0..N) into s[64:64+N) from s[22:23] (= &h[t]).
.macro LOAD_WEIGHTS N
  .if \N == 1
    s_load_dword s64, s[22:23], 0x0
  .elseif \N == 2
    s_load_dwordx2 s[64:65], s[22:23], 0x0
  .elseif \N == 4
    s_load_dwordx4 s[64:67], s[22:23], 0x0
  .elseif \N == 8
    s_load_dwordx8 s[64:71], s[22:23], 0x0
  .elseif \N == 16
    s_load_dwordx16 s[64:79], s[22:23], 0x0
  .else
    s_load_dwordx16 s[64:79], s[22:23], 0x0
    s_load_dwordx16 s[80:95], s[22:23], 0x40
  .endif
.endm

.macro APPLY_BODY N, BF
.Lapply_\N\()_\BF:
  LOAD_WEIGHTS \N
  .set j, 0
  .rept \N
    LOAD_ACT v[8+j], v2, s[36:37], \BF
    s_add_u32 s36, s36, s34
    s_addc_u32 s37, s37, 0
    .set j, j+1
  .endr
  s_waitcnt vmcnt(0) lgkmcnt(0)
  .if \BF
    .set j, 0
    .rept \N
      v_lshlrev_b32 v[8+j], 16, v[8+j]
      .set j, j+1
    .endr
  .endif
  v_mul_f32 v3, s64, v8
  .set j, 1
  .rept \N - 1
    v_fmac_f32 v3, s[64+j], v[8+j]
    .set j, j+1
  .endr
  STORE_ACT v3, v2, s[38:39], \BF, v4
  s_branch .Ldone
.endm

.text
.globl mhc_apply
.p2align 8
.type mhc_apply,@function
mhc_apply:
  s_load_dwordx4 s[4:7], s[0:1], 0x0    // x, h
  s_load_dwordx2 s[8:9], s[0:1], 0x10   // a
  s_load_dwordx4 s[12:15], s[0:1], 0x18 // tokens, streams, channels, x_stride
  s_load_dwordx2 s[16:17], s[0:1], 0x28 // a_stride, flags
  s_waitcnt lgkmcnt(0)
  s_lshl_b32 s20, s2, 8
  v_add_u32 v1, s20, v0                 // c
  v_cmp_gt_u32 vcc, s14, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Ldone
  s_movk_i32 s42, 0x7fff
  s_ff1_i32_b32 s24, s13                // log2 n
  s_and_b32 s35, s17, 1                 // bf16?
  s_sub_u32 s33, 2, s35                 // log2(bytes per element)
  v_lshlrev_b32 v2, s33, v1
  s_lshl_b32 s34, s14, s33              // bytes per stream
  s_mul_i32 s20, s3, s15
  s_mul_hi_u32 s21, s3, s15
  s_lshl_b64 s[20:21], s[20:21], s33
  s_add_u32 s36, s4, s20
  s_addc_u32 s37, s5, s21               // &x[t]
  s_mul_i32 s20, s3, s16
  s_mul_hi_u32 s21, s3, s16
  s_lshl_b64 s[20:21], s[20:21], s33
  s_add_u32 s38, s8, s20
  s_addc_u32 s39, s9, s21               // &a[t]
  s_mul_i32 s20, s3, s13
  s_lshl_b32 s20, s20, 2
  s_add_u32 s22, s6, s20
  s_addc_u32 s23, s7, 0                 // &h[t]
  s_lshl_b32 s20, s24, 1
  s_add_u32 s20, s20, s35
  s_cmp_eq_u32 s20, 0
  s_cbranch_scc1 .Lapply_1_0
  s_cmp_eq_u32 s20, 1
  s_cbranch_scc1 .Lapply_1_1
  s_cmp_eq_u32 s20, 2
  s_cbranch_scc1 .Lapply_2_0
  s_cmp_eq_u32 s20, 3
  s_cbranch_scc1 .Lapply_2_1
  s_cmp_eq_u32 s20, 4
  s_cbranch_scc1 .Lapply_4_0
  s_cmp_eq_u32 s20, 5
  s_cbranch_scc1 .Lapply_4_1
  s_cmp_eq_u32 s20, 6
  s_cbranch_scc1 .Lapply_8_0
  s_cmp_eq_u32 s20, 7
  s_cbranch_scc1 .Lapply_8_1
  s_cmp_eq_u32 s20, 8
  s_cbranch_scc1 .Lapply_16_0
  s_cmp_eq_u32 s20, 9
  s_cbranch_scc1 .Lapply_16_1
  s_cmp_eq_u32 s20, 10
  s_cbranch_scc1 .Lapply_32_0
  s_cmp_eq_u32 s20, 11
  s_cbranch_scc1 .Lapply_32_1
  s_branch .Ldone
  APPLY_BODY 1, 0
  APPLY_BODY 1, 1
  APPLY_BODY 2, 0
  APPLY_BODY 2, 1
  APPLY_BODY 4, 0
  APPLY_BODY 4, 1
  APPLY_BODY 8, 0
  APPLY_BODY 8, 1
  APPLY_BODY 16, 0
  APPLY_BODY 16, 1
  APPLY_BODY 32, 0
  APPLY_BODY 32, 1
.Ldone:
  s_endpgm
.Lapply_end:
.size mhc_apply, .Lapply_end - mhc_apply

.rodata
.p2align 6
.amdhsa_kernel mhc_apply
  .amdhsa_group_segment_fixed_size 0
  .amdhsa_private_segment_fixed_size 0
  .amdhsa_kernarg_size 48
  .amdhsa_user_sgpr_count 2
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_sgpr_workgroup_id_y 1
  .amdhsa_system_vgpr_workitem_id 0
  .amdhsa_next_free_vgpr 40
  .amdhsa_next_free_sgpr 96
  .amdhsa_accum_offset 40
  .amdhsa_float_denorm_mode_32 3
  .amdhsa_float_denorm_mode_16_64 3
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_apply
    .symbol: mhc_apply.kd
    .kernarg_segment_size: 48
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 102
    .vgpr_count: 40
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: x, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: a, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 24, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 28, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 32, .size: 4, .value_kind: by_value }
      - { .name: x_stride, .offset: 36, .size: 4, .value_kind: by_value }
      - { .name: a_stride, .offset: 40, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 44, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
