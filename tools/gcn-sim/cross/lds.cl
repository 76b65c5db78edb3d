// LDS: stores and loads of every width, two-address forms (ds_read2/ds_write2 and their st64
// variants), LDS atomics, and the cross-lane LDS instructions (ds_swizzle, ds_permute,
// ds_bpermute), with barriers between the phases.
#include "common.h"

KERNEL void lds_widths(global u32 *out, global const u32 *a, u32 n) {
    local u32 w[256 * 4];
    local ulong q[256];
    local uint4 v4[256];
    local unsigned char bytes[1024];
    local unsigned short shorts[512];
    u32 l = LID(), i = GID();
    u32 x = i < n ? a[i] : 0;
    w[l] = x;
    w[256 + l] = x * 3;
    w[512 + 4 * (l & 63) + (l >> 6)] = ~x;
    q[l] = ((ulong)x << 32) | (x >> 1);
    v4[l] = (uint4)(x, x + 1, x + 2, x + 3);
    bytes[l * 4 + 1] = (unsigned char)(x >> 8);
    bytes[l * 4 + 0] = (unsigned char)x;
    shorts[l * 2 + 1] = (unsigned short)(x >> 16);
    BARRIER();
    u32 m = 255 - l;
    u32 r0 = w[m] + w[256 + ((l + 64) & 255)];
    u32 r1 = w[512 + 4 * (m & 63) + (m >> 6)];
    ulong r2 = q[(l * 7) & 255];
    uint4 r3 = v4[(l + 1) & 255];
    u32 r4 = bytes[m * 4 + 1] | ((u32)bytes[m * 4] << 8);
    u32 r5 = (u32)(i32)(short)shorts[((l + 3) & 255) * 2 + 1];
    u32 r6 = w[(l * 2) & 255] + w[((l * 2) & 255) + 1] + w[(l + 64) & 255] * 2;
    if (i >= n)
        return;
    global u32 *o = out + 10 * i;
    o[0] = r0;
    o[1] = r1;
    o[2] = (u32)r2;
    o[3] = (u32)(r2 >> 32);
    o[4] = r3.x + r3.y * 2 + r3.z * 4 + r3.w * 8;
    o[5] = r4;
    o[6] = r5;
    o[7] = r6;
    o[8] = r3.w;
    o[9] = (u32)(i32)(signed char)bytes[m * 4 + 1];
}

KERNEL void lds_atomics(global u32 *out, global const u32 *a, u32 n) {
    local u32 cnt[16];
    local u32 mx[16];
    local u32 mn[16];
    local u32 xo[16];
    local u32 cas;
    u32 l = LID(), i = GID();
    if (l < 16) {
        cnt[l] = 0;
        mx[l] = 0;
        mn[l] = 0xffffffffu;
        xo[l] = 0;
    }
    if (l == 0)
        cas = 0;
    BARRIER();
    u32 x = i < n ? a[i] : 0;
    u32 slot = x & 15;
    u32 old = __hip_atomic_fetch_add(&cnt[slot], 1u, __ATOMIC_RELAXED, SCOPE_WG);
    __hip_atomic_fetch_max(&mx[slot], x, __ATOMIC_RELAXED, SCOPE_WG);
    __hip_atomic_fetch_min(&mn[slot], x, __ATOMIC_RELAXED, SCOPE_WG);
    __hip_atomic_fetch_xor(&xo[slot], x, __ATOMIC_RELAXED, SCOPE_WG);
    u32 expected = l;
    // Work-items take turns: work-item k succeeds when cas == k.
    for (u32 tries = 0; tries < 512; tries++) {
        u32 e = expected;
        if (__hip_atomic_compare_exchange_strong(&cas, &e, l + 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED, SCOPE_WG))
            break;
    }
    BARRIER();
    if (i >= n)
        return;
    global u32 *o = out + 6 * i;
    o[0] = old < 256 ? 1 : 0;
    o[1] = cnt[slot];
    o[2] = mx[slot];
    o[3] = mn[slot];
    o[4] = xo[slot];
    o[5] = cas;
}

KERNEL void lds_cross_lane(global u32 *out, global const u32 *a, u32 n) {
    u32 l = LID(), i = GID();
    u32 x = i < n ? a[i] : 0;
    u32 lane = l & 63;
    // ds_swizzle: QDMode (quad permute) and BitMode (and/or/xor masks on the lane id).
    u32 s0 = (u32)__builtin_amdgcn_ds_swizzle((i32)x, 0x80 | (3 << 0) | (2 << 2) | (1 << 4) | (0 << 6) | 0x8000);
    u32 s1 = (u32)__builtin_amdgcn_ds_swizzle((i32)x, (0x1f) | (0 << 5) | (1 << 10));
    u32 s2 = (u32)__builtin_amdgcn_ds_swizzle((i32)x, (0x10) | (0x3 << 5) | (0 << 10));
    u32 p = (u32)__builtin_amdgcn_ds_permute((i32)(((lane * 5) & 63) * 4), (i32)x);
    u32 bp = (u32)__builtin_amdgcn_ds_bpermute((i32)(((lane + 17) & 63) * 4), (i32)x);
    if (i >= n)
        return;
    global u32 *o = out + 5 * i;
    o[0] = s0;
    o[1] = s1;
    o[2] = s2;
    o[3] = p;
    o[4] = bp;
}
