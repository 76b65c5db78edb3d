// mhc_proj: MATH.md stage 1 (projection and sum of squares), gfx942 (CDNA3), wave64.
//
//   P[t][m] = sum_k x_t[k] phi[m][k]      (raw: inv_rms is applied by mhc_coeffs)
//   inv_rms[t] = 1 / sqrt(sum_k x_t[k]^2 / K + eps_norm),   K = n C
//
// Tile: one workgroup = 256 work-items = one token; grid = T. The M logits are done in chunks of
//   16 rows of phi; for each chunk the work-items stride over k (k = tid + 256 r) with 16 FMA
//   accumulators (+ the sum of squares), then the workgroup reduces the 17 x 256 partial sums
//   through LDS in two levels (16 + 16 adds per value, two barriers).
// Lane mapping: lane = k within a 256-wide slice of the token row; phi rows are read through 16
//   SGPR base pointers (clamped to the last row for the tail chunk, whose extra results are
//   discarded), so each FMA costs one load and no address arithmetic.
// Storage: x f32 or bf16 (flags bit 0); phi, P, inv_rms f32. FMA in f32 (exact products, f32
//   accumulation): meets the f32 1e-5 tolerance without a tf32 split.
// LDS: 17 x 256 x 4 (partials) + 17 x 16 x 4 (second level) = 18496 B.
// VGPRs: v0 tid, v1 k byte offset, v2 x, v3..v19 accumulators (v19 = sum of squares),
//   v20..v35 phi values, v36..v40 work: 41 (accum_offset 44). SGPRs: 92.
// Kernargs (60 B): x, phi, p, inv_rms (u64), tokens, streams, channels, x_stride, eps_norm (f32),
//   flags, rows (M).
// Estimated per token: K*(4 or 2) B of x per chunk (ceil(M/16) chunks; L2 hits after the first)
//   + M*K*4 B of phi (L2-resident across tokens on hardware: M*K*4 = 1.5 MiB at n=4, C=4096);
//   per 256 k: 17 loads + 17 FMA + ~4 scalar ops per chunk. This is the many-token variant with
//   plain FMA; an MFMA (v_mfma_f32_32x32x2f32) token-tile variant is the next step (README).

.set ROWS, 16

.macro LOAD_X dst, voff, sbase, bf
  .if \bf
    global_load_ushort \dst, \voff, \sbase
  .else
    global_load_dword \dst, \voff, \sbase
  .endif
.endm

// One pass over k for the current chunk; bf selects the storage of x.
.macro KLOOP bf
  s_mov_b32 s50, 0                       // k0 (elements)
  v_lshlrev_b32 v1, 2, v0                // k * 4 (phi byte offset), k = k0 + tid
.Lk_\bf:
  v_lshrrev_b32 v36, 2, v1
  v_cmp_gt_u32 vcc, s24, v36             // k < K
  s_and_saveexec_b64 s[52:53], vcc
  .if \bf
    v_lshrrev_b32 v37, 1, v1             // x byte offset (2 B per element)
  .else
    v_mov_b32 v37, v1
  .endif
  LOAD_X v2, v37, s[40:41], \bf
  .set q, 0
  .rept ROWS
    global_load_dword v[20+q], v1, s[60+2*q:61+2*q]
    .set q, q+1
  .endr
  s_waitcnt vmcnt(0)
  .if \bf
    v_lshlrev_b32 v2, 16, v2
  .endif
  v_fmac_f32 v19, v2, v2
  .set q, 0
  .rept ROWS
    v_fmac_f32 v[3+q], v[20+q], v2
    .set q, q+1
  .endr
  s_mov_b64 exec, s[52:53]
  v_add_u32 v1, 0x400, v1
  s_addk_i32 s50, 0x100
  s_cmp_lt_u32 s50, s24
  s_cbranch_scc1 .Lk_\bf
.endm

.text
.globl mhc_proj
.p2align 8
.type mhc_proj,@function
mhc_proj:
  s_load_dwordx8 s[4:11], s[0:1], 0x0    // x, phi, p, inv_rms
  s_load_dwordx4 s[12:15], s[0:1], 0x20  // tokens, streams, channels, x_stride
  s_load_dwordx2 s[16:17], s[0:1], 0x30  // eps_norm, flags
  s_load_dword s25, s[0:1], 0x38         // M: rows of phi (n^2 + 2n for pre, n for head)
  s_waitcnt lgkmcnt(0)
  s_mul_i32 s24, s13, s14                // K = n C
  s_lshl_b32 s27, s24, 2                 // K * 4: bytes per phi row
  // &x[t] (64-bit), bytes per element from flags.
  s_and_b32 s28, s17, 1
  s_sub_u32 s29, 2, s28                  // log2(bytes per element)
  s_mul_i32 s30, s2, s15
  s_mul_hi_u32 s31, s2, s15
  s_lshl_b64 s[30:31], s[30:31], s29
  s_add_u32 s40, s4, s30
  s_addc_u32 s41, s5, s31
  // &p[t]
  s_mul_i32 s30, s2, s25
  s_lshl_b32 s30, s30, 2
  s_add_u32 s42, s8, s30
  s_addc_u32 s43, s9, 0
  v_lshlrev_b32 v38, 2, v0               // LDS slot of this work-item in a partial row
  s_mov_b32 s44, 0                       // m0: first row of the chunk
