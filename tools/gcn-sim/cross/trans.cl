// Transcendentals and their helpers as LLVM emits them from the target builtins (no library):
// v_exp_f32, v_log_f32, v_rcp_f32, v_rsq_f32, v_sqrt_f32, v_sin_f32, v_cos_f32, and the
// correctly rounded sqrt sequence LLVM expands `sqrt` into.
#include "common.h"

#define TRANS_OUTS 8
KERNEL void trans(global u32 *out, global const float *a, u32 n) {
    u32 i = GID();
    if (i >= n)
        return;
    float x = a[i];
    global u32 *o = out + TRANS_OUTS * i;
    o[0] = as_u(__builtin_amdgcn_exp2f(x));
    o[1] = as_u(__builtin_amdgcn_logf(__builtin_fabsf(x)));
    o[2] = as_u(__builtin_amdgcn_rcpf(x));
    o[3] = as_u(__builtin_amdgcn_rsqf(__builtin_fabsf(x)));
    o[4] = as_u(__builtin_amdgcn_sqrtf(__builtin_fabsf(x)));
    o[5] = as_u(__builtin_amdgcn_sinf(x * 0.01f));
    o[6] = as_u(__builtin_amdgcn_cosf(x * 0.01f));
    o[7] = as_u(__builtin_sqrtf(__builtin_fabsf(x)));
}
