// mhc_post: `post`, the residual merge of docs/math.md, gfx942 (CDNA3), wave64.
//
//   V4:    out_t[i][c] = h_post[t,i] f_t[c] + sum_j h_res[t][j][i] x_t[j][c]   (h_res transposed)
//   Paper: out_t[i][c] = h_post[t,i] f_t[c] + sum_j h_res[t][i][j] x_t[j][c]
// Both orientations are one kernel: the host passes the element strides (res_si, res_sj) of the
// coefficient used for output stream i and input stream j: V4 (1, n), Paper (n, 1).
//
// Tile: one workgroup = 256 work-items (4 waves) = 256 channels of one token.
//   grid = (ceil(C / 256), T); work-item c = group_x * 256 + tid; lanes with c >= C are masked off.
// Lane mapping: lane = channel; every lane holds its column x_t[0..n)[c] in VGPRs (loaded once),
//   then loops over output streams i, reading row i of the coefficients from LDS (uniform address,
//   a broadcast; 16 bytes per ds_read_b128 when n >= 4), so x is read once and out written once:
//   (n+1)C reads, nC writes per token.
// Specialisation: the body is unrolled per n in {1,2,4,8,16,32} and per storage dtype (f32 /
//   bf16) by assembler macros; a scalar branch picks the body (n and flags are kernargs).
// LDS: 4096 B coefficients (row i contiguous: L[i*n + j]) + 128 B h_post = 4224 B.
// VGPRs: v0 tid, v1 c, v2 byte offset of c, v3 f, v4 acc, v5/v6 LDS addresses, v7 bf16 temp,
//   v[16:16+n) x column, v[48:48+n) coefficient row. 80 in all.
// SGPRs: s[0:1] kernarg ptr, s2 group x, s3 token; s[4:13] pointers; s16..s23 ints; s24..s43 work.
// Kernargs (72 B): x, f, h_post, h_res, out (u64), T, streams, C, x_stride (elements per token,
//   shared by x and out), f_stride, res_si, res_sj, flags (bit 0: bf16 storage of x, f and out).
// Estimated per token (n = 4, C = 4096, f32): bytes (n+1)*C*4 read + n*C*4 written = 144 KiB;
//   VALU per 256 channels: ~(n + 4) loads/stores + n*(n + 2) FMA/mul + ~10 address ops.
//   Measured on the simulator (n = 4, C = 4096, bf16, per token): 3568 VALU, 4224 SALU, 352 + 256
//   VMEM, 544 LDS wave instructions; 42 KB read, 32 KB written (asm/gcn/README.md).

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"
// LOAD_ACT, WIDEN, STORE_ACT (shared with mhc_static).
.include "activations.inc"

.macro POST_BODY N, BF
.Lpost_\N\()_\BF:
  // x column: x_t[j][c], j < N; s[36:37] walks the streams (stride C elements).
  .set j, 0
  .rept \N
    LOAD_ACT v[16+j], v2, s[36:37], \BF
    s_add_u32 s36, s36, s34
    s_addc_u32 s37, s37, 0
    .set j, j+1
  .endr
  LOAD_ACT v3, v2, s[40:41], \BF
  s_waitcnt vmcnt(0)
  .set j, 0
  .rept \N
    WIDEN v[16+j], \BF
    .set j, j+1
  .endr
  WIDEN v3, \BF
  s_mov_b32 s27, 0                      // i
  v_mov_b32 v5, 0                       // LDS address of coefficient row i
  v_mov_b32 v6, 0x1000                  // LDS address of h_post[i]
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
  v_mul_f32 v4, v4, v3                  // h_post[i] * f
  .set j, 0
  .rept \N
    v_fmac_f32 v4, v[48+j], v[16+j]     // + H(i, j) * x[j]
    .set j, j+1
  .endr
  STORE_ACT v4, v2, s[38:39], \BF, v7
  s_add_u32 s38, s38, s34
  s_addc_u32 s39, s39, 0
  v_add_u32 v5, \N*4, v5
  v_add_u32 v6, 4, v6
  s_add_u32 s27, s27, 1
  s_cmp_lt_u32 s27, \N
  s_cbranch_scc1 .Lrow_\N\()_\BF
  s_branch .Ldone
.endm

.text
.globl mhc_post
.p2align 8
.type mhc_post,@function
mhc_post:
  s_load_dwordx8 s[4:11], s[0:1], 0x0   // x, f, h_post, h_res
  s_load_dwordx2 s[12:13], s[0:1], 0x20 // out
  s_load_dwordx8 s[16:23], s[0:1], 0x28 // T, n, C, x_stride, f_stride, res_si, res_sj, flags
  s_waitcnt lgkmcnt(0)
  s_ff1_i32_b32 s24, s17                // log2 n (n is a power of two)
  s_mul_i32 s25, s17, s17               // n*n
  s_sub_u32 s43, s17, 1                 // n - 1
  s_movk_i32 s42, 0x7fff

  // Stage h_res[t] into LDS as rows of output stream i: L[i*n + j] = h_res[t][i*si + j*sj].
  s_mul_i32 s26, s3, s25
  s_lshl_b32 s26, s26, 2
  s_add_u32 s28, s10, s26
  s_addc_u32 s29, s11, 0                // &h_res[t]
  v_mov_b32 v1, v0                      // e = tid, tid + 256, ...
  s_mov_b32 s27, 0
