// mhc_expand: `expand` of docs/math.md, gfx942 (CDNA3), wave64: the first layer's residual from
// the embedding, out_t[i][c] = e_t[c] for every stream i < n. A copy: the element's bits are
// stored as loaded (no conversion), so both storage dtypes are exact.
//
// Tile: one workgroup = 256 work-items (4 waves) = 256 channels of one token.
//   grid = (ceil(C / 256), T); work-item c = group_x * 256 + tid; lanes with c >= C are masked off.
// Lane mapping: lane = channel; e_t[c] is loaded once and stored n times, the store base advanced
//   by C elements per stream (a runtime loop: any n in 1..=32, no unrolling needed).
// VGPRs: v0 tid, v1 c, v2 byte offset of c, v3 the element: 4 (8 allocated).
// SGPRs: s[0:1] kernarg ptr, s2 group x, s3 token; s[4:7] e, out; s8..s13 kernarg scalars;
//   s14..s24 work (25; 31 with VCC and flat scratch).
// Kernargs (40 B): e, out (u64), tokens, streams, channels, e_stride, out_stride (elements per
//   token row), flags (bit 0: bf16 storage of e and out).
// Per token: C esize bytes read, n C esize written; 2 + n vector memory instructions per 256
//   channels.

// ROW_OFFSET, ADD64; KERNEL_DESCRIPTOR.
.include "address.inc"
.include "descriptor.inc"

// The element at v2 of &e[t] (s[18:19]) into each stream of &out[t] (s[20:21], advanced by
// s[22:23] bytes per stream); bf = 1: 16-bit elements, 0: 32-bit.
.macro COPY bf
  .if \bf
    global_load_ushort v3, v2, s[18:19]
  .else
    global_load_dword v3, v2, s[18:19]
  .endif
  s_waitcnt vmcnt(0)
.Lstream_\bf:
  .if \bf
    global_store_short v2, v3, s[20:21]
  .else
    global_store_dword v2, v3, s[20:21]
  .endif
  ADD64 20, 20, 22
  s_add_u32 s24, s24, 1
  s_cmp_lt_u32 s24, s9
  s_cbranch_scc1 .Lstream_\bf
  s_branch .Ldone
.endm

.text
.globl mhc_expand
.p2align 8
.type mhc_expand,@function
mhc_expand:
  s_load_dwordx4 s[4:7], s[0:1], 0x0     // e, out
  s_load_dwordx4 s[8:11], s[0:1], 0x10   // T, n, C, e_stride
  s_load_dwordx2 s[12:13], s[0:1], 0x20  // out_stride, flags
  s_waitcnt lgkmcnt(0)

  // This lane's channel.
  s_lshl_b32 s14, s2, 8
  v_add_u32 v1, s14, v0                  // c
  v_cmp_gt_u32 vcc, s10, v1
  s_and_saveexec_b64 s[16:17], vcc
  s_cbranch_execz .Ldone
  s_and_b32 s15, s13, 1                  // bf16?
  s_sub_u32 s14, 2, s15                  // log2(bytes per element)
  v_lshlrev_b32 v2, s14, v1              // byte offset of c
  // Row bases (64-bit: t * stride * bytes may pass 4 GiB).
  ROW_OFFSET 18, s3, s11, s14
  ADD64 18, 4, 18                // &e[t]
  ROW_OFFSET 20, s3, s12, s14
  ADD64 20, 6, 20                // &out[t][0]
  // Bytes per stream (C elements), 64-bit.
  s_mov_b32 s22, s10
  s_mov_b32 s23, 0
  s_lshl_b64 s[22:23], s[22:23], s14
  s_mov_b32 s24, 0                       // i
  s_cmp_eq_u32 s15, 0
  s_cbranch_scc1 .Lcopy_0
  COPY 1
.Lcopy_0:
  COPY 0
.Ldone:
  s_endpgm
.Lexpand_end:
.size mhc_expand, .Lexpand_end - mhc_expand

KERNEL_DESCRIPTOR mhc_expand, 0, 40, 8, 25, 1

.amdgpu_metadata
---
amdhsa.version: [ 1, 2 ]
amdhsa.kernels:
  - .name: mhc_expand
    .symbol: mhc_expand.kd
    .kernarg_segment_size: 40
    .kernarg_segment_align: 8
    .group_segment_fixed_size: 0
    .private_segment_fixed_size: 0
    .wavefront_size: 64
    .sgpr_count: 31
    .vgpr_count: 8
    .agpr_count: 0
    .max_flat_workgroup_size: 256
    .args:
      - { .name: e, .offset: 0, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: read_only }
      - { .name: out, .offset: 8, .size: 8, .value_kind: global_buffer, .address_space: global, .actual_access: write_only }
      - { .name: tokens, .offset: 16, .size: 4, .value_kind: by_value }
      - { .name: streams, .offset: 20, .size: 4, .value_kind: by_value }
      - { .name: channels, .offset: 24, .size: 4, .value_kind: by_value }
      - { .name: e_stride, .offset: 28, .size: 4, .value_kind: by_value }
      - { .name: out_stride, .offset: 32, .size: 4, .value_kind: by_value }
      - { .name: flags, .offset: 36, .size: 4, .value_kind: by_value }
...
.end_amdgpu_metadata
