//! The C and C++ examples, compiled with the machine's gcc / g++ against the header and the
//! library this build made (the C one against libmhc_c.so, the C++ one against libmhc_c.a), and
//! run on the CPU reference backend; the C++ decode step's outputs equal, bit for bit, the same
//! step run through the Rust API. The CUDA variant (ignored here) does the same on a GPU.

use mhc_c::api::{self, Device, Plan};
use mhc_c::*;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>, the parent of this test's `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    exe.parent().and_then(Path::parent).expect("target/<profile>/deps/<test>").to_path_buf()
}

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A scratch folder for this test's binaries and outputs.
fn scratch(name: &str) -> PathBuf {
    let d = profile_dir().join("mhc-c-examples").join(name);
    std::fs::create_dir_all(&d).expect("scratch folder");
    d
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// libmhc_c.{so,a}: `cargo test` leaves the library's artefacts in target/<profile>/deps/, and
/// `cargo build` copies them up to target/<profile>/; either is the library this build made.
fn library(kind: &str) -> PathBuf {
    let name = format!("libmhc_c.{kind}");
    let dir = profile_dir();
    let candidates = [dir.join("deps").join(&name), dir.join(&name)];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .unwrap_or_else(|| panic!("{name} is in neither {} nor {}", candidates[0].display(), candidates[1].display()))
}

/// The C++ decode step, built from examples/decode_step.cpp against the static library (or
/// taken from `MHC_DECODE_STEP`, a binary built elsewhere, on a machine without a compiler).
fn decode_step_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MHC_DECODE_STEP") {
        return PathBuf::from(p);
    }
    let dir = scratch("cpp");
    let bin = dir.join("decode_step");
    let c = crate_dir();
    run(Command::new("g++")
        .args(["-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-I"])
        .arg(c.join("include"))
        .arg(c.join("examples/decode_step.cpp"))
        .arg(library("a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&bin));
    bin
}

#[test]
fn c_example_compiles_and_runs_on_the_cpu_reference() {
    let dir = scratch("c");
    let bin = dir.join("basic");
    let c = crate_dir();
    let so = library("so");
    run(Command::new("gcc")
        .args(["-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(c.join("include"))
        .arg(c.join("examples/basic.c"))
        .arg(format!("-L{}", so.parent().unwrap().display()))
        .args(["-lmhc_c", "-ldl"])
        .arg(format!("-Wl,-rpath,{}", so.parent().unwrap().display()))
        .arg("-o")
        .arg(&bin));
    let out = run(&mut Command::new(&bin));
    assert!(out.contains("device: cpu:0"), "{out}");
    assert!(out.contains("wrong f: MHC_ERROR_SHAPE"), "{out}");
    assert!(out.contains("no plan: MHC_ERROR_INVALID_ARGUMENT"), "{out}");
    assert!(out.trim_end().ends_with("ok"), "{out}");
}

#[test]
fn the_header_compiles_as_cpp_too() {
    let dir = scratch("cpp-header");
    let src = dir.join("include_only.cpp");
    std::fs::write(&src, "#include \"mhc.h\"\nint main() { return mhc_abi_version() == MHC_ABI_VERSION ? 0 : 1; }\n")
        .unwrap();
    let bin = dir.join("include_only");
    run(Command::new("g++")
        .args(["-std=c++11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(crate_dir().join("include"))
        .arg(&src)
        .arg(library("a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&bin));
    run(&mut Command::new(&bin));
}

/// The example's generator.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) & 0xFF_FFFF) as f32 / 0x80_0000 as f32 - 1.0
    }
    fn fill(&mut self, len: usize, scale: f32, offset: f32) -> Vec<f32> {
        (0..len).map(|_| offset + scale * self.next()).collect()
    }
}

/// The steps of examples/decode_step.cpp through the Rust API on `backend`; the bytes it writes.
/// `mem` moves host vectors to the backend's memory and back.
trait Memory {
    fn place(&mut self, v: &mut Vec<f32>) -> *mut c_void;
    fn fetch(&mut self, p: *mut c_void, v: &mut [f32]);
    fn upload(&mut self, p: *mut c_void, v: &[f32]);
    fn stream(&self) -> *mut c_void;
    fn sync(&mut self);
}

struct Host;

impl Memory for Host {
    fn place(&mut self, v: &mut Vec<f32>) -> *mut c_void {
        v.as_mut_ptr() as *mut c_void
    }
    fn fetch(&mut self, _: *mut c_void, _: &mut [f32]) {}
    fn upload(&mut self, p: *mut c_void, v: &[f32]) {
        if p as *const f32 != v.as_ptr() {
            // SAFETY: `p` is the start of another host vector of v.len() elements placed by `place`.
            unsafe { std::ptr::copy(v.as_ptr(), p as *mut f32, v.len()) }
        }
    }
    fn stream(&self) -> *mut c_void {
        std::ptr::null_mut()
    }
    fn sync(&mut self) {}
}

fn rust_decode_step(backend: mhc_backend, t: usize, mem: &mut dyn Memory) -> Vec<u8> {
    let (n, c) = (4usize, 512usize);
    let (k, m) = (n * c, n * n + 2 * n);
    let dev = Device::new(backend, 0).expect("device");
    let cfg = api::default_config(n as u32, c as u32);
    let plan = Plan::new(&dev, &cfg, mhc_dtype::MHC_DTYPE_F32 as i32, 64).expect("plan");
    let ws = plan.new_workspace().expect("workspace");
    let mut rng = Lcg(2024);
    let mut x = rng.fill(t * k, 1.0, 0.0);
    let mut params: Vec<[Vec<f32>; 3]> = (0..2)
        .map(|_| {
            let phi = rng.fill(m * k, 0.03, 0.0);
            let scale = rng.fill(3, 0.45, 0.55);
            let base = rng.fill(m, 0.1, 0.0);
            [phi, scale, base]
        })
        .collect();
    let shapes = [(t, c), (t, n), (t, n), (t, n * n), (t, 1)];
    let mut o0: Vec<Vec<f32>> = shapes.iter().map(|&(r, cc)| vec![0.0; r * cc]).collect();
    let mut o1 = o0.clone();
    let (mut f, mut x1) = (vec![0f32; t * c], vec![0f32; t * k]);
    let f32c = mhc::Dtype::F32;
    let px = mem.place(&mut x);
    let pp: Vec<mhc_pre_params> = params
        .iter_mut()
        .map(|[phi, scale, base]| mhc_pre_params {
            phi: mhc_tensor::dense(mem.place(phi), f32c, m, k),
            scale: mhc_tensor::dense(mem.place(scale), f32c, 1, 3),
            base: mhc_tensor::dense(mem.place(base), f32c, 1, m),
            gamma_k: mhc_tensor::NONE,
            gamma_f: mhc_tensor::NONE,
        })
        .collect();
    let outs = |o: &mut Vec<Vec<f32>>, mem: &mut dyn Memory| {
        let p: Vec<*mut c_void> = o.iter_mut().map(|v| mem.place(v)).collect();
        mhc_pre_outputs {
            a: mhc_tensor::dense(p[0], f32c, t, c),
            y: mhc_tensor::NONE,
            h_pre: mhc_tensor::dense(p[1], f32c, t, n),
            h_post: mhc_tensor::dense(p[2], f32c, t, n),
            h_res: mhc_tensor::dense(p[3], f32c, t, n * n),
            inv_rms: mhc_tensor::dense(p[4], f32c, t, 1),
        }
    };
    let v0 = outs(&mut o0, mem);
    let v1 = outs(&mut o1, mem);
    let pf = mem.place(&mut f);
    let px1 = mem.place(&mut x1);
    let tx = mhc_tensor::dense(px, f32c, t, k);
    // SAFETY: every descriptor spans memory placed above, alive until the end of the function.
    unsafe { api::pre(&plan, Some(&ws), mem.stream(), &tx, &pp[0], &v0) }.expect("pre");
    mem.sync();
    mem.fetch(v0.a.data, &mut o0[0]);
    for ti in 0..t {
        for ci in 0..c {
            f[ti * c + ci] = 0.5 * o0[0][ti * c + ci] + 0.25 * o0[0][ti * c + (ci + 1) % c];
        }
    }
    mem.upload(pf, &f);
    let post = mhc_post_inputs { f: mhc_tensor::dense(pf, f32c, t, c), h_post: v0.h_post, h_res: v0.h_res };
    let tx1 = mhc_tensor::dense(px1, f32c, t, k);
    // SAFETY: as above.
    unsafe { api::post_pre(&plan, Some(&ws), mem.stream(), &tx, &post, &tx1, &pp[1], &v1) }.expect("post_pre");
    mem.sync();
    mem.fetch(px1, &mut x1);
    let order = [(v1.a.data, 0), (v1.h_post.data, 2), (v1.h_res.data, 3), (v1.h_pre.data, 1), (v1.inv_rms.data, 4)];
    for (p, i) in order {
        mem.fetch(p, &mut o1[i]);
    }
    let mut bytes: Vec<u8> = x1.iter().flat_map(|v| v.to_le_bytes()).collect();
    for (_, i) in order {
        bytes.extend(o1[i].iter().flat_map(|v| v.to_le_bytes()));
    }
    bytes
}

fn cpp_decode_step(backend: &str, t: usize) -> Vec<u8> {
    let out = scratch("cpp").join(format!("decode_step_{backend}_{t}.f32"));
    let _ = std::fs::remove_file(&out);
    let text = run(Command::new(decode_step_binary())
        .args(["--backend", backend, "--tokens", &t.to_string(), "--out"])
        .arg(&out));
    assert!(text.contains(": ok"), "{text}");
    std::fs::read(&out).expect("the example's output")
}

fn assert_same_bits(cpp: &[u8], rust: &[u8]) {
    assert_eq!(cpp.len(), rust.len(), "output sizes differ");
    let first = cpp.chunks(4).zip(rust.chunks(4)).position(|(a, b)| a != b);
    assert!(first.is_none(), "the C++ example and the Rust API differ first at f32 element {}", first.unwrap_or(0));
}

#[test]
fn cpp_decode_step_matches_the_rust_api_bit_for_bit_on_the_cpu() {
    for t in [1, 4] {
        let cpp = cpp_decode_step("cpu", t);
        let rust = rust_decode_step(mhc_backend::MHC_BACKEND_CPU, t, &mut Host);
        assert_same_bits(&cpp, &rust);
    }
}

/// Device memory for the Rust side of the CUDA comparison.
struct Cuda {
    dev: mhc::device::cuda::CudaDevice,
    stream: mhc::device::cuda::Stream,
    bufs: Vec<mhc::device::cuda::DeviceBuffer>,
}

impl Memory for Cuda {
    fn place(&mut self, v: &mut Vec<f32>) -> *mut c_void {
        let b = mhc::device::cuda::DeviceBuffer::from_slice(&self.dev, v).expect("upload");
        let p = b.device_ptr() as *mut c_void;
        self.bufs.push(b);
        p
    }
    fn fetch(&mut self, p: *mut c_void, v: &mut [f32]) {
        let b = self.bufs.iter().find(|b| b.device_ptr() == p as u64).expect("a placed buffer");
        b.download(v).expect("download");
    }
    fn upload(&mut self, p: *mut c_void, v: &[f32]) {
        let b = self.bufs.iter().find(|b| b.device_ptr() == p as u64).expect("a placed buffer");
        b.upload(v).expect("upload");
    }
    fn stream(&self) -> *mut c_void {
        self.stream.as_raw()
    }
    fn sync(&mut self) {
        self.stream.synchronize().expect("stream");
    }
}

#[test]
#[ignore = "needs a CUDA GPU: bindings/gpu/run-checks.sh runs it there, with no skipping"]
fn cpp_decode_step_matches_the_rust_api_bit_for_bit_on_cuda() {
    let dev = match mhc::device::cuda::CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            assert!(std::env::var_os("MHC_REQUIRE_GPU").is_none(), "MHC_REQUIRE_GPU is set but: {e}");
            eprintln!("skipped: no usable CUDA device ({e})");
            return;
        }
    };
    for t in [1, 4, 16] {
        let cpp = cpp_decode_step("cuda", t);
        let stream = mhc::device::cuda::Stream::new(&dev).expect("stream");
        let mut mem = Cuda { dev: dev.clone(), stream, bufs: Vec::new() };
        let rust = rust_decode_step(mhc_backend::MHC_BACKEND_CUDA, t, &mut mem);
        assert_same_bits(&cpp, &rust);
    }
}

/// `mhc_plan_create_tuned` on a GPU: a table that cannot be read is `MHC_ERROR_CONFIG` with the
/// path in the message and no handle; the compiled-in sm_90a table, read from a file, makes a
/// plan that serves every forward stage, as NULL (the compiled-in tables) does, with no tuning
/// warning; the same table with one image hash changed makes a plan too, and
/// `mhc_plan_tuning_warnings` names the stale entry.
#[test]
#[ignore = "needs a CUDA GPU: bindings/gpu/run-checks.sh runs it there, with no skipping"]
fn tuned_plans_on_cuda() {
    use mhc_c::ffi::*;
    if let Err(e) = mhc::device::cuda::CudaDevice::new(0) {
        assert!(std::env::var_os("MHC_REQUIRE_GPU").is_none(), "MHC_REQUIRE_GPU is set but: {e}");
        eprintln!("skipped: no usable CUDA device ({e})");
        return;
    }
    let dir = std::env::temp_dir().join(format!("mhc-c-tuned-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (table, stale) = (dir.join("sm_90a.toml"), dir.join("stale.toml"));
    let text = include_str!("../../../asm/tuning/sm_90a.toml");
    std::fs::write(&table, text).unwrap();
    let hash = text.split("image_sha256 = \"").nth(1).unwrap().split('"').next().unwrap();
    std::fs::write(&stale, text.replacen(hash, &"0".repeat(64), 1)).unwrap();
    let path = |p: &Path| std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let (readable, missing, stale) = (path(&table), path(&dir.join("missing.toml")), path(&stale));
    let warnings = |plan: *const mhc_plan| -> String {
        let mut buf = vec![0 as std::ffi::c_char; 1 << 16];
        let mut needed = 0;
        // SAFETY: `plan` is live; `buf` holds its length.
        let status = unsafe { mhc_plan_tuning_warnings(plan, buf.as_mut_ptr(), buf.len(), &mut needed) };
        assert_eq!(status, mhc_status::MHC_SUCCESS);
        // SAFETY: the library NUL-terminated it within the buffer.
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
    };
    let cfg = api::default_config(4, 4096);
    let bf16 = mhc_dtype::MHC_DTYPE_BF16 as i32;
    // SAFETY: every out-pointer is a local; every handle made is destroyed here.
    unsafe {
        let mut dev = std::ptr::null_mut();
        assert_eq!(mhc_device_create(mhc_backend::MHC_BACKEND_CUDA as i32, 0, &mut dev), mhc_status::MHC_SUCCESS);
        let mut plan = std::ptr::null_mut();
        let status = mhc_plan_create_tuned(dev, &cfg, bf16, 8192, missing.as_ptr(), &mut plan);
        let message = std::ffi::CStr::from_ptr(mhc_last_error()).to_string_lossy().into_owned();
        assert_eq!(status, mhc_status::MHC_ERROR_CONFIG, "{message}");
        assert!(plan.is_null() && message.contains("missing.toml"), "{message}");
        for (tuning, stale) in [(readable.as_ptr(), false), (std::ptr::null(), false), (stale.as_ptr(), true)] {
            let status = mhc_plan_create_tuned(dev, &cfg, bf16, 8192, tuning, &mut plan);
            assert_eq!(status, mhc_status::MHC_SUCCESS);
            for stage in [mhc_stage::MHC_STAGE_PRE, mhc_stage::MHC_STAGE_POST, mhc_stage::MHC_STAGE_POST_PRE] {
                assert_eq!(mhc_plan_supports(plan, stage as i32), mhc_status::MHC_SUCCESS);
            }
            let said = warnings(plan);
            assert_eq!(said.contains("changed since it was measured"), stale, "{said}");
            mhc_plan_destroy(plan);
        }
        mhc_device_destroy(dev);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
