// Control flow: divergent branches and loops (EXEC-mask save / restore, s_cbranch_execz /
// execnz / vccz / scc), nested conditions, a switch, uniform loops on SGPRs, early exits.
#include "common.h"

KERNEL void divergent(global u32 *out, global const u32 *a, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i];
    u32 acc = x;
    // A loop whose trip count differs per lane, with a data-dependent break.
    for (u32 j = 0; j < (x & 31); j++) {
        acc = acc * 3 + j;
        if ((acc & 0xff) == 0x5a)
            break;
    }
    // Nested if / else.
    u32 r;
    if (x & 1) {
        if (x & 2)
            r = acc ^ 0xdeadbeef;
        else
            r = acc + 17;
    } else if ((x >> 8) % 3 == 0) {
        r = acc * acc;
    } else {
        r = ~acc;
    }
    // A switch on the lane's data.
    switch ((x >> 4) & 7) {
    case 0:
        r += 1;
        break;
    case 1:
        r ^= 2;
        break;
    case 3:
        r *= 5;
        break;
    case 6:
        r = r >> 3;
        break;
    default:
        r -= 7;
    }
    out[2 * i] = r;
    // A while loop with a uniform (scalar) bound and a divergent early exit.
    u32 k = 0, v = x;
    while (k < n / 256 + 3) {
        v = (v >> 1) ^ (-(v & 1) & 0xedb88320u);
        if (v < 0x1000000)
            break;
        k++;
    }
    out[2 * i + 1] = v + k;
}

// A uniform loop nest on scalar values (SALU arithmetic, s_cmp / s_cbranch_scc).
KERNEL void uniform(global u32 *out, u32 m, u32 seed, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 h = seed;
    for (u32 a = 0; a < m; a++) {
        for (u32 b = a; b < m; b += 3)
            h = (h ^ (a * 7 + b)) * 0x01000193u;
        if (h & 0x10)
            h += a;
        else
            h = (h << 3) | (h >> 29);
    }
    out[i] = h + i * (m | 1);
}
