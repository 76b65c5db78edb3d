// Shared definitions of the cross-check kernels (OpenCL C 2.0, compiled by clang-19 for gfx942
// at -O2 with no device library: only clang builtins, so every instruction comes from LLVM's
// code generator). Every kernel runs with 256 work-items per workgroup (4 waves of 64).
typedef unsigned int u32;
typedef int i32;
typedef unsigned long u64;
typedef long i64;

#define KERNEL __kernel __attribute__((reqd_work_group_size(256, 1, 1)))
#define LID() __builtin_amdgcn_workitem_id_x()
#define WG() __builtin_amdgcn_workgroup_id_x()
#define GID() (WG() * 256u + LID())

// Memory scopes of the __hip_atomic builtins.
#define SCOPE_WG 3
#define SCOPE_AGENT 4

// A workgroup barrier with LDS visibility (what HIP's __syncthreads() is).
#define BARRIER()                                                                                  \
    do {                                                                                           \
        __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                                     \
        __builtin_amdgcn_s_barrier();                                                              \
        __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                                     \
    } while (0)

static inline float as_f(u32 x) { return __builtin_bit_cast(float, x); }
static inline u32 as_u(float x) { return __builtin_bit_cast(u32, x); }
static inline double as_d(u64 x) { return __builtin_bit_cast(double, x); }
static inline u64 as_u64(double x) { return __builtin_bit_cast(u64, x); }
