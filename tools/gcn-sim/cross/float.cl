// Float ALU (f32 and f64): arithmetic, fused multiply-add, min/max, rounding, conversions,
// compares with source modifiers (|x|, -x), classification and selects. Compiled with
// -ffp-contract=off so that every result is a correctly rounded IEEE operation.
#include "common.h"

#define F32_OUTS 36
KERNEL void f32_ops(global u32 *out, global const float *a, global const float *b, global const float *c,
                    u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    float x = a[i], y = b[i], z = c[i];
    global u32 *o = out + F32_OUTS * i;
    o[0] = as_u(x + y);
    o[1] = as_u(x - y);
    o[2] = as_u(x * y);
    o[3] = as_u(__builtin_fmaf(x, y, z));
    o[4] = as_u(__builtin_fmaf(-x, y, 2.0f));
    o[5] = as_u(__builtin_fminf(x, y));
    o[6] = as_u(__builtin_fmaxf(x, z));
    o[7] = as_u(__builtin_fabsf(x) * 3.0f);
    o[8] = as_u(-__builtin_fabsf(y) + x);
    o[9] = as_u(__builtin_floorf(x));
    o[10] = as_u(__builtin_ceilf(y));
    o[11] = as_u(__builtin_truncf(z));
    o[12] = as_u(__builtin_rintf(x));
    o[13] = as_u(__builtin_copysignf(x, y));
    o[14] = (u32)(i32)x;
    o[15] = (u32)__builtin_fabsf(y);
    o[16] = as_u((float)(i32)as_u(z));
    o[17] = as_u((float)as_u(z));
    o[18] = as_u(__builtin_ldexpf(x, (i32)(as_u(y) & 15) - 8));
    o[19] = as_u(x * 0.5f + 1.0f);
    o[20] = as_u(__builtin_fabsf(x) < 4.0f ? 1.0f : 2.0f);
    o[21] = (__builtin_fabsf(x) < __builtin_fabsf(y)) | ((-x > z) << 1) | ((x <= y) << 2) |
            ((x == z) << 3) | ((x != y) << 4) | ((x >= -__builtin_fabsf(z)) << 5);
    o[22] = (__builtin_isnan(x) != 0) | ((__builtin_isinf(y) != 0) << 1) | ((__builtin_isfinite(z) != 0) << 2) |
            ((__builtin_isnormal(x) != 0) << 3) | ((as_u(y) >> 31) << 4);
    o[23] = as_u(x < y ? z : x * 2.0f);
    o[24] = as_u(__builtin_fmaf(__builtin_fabsf(x), -y, __builtin_fabsf(z)));
    o[25] = as_u(__builtin_fmaxf(__builtin_fminf(x, 1.0f), -1.0f));
    o[26] = as_u(x * y - z);
    o[27] = as_u(__builtin_amdgcn_fmed3f(x, y, z));
    o[28] = as_u(__builtin_fmaxf(__builtin_fmaxf(x, y), z));
    o[29] = as_u(__builtin_fminf(__builtin_fminf(x, y), z));
    o[30] = as_u((float)(unsigned char)as_u(y) + (float)(unsigned char)(as_u(y) >> 16));
    o[31] = (u32)(x > 0.0f && x < 1e9f ? (u32)x : 0u);
    o[32] = as_u(__builtin_amdgcn_fractf(x));
    o[33] = as_u(__builtin_amdgcn_frexp_mantf(y));
    o[34] = (u32)__builtin_amdgcn_frexp_expf(y);
    o[35] = (u32)(__builtin_isless(x, y) | (__builtin_isunordered(x, z) << 1));
}

#define F64_OUTS 14
KERNEL void f64_ops(global u64 *out, global const double *a, global const double *b,
                    global const float *c, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    double x = a[i], y = b[i];
    float z = c[i];
    global u64 *o = out + F64_OUTS * i;
    o[0] = as_u64(x + y);
    o[1] = as_u64(x - y);
    o[2] = as_u64(x * y);
    o[3] = as_u64(__builtin_fma(x, y, (double)z));
    o[4] = as_u64(__builtin_fmin(x, y));
    o[5] = as_u64(__builtin_fmax(__builtin_fabs(x), y));
    o[6] = as_u64((double)z);
    o[7] = (u64)as_u((float)x);
    o[8] = (u64)(i64)(i32)y;
    o[9] = as_u64((double)(i32)as_u(z));
    o[10] = as_u64(__builtin_floor(x) + __builtin_trunc(y));
    o[11] = (x < y) | ((__builtin_fabs(x) > 2.0) << 1) | ((x == y) << 2);
    o[12] = as_u64(__builtin_ldexp(x, 3));
    o[13] = as_u64((double)(u32)as_u(z));
}
