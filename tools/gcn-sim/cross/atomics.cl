// Global atomics at agent scope: 32- and 64-bit add/sub/min/max/and/or/xor/exchange/inc/dec,
// compare-and-swap, f32 add (compiled with -munsafe-fp-atomics so it is the hardware
// instruction), with and without returning the old value.
#include "common.h"

KERNEL void atomics32(global u32 *ctr, global u32 *ret, global const u32 *a, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u32 x = a[i];
    u32 slot = x & 7;
    ret[2 * i] = __hip_atomic_fetch_add(&ctr[slot], 1u, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_add(&ctr[8], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_sub(&ctr[9], x >> 4, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_max(&ctr[10], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_min(&ctr[11], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_max((global i32 *)&ctr[12], (i32)x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_min((global i32 *)&ctr[13], (i32)x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_and(&ctr[14], x | (1u << (i & 31)), __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_or(&ctr[15], x & (1u << (i & 31)), __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_xor(&ctr[16], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_add((global float *)&ctr[17], (float)(x & 255), __ATOMIC_RELAXED, SCOPE_AGENT);
    // Exchanges: the values returned plus the final one are the initial value and every x.
    u32 got = __hip_atomic_exchange(&ctr[19 + (i & 3)], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    ret[2 * i + 1] = got;
    __atomic_fetch_add(&ctr[23], 1u, __ATOMIC_RELAXED);
    u32 old = __hip_atomic_load(&ctr[24], __ATOMIC_RELAXED, SCOPE_AGENT);
    for (u32 t = 0; t < 1024; t++) {
        u32 want = old + (x & 15);
        if (__hip_atomic_compare_exchange_strong(&ctr[24], &old, want, __ATOMIC_RELAXED, __ATOMIC_RELAXED,
                                                 SCOPE_AGENT))
            break;
    }
    __builtin_amdgcn_atomic_inc32(&ctr[25], 0xffffffffu, __ATOMIC_RELAXED, "agent");
    __builtin_amdgcn_atomic_dec32(&ctr[26], 0xffffffffu, __ATOMIC_RELAXED, "agent");
}

KERNEL void atomics64(global u64 *ctr, global u64 *ret, global const u64 *a, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    u64 x = a[i];
    ret[i] = __hip_atomic_fetch_add(&ctr[x & 3], 1ul, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_add(&ctr[4], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_max(&ctr[5], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_min((global i64 *)&ctr[6], (i64)x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_xor(&ctr[7], x, __ATOMIC_RELAXED, SCOPE_AGENT);
    __hip_atomic_fetch_or(&ctr[8], x & (1ul << (i & 63)), __ATOMIC_RELAXED, SCOPE_AGENT);
    u64 old = __hip_atomic_load(&ctr[9], __ATOMIC_RELAXED, SCOPE_AGENT);
    for (u32 t = 0; t < 1024; t++) {
        if (__hip_atomic_compare_exchange_strong(&ctr[9], &old, old + (x >> 60), __ATOMIC_RELAXED,
                                                 __ATOMIC_RELAXED, SCOPE_AGENT))
            break;
    }
}

// Split reduction: every workgroup sums its slice and publishes it (release), the counter's
// atomic increment tells the last workgroup to arrive (acquire), which adds the partials in
// workgroup order. Correct in every dispatch order only with the release / acquire pairs.
KERNEL void split_sum(global u32 *partial, global u32 *counter, global u32 *result,
                      global const u32 *a, u32 n) {
    local u32 sums[256];
    local u32 last;
    u32 l = LID(), g = WG(), groups = __builtin_amdgcn_grid_size_x() / 256;
    u32 i = GID();
    sums[l] = i < n ? a[i] * (i + 1) : 0;
    BARRIER();
    for (u32 s = 128; s > 0; s >>= 1) {
        if (l < s)
            sums[l] += sums[l + s];
        BARRIER();
    }
    if (l == 0) {
        partial[g] = sums[0];
        u32 old = __hip_atomic_fetch_add(counter, 1u, __ATOMIC_ACQ_REL, SCOPE_AGENT);
        last = old == groups - 1;
    }
    BARRIER();
    if (last) {
        // Eight work-items gather the partials (a loop long enough to be unrolled).
        u32 total = 0;
        if (l < 8)
            for (u32 k = l; k < groups; k += 8)
                total += partial[k] * (k + 1);
        sums[l] = total;
        BARRIER();
        if (l == 0) {
            u32 t = 0;
            for (u32 k = 0; k < 256; k++)
                t += sums[k];
            *result = t;
            *counter = 0;
        }
    }
}
