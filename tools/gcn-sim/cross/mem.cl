// Global memory at every width (8, 16, 32, 64, 96, 128 bits; signed and unsigned sub-dword
// loads; d16 loads into half registers), scalar loads of a uniform table, and buffer (MUBUF)
// loads and stores through a buffer resource.
#include "common.h"

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef short i16;

// out (u32 per work-item, 16 each) from a byte buffer `src` (at least 64 bytes per work-item).
KERNEL void loads(global u32 *out, global const u8 *src, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    global const u8 *p = src + 64 * i;
    global u32 *o = out + 16 * i;
    o[0] = p[1];
    o[1] = (u32)(i32)((global const i8 *)p)[3];
    o[2] = ((global const u16 *)p)[1];
    o[3] = (u32)(i32)((global const i16 *)p)[3];
    o[4] = ((global const u32 *)p)[2];
    uint2 v2 = ((global const uint2 *)p)[2];
    o[5] = v2.x ^ v2.y;
    global const u32 *p3 = (global const u32 *)(p + 36);
    u32 v3x = p3[0], v3y = p3[1], v3z = p3[2];
    o[6] = v3x + v3y * 3 + v3z * 5;
    uint4 v4 = ((global const uint4 *)p)[3];
    o[7] = v4.x - v4.y + v4.z - v4.w;
    ushort2 h = (ushort2)(((global const u16 *)p)[5], ((global const u16 *)p)[9]);
    o[8] = as_uint(h);
    o[9] = (u32)p[7] | ((u32)p[13] << 8) | ((u32)p[17] << 16) | ((u32)p[19] << 24);
    o[10] = (u32)((global const ulong *)p)[1];
    o[11] = (u32)(((global const ulong *)p)[1] >> 32);
    o[12] = ((global const u16 *)p)[31] + ((global const u8 *)p)[62];
    o[13] = v4.w;
    o[14] = v3z;
    o[15] = v2.y;
}

// Stores of every width into a byte buffer `dst` (64 bytes per work-item).
KERNEL void stores(global u8 *dst, global const u32 *a, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i];
    global u8 *p = dst + 64 * i;
    p[0] = (u8)x;
    p[3] = (u8)(x >> 8);
    ((global u16 *)p)[2] = (u16)(x >> 3);
    ((global u32 *)p)[2] = x * 7;
    ((global uint2 *)p)[2] = (uint2)(x, ~x);
    global u32 *q3 = (global u32 *)(p + 24);
    q3[0] = x + 1;
    q3[1] = x + 2;
    q3[2] = x + 3;
    ((global uint4 *)p)[3] = (uint4)(x, x << 1, x << 2, x << 3);
    ((global ulong *)p)[2] = ((ulong)x << 32) | (x ^ 0xffff);
    ((global u16 *)p)[3] = (u16)(x >> 16);
    ((global u16 *)p)[31] = (u16)(x + i);
    p[61] = (u8)i;
}

// A uniform table read with scalar loads (s_load_dword .. s_load_dwordx16).
KERNEL void scalar_loads(global u32 *out, global const u32 *restrict table, u32 k, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 acc = 0;
    for (u32 j = 0; j < 16; j++)
        acc += table[j] * (i + j);
    acc ^= table[16 + (k & 7)];
    acc += table[24] + table[25] + table[26] + table[27];
    out[i] = acc;
}

// Buffer loads and stores (raw buffer resources over `buf` of `bytes` bytes and over `dst`;
// loads past the end return zero, as the hardware's range check does).
KERNEL void buffers(global u32 *out, global u32 *buf, u32 bytes, global u32 *dst, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc(buf, 0, bytes, 0x00027000);
    __amdgpu_buffer_rsrc_t d = __builtin_amdgcn_make_buffer_rsrc(dst, 0, 4 * n, 0x00027000);
    u32 v = __builtin_amdgcn_raw_buffer_load_b32(r, 4 * i, 0, 0);
    uint2 v2 = __builtin_amdgcn_raw_buffer_load_b64(r, 8 * (i / 2), 0, 0);
    uint4 v4 = __builtin_amdgcn_raw_buffer_load_b128(r, 16 * (i / 4), 0, 0);
    u32 b = __builtin_amdgcn_raw_buffer_load_b8(r, i + 3, 0, 0);
    u32 h = __builtin_amdgcn_raw_buffer_load_b16(r, 2 * i + 6, 16, 0);
    out[4 * i] = v + v2.x + v2.y * 3;
    out[4 * i + 1] = v4.x ^ v4.y ^ v4.z ^ v4.w;
    out[4 * i + 2] = b | (h << 8);
    out[4 * i + 3] = __builtin_amdgcn_raw_buffer_load_b32(r, bytes - 8 + 4 * (i & 3), 0, 0);
    __builtin_amdgcn_raw_buffer_store_b32(v * 3, d, 4 * i, 0, 0);
}