.Lchunk:
  // Base pointers of the chunk's 16 phi rows (row clamped to M - 1).
  s_sub_u32 s45, s25, 1
  .set q, 0
  .rept ROWS
    s_add_u32 s46, s44, q
    s_min_u32 s46, s46, s45
    s_mul_i32 s47, s46, s27
    s_mul_hi_u32 s48, s46, s27
    s_add_u32 s[60+2*q], s6, s47
    s_addc_u32 s[61+2*q], s7, s48
    .set q, q+1
  .endr
  .set q, 0
  .rept ROWS + 1
    v_mov_b32 v[3+q], 0
    .set q, q+1
  .endr
  s_cmp_eq_u32 s28, 0
  s_cbranch_scc0 .Lbf16
  KLOOP 0
  s_branch .Lreduce
.Lbf16:
  KLOOP 1
.Lreduce:
  // Level 1: partial row q at LDS 1024 q; work-item tid writes slot tid.
  .set q, 0
  .rept ROWS + 1
    ds_write_b32 v38, v[3+q] offset:1024*q
    .set q, q+1
  .endr
  s_waitcnt lgkmcnt(0)
  s_barrier
  // Level 2: work-item (q = tid >> 4, part = tid & 15) sums 16 slots; the sum-of-squares row
  // (q = 16) is done by work-items 0..15 as a second pass.
  v_lshrrev_b32 v36, 4, v0               // q
  v_and_b32 v37, 15, v0                  // part
  v_lshlrev_b32 v39, 10, v36
  v_lshl_add_u32 v39, v37, 6, v39        // 1024 q + 64 part
  v_mov_b32 v40, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[20+i], v39 offset:4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v40, v40, v[20+i]
    .set i, i+1
  .endr
  v_lshlrev_b32 v39, 2, v0               // second level slot: 16 q + part
  ds_write_b32 v39, v40 offset:17408
  v_cmp_gt_u32 vcc, 16, v0
  s_and_saveexec_b64 s[52:53], vcc
  v_lshlrev_b32 v39, 6, v0
  v_mov_b32 v40, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[20+i], v39 offset:16384+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v40, v40, v[20+i]
    .set i, i+1
  .endr
  v_lshlrev_b32 v39, 2, v0
  ds_write_b32 v39, v40 offset:18432     // 17408 + 4 * 256
  s_mov_b64 exec, s[52:53]
  s_waitcnt lgkmcnt(0)
  s_barrier
  // Level 3: work-items 0..16 finish row q = tid.
  v_cmp_gt_u32 vcc, 17, v0
  s_and_saveexec_b64 s[52:53], vcc
  s_cbranch_execz .Lnext_chunk
  v_lshlrev_b32 v39, 6, v0
  v_mov_b32 v40, 0
  .set i, 0
  .rept 16
    ds_read_b32 v[20+i], v39 offset:17408+4*i
    .set i, i+1
  .endr
  s_waitcnt lgkmcnt(0)
  .set i, 0
  .rept 16
    v_add_f32 v40, v40, v[20+i]
    .set i, i+1
  .endr
  // q < 16 and m0 + q < M: P[t][m0 + q]
  v_add_u32 v36, s44, v0
  v_cmp_gt_u32 vcc, s25, v36
  s_and_b64 vcc, vcc, exec
  v_cmp_gt_u32 s[54:55], 16, v0
  s_and_b64 vcc, vcc, s[54:55]
  s_mov_b64 s[56:57], exec
  s_mov_b64 exec, vcc
  v_lshlrev_b32 v36, 2, v36
  global_store_dword v36, v40, s[42:43]
  // q == 16 in the first chunk: inv_rms[t] = rsq(ss / K + eps)
  s_cmp_eq_u32 s44, 0
  s_cbranch_scc0 .Lchunk_done
  s_mov_b64 exec, s[56:57]
  v_cmp_eq_u32 vcc, 16, v0
  s_and_b64 exec, exec, vcc
  s_cbranch_execz .Lchunk_done
  v_cvt_f32_u32 v36, s24
  v_rcp_f32 v36, v36
  v_mul_f32 v40, v40, v36
  v_add_f32 v40, s16, v40
  v_rsq_f32 v40, v40
  s_lshl_b32 s30, s2, 2
  v_mov_b32 v36, s30
  global_store_dword v36, v40, s[10:11]
.Lchunk_done:
.Lnext_chunk:
  s_mov_b64 exec, s[52:53]
  s_add_u32 s44, s44, ROWS
  s_cmp_lt_u32 s44, s25
  s_cbranch_scc1 .Lchunk
  s_endpgm
.Lproj_end:
.size mhc_proj, .Lproj_end - mhc_proj

.rodata
.p2align 6
.amdhsa_kernel mhc_proj
  .amdhsa_group_segment_fixed_size 18496
  .amdhsa_private_segment_fixed_size 0
  .amdhsa_kernarg_size 60
  .amdhsa_user_sgpr_count 2
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_system_sgpr_workgroup_id_x 1
  .amdhsa_system_vgpr_workitem_id 0
  .amdhsa_next_free_vgpr 41
  .amdhsa_next_free_sgpr 92
  .amdhsa_accum_offset 44
  .amdhsa_float_denorm_mode_32 3
  .amdhsa_float_denorm_mode_16_64 3
.end_amdhsa_kernel

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_proj
    .symbol: mhc_proj.kd
    .kernarg_segment_size: 60
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 18496
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 98
    .vgpr_count: 41
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: x, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: phi, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: p, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: inv_rms, .offset: 24, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 32, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 36, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 40, .size: 4, .value_kind: by_value }
      - { .name: x_stride, .offset: 44, .size: 4, .value_kind: by_value }
      - { .name: eps_norm, .offset: 48, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 52, .size: 4, .value_kind: by_value }
      - { .name: rows, .offset: 56, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
