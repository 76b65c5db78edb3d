// Float division and square root. Compiled twice: with -cl-fp32-correctly-rounded-divide-sqrt
// (the v_div_scale / v_div_fmas / v_div_fixup sequence; exact) and without it (OpenCL's 2.5 ulp
// division from v_rcp_f32), and once more with -cl-denorms-are-zero (descriptor denorm mode 0,
// the division switching denormals on around its core with s_denorm_mode / s_setreg).
#include "common.h"

#define FDIV_OUTS 5
KERNEL void fdiv(global u32 *out, global const float *a, global const float *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    float x = a[i], y = b[i];
    global u32 *o = out + FDIV_OUTS * i;
    o[0] = as_u(x / y);
    o[1] = as_u(1.0f / y);
    o[2] = as_u(__builtin_sqrtf(__builtin_fabsf(x)));
    o[3] = as_u(x * y);
    o[4] = as_u((x + y) / (x - y));
}

#define DDIV_OUTS 2
KERNEL void ddiv(global u64 *out, global const double *a, global const double *b, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    double x = a[i], y = b[i];
    out[DDIV_OUTS * i] = as_u64(x / y);
    out[DDIV_OUTS * i + 1] = as_u64(__builtin_sqrt(__builtin_fabs(x)));
}
