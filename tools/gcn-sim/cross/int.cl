// Integer ALU: 32-bit and 64-bit arithmetic, shifts, bit manipulation, comparisons and selects,
// 8/16-bit arithmetic (SDWA), integer division and remainder.
#include "common.h"

#define INT32_OUTS 40
KERNEL void int32_ops(global u32 *out, global const u32 *a, global const u32 *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i], y = b[i];
    i32 sx = (i32)x, sy = (i32)y;
    u32 s = y & 31;
    global u32 *o = out + INT32_OUTS * i;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = (u32)(((u64)x * y) >> 32);
    o[4] = (u32)(((i64)sx * sy) >> 32);
    o[5] = (x & 0xffffff) * (y & 0xffffff);
    o[6] = x << s;
    o[7] = x >> s;
    o[8] = (u32)(sx >> s);
    o[9] = (x & y) | (~x & 0x5a5a5a5a);
    o[10] = x ^ y ^ 0x12345678;
    o[11] = x < y ? x : y;
    o[12] = x > y ? x : y;
    o[13] = (u32)(sx < sy ? sx : sy);
    o[14] = (u32)(sx > sy ? sx : sy);
    o[15] = (x >> (s & 15)) & ((1u << (y >> 28)) - 1);
    o[16] = (u32)((i32)(x << (31 - (y & 15))) >> ((31 - (y & 15) + (x & 7)) & 31));
    o[17] = __builtin_popcount(x);
    o[18] = x ? __builtin_clz(x) : 32;
    o[19] = x ? __builtin_ctz(x) : 32;
    o[20] = __builtin_bitreverse32(x);
    o[21] = __builtin_rotateleft32(x, y);
    o[22] = sx < 0 ? 0u - x : x;
    o[23] = (x & 0xff00ff00) | (y & 0x00ff00ff);
    o[24] = ((x >> 8) & 0xff) + ((y >> 16) & 0xff) * 3;
    o[25] = (u32)(unsigned short)((u32)(unsigned short)x * (unsigned short)y + (unsigned short)(x >> 16));
    o[26] = (u32)(i32)(short)((short)(x >> 16) - (short)y);
    o[27] = (u32)(i32)(signed char)x + (u32)(unsigned char)(y >> 24);
    o[28] = (x << 5) + y;
    o[29] = (x + y) << 3;
    o[30] = x + y + (x >> 3);
    o[31] = (x << 4) | (y >> 28) | (x & 3);
    o[32] = __builtin_amdgcn_alignbit(x, y, s);
    o[33] = __builtin_amdgcn_perm(x, y, 0x0c050104u);
    o[34] = x < 1000u ? 7u : (sx < sy ? 11u : 13u);
    o[35] = (x == y) + (sx <= sy) * 2 + (x >= y) * 4 + (x != 0x80000000u) * 8;
    o[36] = x < y ? (x - y) * 3 : (x + y) / 7;
    o[37] = sx < -5 ? x * 9u : y * 5u + 1u;
    o[38] = (u32)__builtin_amdgcn_sbfe(sx, s & 15, (y >> 8) & 15);
    o[39] = (u32)((((x >> 4) & 0x3ff) * 5u) | (s << 27));
}

#define INT64_OUTS 20
KERNEL void int64_ops(global u64 *out, global const u64 *a, global const u64 *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u64 x = a[i], y = b[i];
    i64 sx = (i64)x, sy = (i64)y;
    u32 s = (u32)y & 63;
    global u64 *o = out + INT64_OUTS * i;
    o[0] = x + y;
    o[1] = x - y;
    o[2] = x * y;
    o[3] = x << s;
    o[4] = x >> s;
    o[5] = (u64)(sx >> s);
    o[6] = x < y ? x : y;
    o[7] = (u64)(sx > sy ? sx : sy);
    o[8] = (x & y) ^ (x | 0xf0f0f0f00f0f0f0ful);
    o[9] = (u64)(u32)x * (u32)y;
    o[10] = (u64)((i64)(i32)x * (i32)y);
    o[11] = x + (u64)(u32)y * 12345u;
    o[12] = (x == y) | ((u64)(sx < sy) << 1) | ((u64)(x <= y) << 2) | ((u64)(x != 0) << 3);
    o[13] = (u64)__builtin_popcountl(x) + ((u64)(x ? __builtin_clzl(x) : 64) << 8);
    o[14] = x * 0x9e3779b97f4a7c15ul;
    o[15] = (x >> 32) * (y >> 32) + (x << 17);
    o[16] = ~x + (u64)i;
    o[17] = 0ul - x;
    o[18] = x > 0xfffffffful ? x / 3u : x + 1;
    o[19] = ((x << 3) + (u64)i * 8u) >> 2;
}

#define DIV_OUTS 12
KERNEL void int_div(global u64 *out, global const u64 *a, global const u64 *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u64 x = a[i], y = b[i] | 1;
    u32 x32 = (u32)x, y32 = (u32)y;
    i32 sx32 = (i32)x32, sy32 = (i32)y32;
    i64 sx = (i64)x, sy = (i64)y;
    if (sy == -1)
        sy = 3;
    if (sy32 == -1)
        sy32 = 3;
    global u64 *o = out + DIV_OUTS * i;
    o[0] = x32 / y32;
    o[1] = x32 % y32;
    o[2] = (u64)(i64)(sx32 / sy32);
    o[3] = (u64)(i64)(sx32 % sy32);
    o[4] = x / y;
    o[5] = x % y;
    o[6] = (u64)(sx / sy);
    o[7] = (u64)(sx % sy);
    o[8] = x / (y >> 40 | 1);
    o[9] = x32 / 7u + x32 % 13u;
    o[10] = (u64)(i64)(sx32 / -9);
    o[11] = x / 1000003ul;
}

// Uniform (scalar) arithmetic, compares and loops on kernel arguments, mixed into per-item
// results.
#define SCALAR_OUTS 11
KERNEL void scalar_ops(global u32 *out, global const u32 *a, u32 k, u32 m, u64 big, u64 big2, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i], y = a[i + 1 < n ? i + 1 : i];
    u64 d = big - (u64)k * 3;
    u64 e = big - big2;
    u32 f = k ? __builtin_ctz(k) : 99;
    u32 c = (k < m) + ((k > m) << 1) + ((k <= m + 5) << 2) + ((k != m) << 3);
    if (k >= m)
        c += 16;
    u32 acc = 0;
    for (u32 j = 0; j < (m & 15); j++) {
        acc += 1000;
        acc ^= j;
    }
    global u32 *o = out + SCALAR_OUTS * i;
    o[0] = (u32)d;
    o[1] = (u32)(d >> 32);
    o[2] = f;
    o[3] = c;
    o[4] = (k + 1000) * x;
    o[5] = (x + y) << (y & 7);
    o[6] = x - k;
    o[7] = k - x;
    o[8] = (u32)e;
    o[9] = (u32)(e >> 32);
    o[10] = acc;
}
