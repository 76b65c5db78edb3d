// One decode step of an mHC layer through the mhc C ABI, the way an inference engine calls it:
//
//   pre       (layer l: residual x [T, n, C] -> layer input a, coefficients h_post, h_res)
//   sublayer  (a stand-in for attention / FFN: f = 0.5 a + 0.25 roll(a, 1))
//   post_pre  (the boundary: layer l's post into x', then layer l+1's pre on x')
//
//   decode_step [--backend cpu|cuda] [--tokens T] [--out FILE]
//
// cpu (default) runs the float64 reference on host memory; cuda runs the kernels on CUDA device 0
// on a stream of its own (device memory through the driver API; the stand-in sublayer runs on the
// host between the two ops). Inputs come from a fixed generator, so every run computes the same
// numbers; --out writes x', a', h_post', h_res', h_pre', inv_rms' of layer l+1 as little-endian
// f32 (the tests compare them with the same step run through the Rust API, bit for bit).
#include "mhc.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_driver.h"

namespace {

// Throws with the library's message when a call fails.
void check(mhc_status s, const char *what) {
  if (s != MHC_SUCCESS)
    throw std::runtime_error(std::string(what) + ": " + mhc_status_string(s) + ": " + mhc_last_error());
}

struct DeviceDeleter {
  void operator()(mhc_device *d) const { mhc_device_destroy(d); }
};
struct PlanDeleter {
  void operator()(mhc_plan *p) const { mhc_plan_destroy(p); }
};
struct WorkspaceDeleter {
  void operator()(mhc_workspace *w) const { mhc_workspace_destroy(w); }
};
using Device = std::unique_ptr<mhc_device, DeviceDeleter>;
using Plan = std::unique_ptr<mhc_plan, PlanDeleter>;
using Workspace = std::unique_ptr<mhc_workspace, WorkspaceDeleter>;

// The generator the tests replicate: values in [-1, 1).
struct Lcg {
  uint64_t state;
  float next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((state >> 40) & 0xFFFFFF) / static_cast<float>(0x800000) - 1.0f;
  }
  std::vector<float> fill(size_t len, float scale, float offset) {
    std::vector<float> v(len);
    for (auto &e : v) e = offset + scale * next();
    return v;
  }
};

// Host copies of one buffer and, on CUDA, its device twin.
struct Buffer {
  std::vector<float> host;
  cu_deviceptr dev = 0;
};

struct Memory {
  bool cuda = false;
  cuda_driver cu{};
  std::vector<cu_deviceptr> owned;

  void *ptr(Buffer &b) { return cuda ? reinterpret_cast<void *>(static_cast<uintptr_t>(b.dev)) : b.host.data(); }
  void place(Buffer &b) {
    if (!cuda) return;
    if (cu.mem_alloc(&b.dev, b.host.size() * 4) || cu.memcpy_htod(b.dev, b.host.data(), b.host.size() * 4))
      throw std::runtime_error("cuMemAlloc / cuMemcpyHtoD failed");
    owned.push_back(b.dev);
  }
  void fetch(Buffer &b) {
    if (cuda && cu.memcpy_dtoh(b.host.data(), b.dev, b.host.size() * 4)) throw std::runtime_error("cuMemcpyDtoH failed");
  }
  void upload(Buffer &b) {
    if (cuda && cu.memcpy_htod(b.dev, b.host.data(), b.host.size() * 4)) throw std::runtime_error("cuMemcpyHtoD failed");
  }
  ~Memory() {
    for (auto p : owned) cu.mem_free(p);
  }
};

struct LayerParams {
  Buffer phi, scale, base;
};

mhc_pre_params views(Memory &m, LayerParams &p, int64_t big_m, int64_t k) {
  mhc_pre_params v;
  v.phi = mhc_tensor_dense(m.ptr(p.phi), MHC_DTYPE_F32, big_m, k);
  v.scale = mhc_tensor_dense(m.ptr(p.scale), MHC_DTYPE_F32, 1, 3);
  v.base = mhc_tensor_dense(m.ptr(p.base), MHC_DTYPE_F32, 1, big_m);
  v.gamma_k = mhc_tensor_none();
  v.gamma_f = mhc_tensor_none();
  return v;
}

struct PreOut {
  Buffer a, h_pre, h_post, h_res, inv_rms;
};

mhc_pre_outputs views(Memory &m, PreOut &o, int64_t t, int64_t n, int64_t c) {
  mhc_pre_outputs v;
  v.a = mhc_tensor_dense(m.ptr(o.a), MHC_DTYPE_F32, t, c);
  v.y = mhc_tensor_none();
  v.h_pre = mhc_tensor_dense(m.ptr(o.h_pre), MHC_DTYPE_F32, t, n);
  v.h_post = mhc_tensor_dense(m.ptr(o.h_post), MHC_DTYPE_F32, t, n);
  v.h_res = mhc_tensor_dense(m.ptr(o.h_res), MHC_DTYPE_F32, t, n * n);
  v.inv_rms = mhc_tensor_dense(m.ptr(o.inv_rms), MHC_DTYPE_F32, t, 1);
  return v;
}

double checksum(const std::vector<float> &v) {
  double s = 0.0;
  for (float e : v) s += e;
  return s;
}

}  // namespace