.Lstage:
  v_cmp_gt_u32 vcc, s25, v1             // e < n*n
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lstage_next
  v_lshrrev_b32 v2, s24, v1             // i
  v_and_b32 v3, s43, v1                 // j
  v_mul_lo_u32 v2, v2, s21
  v_mul_lo_u32 v3, v3, s22
  v_add_lshl_u32 v2, v2, v3, 2
  global_load_dword v4, v2, s[28:29]
  v_lshlrev_b32 v5, 2, v1
  s_waitcnt vmcnt(0)
  ds_write_b32 v5, v4
.Lstage_next:
  s_mov_b64 exec, s[30:31]
  v_add_u32 v1, 0x100, v1
  s_addk_i32 s27, 0x100
  s_cmp_lt_u32 s27, s25
  s_cbranch_scc1 .Lstage
  // h_post[t][0..n) -> L[1024 + i]
  v_cmp_gt_u32 vcc, s17, v0
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Lstaged
  s_mul_i32 s26, s3, s17
  s_lshl_b32 s26, s26, 2
  s_add_u32 s28, s8, s26
  s_addc_u32 s29, s9, 0
  v_lshlrev_b32 v5, 2, v0
  global_load_dword v4, v5, s[28:29]
  s_waitcnt vmcnt(0)
  ds_write_b32 v5, v4 offset:0x1000
.Lstaged:
  s_mov_b64 exec, s[30:31]
  s_waitcnt lgkmcnt(0)
  s_barrier

  // This lane's channel.
  s_lshl_b32 s26, s2, 8
  v_add_u32 v1, s26, v0                 // c
  v_cmp_gt_u32 vcc, s18, v1
  s_and_saveexec_b64 s[30:31], vcc
  s_cbranch_execz .Ldone
  s_and_b32 s35, s23, 1                 // bf16?
  s_sub_u32 s33, 2, s35                 // log2(bytes per element)
  v_lshlrev_b32 v2, s33, v1             // byte offset of c
  s_lshl_b32 s34, s18, s33              // bytes per stream (C elements)
  // Row bases (64-bit: t * stride * bytes may pass 4 GiB).
  ROW_OFFSET 26, s3, s19, s33
  ADD64 36, 4, 26               // &x[t]
  ADD64 38, 12, 26              // &out[t]
  ROW_OFFSET 26, s3, s20, s33
  ADD64 40, 6, 26               // &f[t]
  // Dispatch on (log2 n, bf16): key = 2*log2n + bf16.
  s_lshl_b32 s26, s24, 1
  s_add_u32 s26, s26, s35
  s_cmp_eq_u32 s26, 0
  s_cbranch_scc1 .Lpost_1_0
  s_cmp_eq_u32 s26, 1
  s_cbranch_scc1 .Lpost_1_1
  s_cmp_eq_u32 s26, 2
  s_cbranch_scc1 .Lpost_2_0
  s_cmp_eq_u32 s26, 3
  s_cbranch_scc1 .Lpost_2_1
  s_cmp_eq_u32 s26, 4
  s_cbranch_scc1 .Lpost_4_0
  s_cmp_eq_u32 s26, 5
  s_cbranch_scc1 .Lpost_4_1
  s_cmp_eq_u32 s26, 6
  s_cbranch_scc1 .Lpost_8_0
  s_cmp_eq_u32 s26, 7
  s_cbranch_scc1 .Lpost_8_1
  s_cmp_eq_u32 s26, 8
  s_cbranch_scc1 .Lpost_16_0
  s_cmp_eq_u32 s26, 9
  s_cbranch_scc1 .Lpost_16_1
  s_cmp_eq_u32 s26, 10
  s_cbranch_scc1 .Lpost_32_0
  s_cmp_eq_u32 s26, 11
  s_cbranch_scc1 .Lpost_32_1
  s_branch .Ldone
  POST_BODY 1, 0
  POST_BODY 1, 1
  POST_BODY 2, 0
  POST_BODY 2, 1
  POST_BODY 4, 0
  POST_BODY 4, 1
  POST_BODY 8, 0
  POST_BODY 8, 1
  POST_BODY 16, 0
  POST_BODY 16, 1
  POST_BODY 32, 0
  POST_BODY 32, 1
.Ldone:
  s_endpgm
.Lpost_end:
.size mhc_post, .Lpost_end - mhc_post

KERNEL_DESCRIPTOR mhc_post, 4224, 72, 80, 44, 1

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_post
    .symbol: mhc_post.kd
    .kernarg_segment_size: 72
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 4224
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 50
    .vgpr_count: 80
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: x, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: f, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_post, .offset: 16, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: h_res, .offset: 24, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: out, .offset: 32, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 40, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 44, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 48, .size: 4, .value_kind: by_value }
      - { .name: x_stride, .offset: 52, .size: 4, .value_kind: by_value }
      - { .name: f_stride, .offset: 56, .size: 4, .value_kind: by_value }
      - { .name: res_si, .offset: 60, .size: 4, .value_kind: by_value }
      - { .name: res_sj, .offset: 64, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 68, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
