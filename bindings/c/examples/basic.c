/* The mhc C ABI on one op and its error path.
 *
 *   basic                   the CPU reference backend (host memory)
 *   basic --cuda            CUDA device 0 (device memory through the driver API, the caller's stream)
 *   basic [--cuda] --bench N   also times N back-to-back mhc_post calls: the host time per call
 *                           (on CUDA the enqueue cost of the ABI; the GPU runs behind)
 *
 * Runs `post` (x' = h_post * f + h_res-mix of x) for T tokens of n = 4 streams of C = 64, prints a
 * checksum of x', then shows the checks: a wrong shape is MHC_ERROR_SHAPE with a message. */
#define _POSIX_C_SOURCE 200809L
#include "mhc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_driver.h"

#define CHECK(call)                                                                     \
  do {                                                                                  \
    mhc_status s_ = (call);                                                             \
    if (s_ != MHC_SUCCESS) {                                                            \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mhc_status_string(s_), mhc_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

/* Deterministic inputs in [-1, 1). */
static float next_value(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((*state >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

int main(int argc, char **argv) {
  int use_cuda = 0;
  long bench = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--cuda") == 0) {
      use_cuda = 1;
    } else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc) {
      bench = strtol(argv[++i], NULL, 10);
    } else {
      fprintf(stderr, "usage: basic [--cuda] [--bench N]\n");
      return 2;
    }
  }
  if (mhc_abi_version() != MHC_ABI_VERSION) {
    fprintf(stderr, "header ABI %d, library ABI %u\n", MHC_ABI_VERSION, mhc_abi_version());
    return 1;
  }
  printf("mhc %s (ABI %u)\n", mhc_version(), mhc_abi_version());

  const int64_t t = 3, n = 4, c = 64;
  size_t nx = (size_t)(t * n * c), nf = (size_t)(t * c), nhp = (size_t)(t * n), nhr = (size_t)(t * n * n);
  float *x = malloc(nx * sizeof(float)), *f = malloc(nf * sizeof(float));
  float *hp = malloc(nhp * sizeof(float)), *hr = malloc(nhr * sizeof(float)), *out = malloc(nx * sizeof(float));
  uint64_t seed = 42;
  for (size_t i = 0; i < nx; i++) x[i] = next_value(&seed);
  for (size_t i = 0; i < nf; i++) f[i] = next_value(&seed);
  for (size_t i = 0; i < nhp; i++) hp[i] = 1.0f + 0.5f * next_value(&seed);
  for (size_t i = 0; i < nhr; i++) hr[i] = 0.25f + 0.1f * next_value(&seed);

  mhc_device *dev = NULL;
  CHECK(mhc_device_create(use_cuda ? MHC_BACKEND_CUDA : MHC_BACKEND_CPU, 0, &dev));
  char name[256];
  CHECK(mhc_device_describe(dev, name, sizeof name));
  printf("device: %s\n", name);

  mhc_config cfg;
  CHECK(mhc_config_init(&cfg, (uint32_t)n, (uint32_t)c));
  mhc_plan *plan = NULL;
  CHECK(mhc_plan_create(dev, &cfg, MHC_DTYPE_F32, 64, &plan));
  CHECK(mhc_plan_supports(plan, MHC_STAGE_POST));

  /* Where the op reads and writes: host memory on the CPU, device memory on CUDA. */
  void *dx = x, *df = f, *dhp = hp, *dhr = hr, *dout = out, *stream = NULL;
  cuda_driver cu;
  memset(&cu, 0, sizeof cu);
  cu_deviceptr gx = 0, gf = 0, ghp = 0, ghr = 0, gout = 0;
  if (use_cuda) {
    if (cuda_driver_open(&cu, 0)) return 1;
    if (cu.mem_alloc(&gx, nx * 4) || cu.mem_alloc(&gf, nf * 4) || cu.mem_alloc(&ghp, nhp * 4) ||
        cu.mem_alloc(&ghr, nhr * 4) || cu.mem_alloc(&gout, nx * 4) || cu.memcpy_htod(gx, x, nx * 4) ||
        cu.memcpy_htod(gf, f, nf * 4) || cu.memcpy_htod(ghp, hp, nhp * 4) || cu.memcpy_htod(ghr, hr, nhr * 4) ||
        cu.stream_create(&stream, 1 /* non-blocking */)) {
      fprintf(stderr, "CUDA allocation failed\n");
      return 1;
    }
    dx = (void *)(uintptr_t)gx, df = (void *)(uintptr_t)gf, dhp = (void *)(uintptr_t)ghp;
    dhr = (void *)(uintptr_t)ghr, dout = (void *)(uintptr_t)gout;
  }

  mhc_tensor tx = mhc_tensor_dense(dx, MHC_DTYPE_F32, t, n * c);
  mhc_tensor tf = mhc_tensor_dense(df, MHC_DTYPE_F32, t, c);
  mhc_tensor thp = mhc_tensor_dense(dhp, MHC_DTYPE_F32, t, n);
  mhc_tensor thr = mhc_tensor_dense(dhr, MHC_DTYPE_F32, t, n * n);
  mhc_tensor tout = mhc_tensor_dense(dout, MHC_DTYPE_F32, t, n * c);
  CHECK(mhc_post(plan, stream, &tx, &tf, &thp, &thr, &tout));
  if (use_cuda) {
    if (cu.stream_synchronize(stream) || cu.memcpy_dtoh(out, gout, nx * 4)) return 1;
  }

  /* The same token by hand (DeepSeek-V4: h_res applied transposed). */
  double worst = 0.0, sum = 0.0;
  for (int64_t ti = 0; ti < t; ti++)
    for (int64_t k = 0; k < n; k++)
      for (int64_t ci = 0; ci < c; ci++) {
        double want = (double)hp[ti * n + k] * f[ti * c + ci];
        for (int64_t j = 0; j < n; j++) want += (double)hr[ti * n * n + j * n + k] * x[(ti * n + j) * c + ci];
        double got = out[(ti * n + k) * c + ci];
        double err = got > want ? got - want : want - got;
        if (err > worst) worst = err;
        sum += got;
      }
  printf("post: checksum %.6f, max |error| %.3g\n", sum, worst);
  if (worst > 1e-5) {
    fprintf(stderr, "post differs from the formula\n");
    return 1;
  }

  /* A wrong shape is reported, nothing is written. */
  mhc_tensor short_f = mhc_tensor_dense(df, MHC_DTYPE_F32, t, c - 8);
  mhc_status s = mhc_post(plan, stream, &tx, &short_f, &thp, &thr, &tout);
  printf("wrong f: %s: %s\n", mhc_status_string(s), mhc_last_error());
  if (s != MHC_ERROR_SHAPE) return 1;
  s = mhc_post(NULL, stream, &tx, &tf, &thp, &thr, &tout);
  printf("no plan: %s: %s\n", mhc_status_string(s), mhc_last_error());
  if (s != MHC_ERROR_INVALID_ARGUMENT) return 1;

  if (bench > 0) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < bench; i++) CHECK(mhc_post(plan, stream, &tx, &tf, &thp, &thr, &tout));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)bench;
    if (use_cuda && cu.stream_synchronize(stream)) return 1;
    printf("host time per mhc_post call (%s, T = %lld): %.0f ns over %ld calls\n", use_cuda ? "CUDA enqueue" : "CPU reference",
           (long long)t, ns, bench);
  }

  if (use_cuda) {
    cu.mem_free(gx), cu.mem_free(gf), cu.mem_free(ghp), cu.mem_free(ghr), cu.mem_free(gout);
    cu.stream_destroy(stream);
  }
  mhc_plan_destroy(plan);
  mhc_device_destroy(dev);
  free(x), free(f), free(hp), free(hr), free(out);
  printf("ok\n");
  return 0;
}