int main(int argc, char **argv) {
  std::string backend = "cpu", out_path;
  int64_t t = 4;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (a == "--tokens" && i + 1 < argc) t = std::stoll(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out_path = argv[++i];
    else {
      std::fprintf(stderr, "usage: decode_step [--backend cpu|cuda] [--tokens T] [--out FILE]\n");
      return 2;
    }
  }
  try {
    const int64_t n = 4, c = 512, k = n * c, big_m = n * n + 2 * n;
    const bool cuda = backend == "cuda";
    if (!cuda && backend != "cpu") throw std::runtime_error("backend must be cpu or cuda");

    mhc_device *raw_dev = nullptr;
    check(mhc_device_create(cuda ? MHC_BACKEND_CUDA : MHC_BACKEND_CPU, 0, &raw_dev), "mhc_device_create");
    Device dev(raw_dev);
    mhc_config cfg;
    check(mhc_config_init(&cfg, n, c), "mhc_config_init");
    mhc_plan *raw_plan = nullptr;
    check(mhc_plan_create(dev.get(), &cfg, MHC_DTYPE_F32, 64, &raw_plan), "mhc_plan_create");
    Plan plan(raw_plan);

    Memory mem;
    mem.cuda = cuda;
    void *stream = nullptr;
    if (cuda) {
      if (cuda_driver_open(&mem.cu, 0) || mem.cu.stream_create(&stream, 1)) throw std::runtime_error("CUDA set-up failed");
    }
    // One workspace per (plan, stream), made before the step (never inside a graph capture).
    mhc_workspace *raw_ws = nullptr;
    check(mhc_workspace_create(plan.get(), &raw_ws), "mhc_workspace_create");
    Workspace ws(raw_ws);

    Lcg rng{2024};
    Buffer x{rng.fill(t * k, 1.0f, 0.0f), 0};
    LayerParams layer[2];
    for (auto &p : layer) {
      p.phi.host = rng.fill(big_m * k, 0.03f, 0.0f);
      p.scale.host = rng.fill(3, 0.45f, 0.55f);
      p.base.host = rng.fill(big_m, 0.1f, 0.0f);
    }
    auto zeros = [](int64_t len) { return Buffer{std::vector<float>(len), 0}; };
    PreOut o0{zeros(t * c), zeros(t * n), zeros(t * n), zeros(t * n * n), zeros(t)};
    PreOut o1 = o0;
    Buffer f = zeros(t * c), x1 = zeros(t * k);
    for (Buffer *b : {&x, &layer[0].phi, &layer[0].scale, &layer[0].base, &layer[1].phi, &layer[1].scale,
                      &layer[1].base, &o0.a, &o0.h_pre, &o0.h_post, &o0.h_res, &o0.inv_rms, &o1.a, &o1.h_pre,
                      &o1.h_post, &o1.h_res, &o1.inv_rms, &f, &x1})
      mem.place(*b);

    // Layer l: pre.
    mhc_tensor tx = mhc_tensor_dense(mem.ptr(x), MHC_DTYPE_F32, t, k);
    mhc_pre_params p0 = views(mem, layer[0], big_m, k), p1 = views(mem, layer[1], big_m, k);
    mhc_pre_outputs v0 = views(mem, o0, t, n, c), v1 = views(mem, o1, t, n, c);
    check(mhc_pre(plan.get(), ws.get(), stream, &tx, &p0, &v0), "mhc_pre");

    // The stand-in sublayer (on the host: the example has no GPU kernel of its own).
    if (cuda && mem.cu.stream_synchronize(stream)) throw std::runtime_error("stream failed");
    mem.fetch(o0.a);
    for (int64_t ti = 0; ti < t; ti++)
      for (int64_t ci = 0; ci < c; ci++)
        f.host[ti * c + ci] = 0.5f * o0.a.host[ti * c + ci] + 0.25f * o0.a.host[ti * c + (ci + 1) % c];
    mem.upload(f);

    // The boundary: layer l's post, then layer l+1's pre.
    mhc_post_inputs post;
    post.f = mhc_tensor_dense(mem.ptr(f), MHC_DTYPE_F32, t, c);
    post.h_post = v0.h_post;
    post.h_res = v0.h_res;
    mhc_tensor tx1 = mhc_tensor_dense(mem.ptr(x1), MHC_DTYPE_F32, t, k);
    check(mhc_post_pre(plan.get(), ws.get(), stream, &tx, &post, &tx1, &p1, &v1), "mhc_post_pre");
    if (cuda && mem.cu.stream_synchronize(stream)) throw std::runtime_error("stream failed");

    Buffer *results[] = {&x1, &o1.a, &o1.h_post, &o1.h_res, &o1.h_pre, &o1.inv_rms};
    const char *names[] = {"x'", "a'", "h_post'", "h_res'", "h_pre'", "inv_rms'"};
    for (int i = 0; i < 6; i++) {
      mem.fetch(*results[i]);
      std::printf("%-9s checksum %.6f\n", names[i], checksum(results[i]->host));
    }
    // Each token's h_res' columns sum to 1 (the Sinkhorn projection of DeepSeek-V4).
    for (int64_t ti = 0; ti < t; ti++)
      for (int64_t j = 0; j < n; j++) {
        double s = 0.0;
        for (int64_t i = 0; i < n; i++) s += o1.h_res.host[ti * n * n + i * n + j];
        if (s < 1.0 - 1e-4 || s > 1.0 + 1e-4) throw std::runtime_error("h_res' is not column-stochastic");
      }
    if (!out_path.empty()) {
      FILE *fp = std::fopen(out_path.c_str(), "wb");
      if (!fp) throw std::runtime_error("cannot write " + out_path);
      for (Buffer *b : results) std::fwrite(b->host.data(), 4, b->host.size(), fp);
      std::fclose(fp);
    }
    if (cuda) mem.cu.stream_destroy(stream);
    std::printf("decode step on %s: T = %lld, n = %lld, C = %lld: ok\n", backend.c_str(), (long long)t,
                (long long)n, (long long)c);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "decode_step: %s\n", e.what());
    return 1;
  }
}
