/* The few CUDA driver calls the examples' GPU path needs, opened at run time (dlopen), so the
 * examples compile and run their CPU path on machines without CUDA. The memory they allocate is in
 * the device's primary context, the one mhc (and PyTorch) use. */
#ifndef MHC_EXAMPLE_CUDA_DRIVER_H
#define MHC_EXAMPLE_CUDA_DRIVER_H

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef int cu_result;
typedef unsigned long long cu_deviceptr;

typedef struct cuda_driver {
  cu_result (*init)(unsigned int);
  cu_result (*device_get)(int *, int);
  cu_result (*primary_ctx_retain)(void **, int);
  cu_result (*ctx_set_current)(void *);
  cu_result (*mem_alloc)(cu_deviceptr *, size_t);
  cu_result (*mem_free)(cu_deviceptr);
  cu_result (*memcpy_htod)(cu_deviceptr, const void *, size_t);
  cu_result (*memcpy_dtoh)(void *, cu_deviceptr, size_t);
  cu_result (*stream_create)(void **, unsigned int);
  cu_result (*stream_synchronize)(void *);
  cu_result (*stream_destroy)(void *);
} cuda_driver;

/* Opens libcuda and binds the primary context of `ordinal` to this thread; 0 on success. */
static int cuda_driver_open(cuda_driver *d, int ordinal) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "libcuda.so.1: %s\n", dlerror());
    return 1;
  }
#define MHC_SYM(field, name)                                       \
  *(void **)(&d->field) = dlsym(lib, name);                        \
  if (!d->field) {                                                 \
    fprintf(stderr, "libcuda.so.1 has no %s\n", name);             \
    return 1;                                                      \
  }
  MHC_SYM(init, "cuInit")
  MHC_SYM(device_get, "cuDeviceGet")
  MHC_SYM(primary_ctx_retain, "cuDevicePrimaryCtxRetain")
  MHC_SYM(ctx_set_current, "cuCtxSetCurrent")
  MHC_SYM(mem_alloc, "cuMemAlloc_v2")
  MHC_SYM(mem_free, "cuMemFree_v2")
  MHC_SYM(memcpy_htod, "cuMemcpyHtoD_v2")
  MHC_SYM(memcpy_dtoh, "cuMemcpyDtoH_v2")
  MHC_SYM(stream_create, "cuStreamCreate")
  MHC_SYM(stream_synchronize, "cuStreamSynchronize")
  MHC_SYM(stream_destroy, "cuStreamDestroy_v2")
#undef MHC_SYM
  int dev = 0;
  void *ctx = NULL;
  if (d->init(0) || d->device_get(&dev, ordinal) || d->primary_ctx_retain(&ctx, dev) ||
      d->ctx_set_current(ctx)) {
    fprintf(stderr, "CUDA device %d: driver initialisation failed\n", ordinal);
    return 1;
  }
  return 0;
}

#endif
