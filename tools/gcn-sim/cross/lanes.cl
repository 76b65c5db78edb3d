// Cross-lane VALU: DPP (quad_perm, row shifts and rotates, row mirror, wave shifts, row
// broadcasts, with row/bank masks and bound_ctrl), readlane / readfirstlane,
// mbcnt, ballots, and a wave-wide reduction LLVM builds from DPP and SDWA.
#include "common.h"

#define DPP_OUTS 14
KERNEL void dpp(global u32 *out, global const u32 *a, u32 n) {
    u32 i = GID();
    u32 x = i < n ? a[i] : 0;
    u32 y = x * 3 + 1;
    global u32 *o = out + DPP_OUTS * i;
    u32 r[DPP_OUTS];
    r[0] = __builtin_amdgcn_mov_dpp(x, 0x1b, 0xf, 0xf, false);          // quad_perm:[3,2,1,0]
    r[1] = __builtin_amdgcn_mov_dpp(x, 0x111, 0xf, 0xf, true);          // row_shr:1 bound_ctrl
    r[2] = __builtin_amdgcn_update_dpp(y, x, 0x118, 0xf, 0xf, false);   // row_shr:8, old = y
    r[3] = __builtin_amdgcn_update_dpp(y, x, 0x125, 0xa, 0xf, false);   // row_ror:5, row_mask
    r[4] = __builtin_amdgcn_update_dpp(y, x, 0x130, 0xf, 0xf, false);   // wave_shl:1
    r[5] = __builtin_amdgcn_update_dpp(y, x, 0x138, 0xf, 0xf, false);   // wave_shr:1
    r[6] = __builtin_amdgcn_update_dpp(y, x, 0x134, 0xf, 0xf, false);   // wave_rol:1
    r[7] = __builtin_amdgcn_update_dpp(y, x, 0x13c, 0xf, 0xf, false);   // wave_ror:1
    r[8] = __builtin_amdgcn_update_dpp(y, x, 0x140, 0xf, 0x5, false);   // row_mirror, bank_mask
    r[9] = __builtin_amdgcn_update_dpp(y, x, 0x141, 0xf, 0xf, false);   // row_half_mirror
    r[10] = __builtin_amdgcn_update_dpp(y, x, 0x142, 0xa, 0xf, false);  // row_bcast:15
    r[11] = __builtin_amdgcn_update_dpp(y, x, 0x143, 0xc, 0xf, false);  // row_bcast:31
    r[12] = __builtin_amdgcn_update_dpp(0u, x, 0x101, 0xf, 0xf, true) + x; // row_shl:1 into an add
    r[13] = __builtin_amdgcn_update_dpp(y, x, 0x11f, 0xf, 0xf, false) ^ y; // row_shr:15
    if (i >= n)
        return;
    for (int k = 0; k < DPP_OUTS; k++)
        o[k] = r[k];
}

#define LANE_OUTS 10
KERNEL void lanes(global u32 *out, global const u32 *a, u32 n) {
    u32 i = GID();
    u32 x = i < n ? a[i] : 0;
    u32 lane = __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
    u32 first = __builtin_amdgcn_readfirstlane(x);
    u32 l5 = __builtin_amdgcn_readlane(x, 5);
    u32 sel = __builtin_amdgcn_readfirstlane(x & 63);
    u32 ls = __builtin_amdgcn_readlane(x, sel);
    u32 wl = __builtin_amdgcn_readlane(x ^ first, (x >> 7) & 63);
    ulong ball = __builtin_amdgcn_ballot_w64((x & 3) == 1);
    u32 below = __builtin_amdgcn_mbcnt_hi((u32)(ball >> 32), __builtin_amdgcn_mbcnt_lo((u32)ball, 0u));
    u32 odd = 0;
    if (x & 1) {
        // readfirstlane under a partial EXEC: the first active lane, not lane 0.
        odd = __builtin_amdgcn_readfirstlane(x);
    }
    if (i >= n)
        return;
    global u32 *o = out + LANE_OUTS * i;
    o[0] = lane;
    o[1] = first;
    o[2] = l5;
    o[3] = ls;
    o[4] = wl;
    o[5] = (u32)ball;
    o[6] = (u32)(ball >> 32);
    o[7] = below;
    o[8] = odd;
    o[9] = sel;
}

// Sum and max over each wave with the usual DPP / permute shuffle ladder.
KERNEL void wave_reduce(global u32 *out, global const u32 *a, u32 n) {
    u32 i = GID();
    u32 x = i < n ? a[i] : 0;
    u32 s = x, m = x;
    s += __builtin_amdgcn_update_dpp(0u, s, 0x111, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0u, s, 0x112, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0u, s, 0x114, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0u, s, 0x118, 0xf, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0u, s, 0x142, 0xa, 0xf, false);
    s += __builtin_amdgcn_update_dpp(0u, s, 0x143, 0xc, 0xf, false);
    for (u32 d = 1; d < 64; d <<= 1) {
        u32 other = (u32)__builtin_amdgcn_ds_bpermute((i32)(((LID() & 63) ^ d) * 4), (i32)m);
        m = other > m ? other : m;
    }
    // Read lane 63 while every lane is active (after the branch below it may not be).
    u32 total = __builtin_amdgcn_readlane(s, 63);
    if (i >= n)
        return;
    out[2 * i] = total;
    out[2 * i + 1] = m;
}

// Byte and half-word arithmetic LLVM selects SDWA forms for.
#define SDWA_OUTS 8
KERNEL void sdwa(global u32 *out, global const u32 *a, global const u32 *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i], y = b[i];
    uchar4 p = as_uchar4(x), q = as_uchar4(y);
    ushort2 h = as_ushort2(x), g = as_ushort2(y);
    global u32 *o = out + SDWA_OUTS * i;
    o[0] = as_uint(p + q);
    o[1] = as_uint(h * g);
    o[2] = as_uint(h - g);
    o[3] = (x >> 16) + (y & 0xffff);
    o[4] = ((x >> 24) * (y >> 8 & 0xff)) + (x & 0xff);
    o[5] = as_uint((ushort2)(h.y, g.x));
    o[6] = as_uint((uchar4)(p.w, q.z, p.y, q.x));
    o[7] = (u32)((short)h.y * (short)g.y);
}
