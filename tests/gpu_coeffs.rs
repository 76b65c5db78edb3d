//! GPU test of the coefficient kernel (asm/ptx/sm90/coeffs.ptx, written with the loader) through
//! `Plan::coeffs`, against the f64 reference of docs/math.md stages 1 (after the projection) and 2:
//! both formulations, every n, head mode; outputs poisoned before the launch. Skips without a GPU.

use mhc::device::cuda::runner::{download, nan_pattern, upload};
use mhc::device::cuda::{CudaDevice, DeviceBuffer, Plan, Stream};
use mhc::reference::sigmoid;
use mhc::reference::sinkhorn;
use mhc::reference::testing::Rng;
use mhc::{Config, Dtype, Formulation, Layout};

fn poisoned(dev: &CudaDevice, s: &Stream, len: usize) -> DeviceBuffer {
    let b = DeviceBuffer::alloc(dev, len * 4).unwrap();
    b.fill_u32(s, nan_pattern(Dtype::F32)).unwrap();
    b
}

fn f(b: &DeviceBuffer, r: usize, c: usize) -> mhc::device::DeviceTensor<'_> {
    b.view(Dtype::F32, Layout::dense(r, c))
}

fn max_abs(got: &[f64], want: &[f64]) -> f64 {
    got.iter().zip(want).map(|(g, w)| if g.is_finite() { (g - w).abs() } else { f64::INFINITY }).fold(0.0, f64::max)
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_coeffs_match_reference() {
    let dev = match CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            // The GPU machine's test command sets this: there, a missing device is a failure.
            assert!(std::env::var_os("MHC_REQUIRE_GPU").is_none(), "MHC_REQUIRE_GPU is set but: {e}");
            eprintln!("skipping: no usable CUDA GPU ({e})");
            return;
        }
    };
    let seed = Rng::test_seed("gpu_coeffs");
    let mut rng = Rng::new(seed);
    let s = Stream::new(&dev).unwrap();
    for form in [Formulation::DeepSeekV4, Formulation::Paper] {
        for n in [1usize, 2, 4, 8, 16, 32] {
            for (t, logit_std) in [(1usize, 1.0), (17, 1.0), (1000, 0.5), (64, 4.0)] {
                let cfg = Config::new(n, 64).with_formulation(form);
                let plan = Plan::new(&dev, cfg, Dtype::F32, t).unwrap();
                for head in [false, true] {
                    let m = if head { n } else { cfg.m() };
                    let p: Vec<f64> = rng.normals(t * m, logit_std).into_iter().map(|v| v as f32 as f64).collect();
                    let inv: Vec<f64> = rng.uniforms(t, 0.5, 2.0).into_iter().map(|v| v as f32 as f64).collect();
                    let scale: Vec<f64> = rng
                        .uniforms(if head { 1 } else { 3 }, 0.01, 1.0)
                        .into_iter()
                        .map(|v| v as f32 as f64)
                        .collect();
                    let base: Vec<f64> = rng.normals(m, 0.1).into_iter().map(|v| v as f32 as f64).collect();
                    let (dp, di, ds, db) = (
                        upload(&dev, Dtype::F32, &p).unwrap(),
                        upload(&dev, Dtype::F32, &inv).unwrap(),
                        upload(&dev, Dtype::F32, &scale).unwrap(),
                        upload(&dev, Dtype::F32, &base).unwrap(),
                    );
                    let mut hpre = poisoned(&dev, &s, t * n);
                    let mut hpost = poisoned(&dev, &s, t * n);
                    let mut hres = poisoned(&dev, &s, t * n * n);
                    {
                        let mut vpre = hpre.view_mut(Dtype::F32, Layout::dense(t, n));
                        let mut vpost = hpost.view_mut(Dtype::F32, Layout::dense(t, n));
                        let mut vres = hres.view_mut(Dtype::F32, Layout::dense(t, n * n));
                        let rest = if head { None } else { Some((&mut vpost, &mut vres)) };
                        plan.coeffs(
                            &s,
                            &f(&dp, t, m),
                            &f(&di, 1, t),
                            &f(&ds, 1, scale.len()),
                            &f(&db, 1, m),
                            &mut vpre,
                            rest,
                        )
                        .unwrap();
                    }
                    s.synchronize().unwrap();
                    // f64 reference.
                    let (mut w_pre, mut w_post, mut w_res) = (vec![0.0; t * n], vec![0.0; t * n], vec![0.0; t * n * n]);
                    let eps = cfg.eps_hc;
                    for ti in 0..t {
                        let g: Vec<f64> = (0..m).map(|k| p[ti * m + k] * inv[ti]).collect();
                        for i in 0..n {
                            let z = g[i] * scale[0] + base[i];
                            w_pre[ti * n + i] =
                                sigmoid(z) + if head || form == Formulation::DeepSeekV4 { eps } else { 0.0 };
                        }
                        if head {
                            continue;
                        }
                        for i in 0..n {
                            w_post[ti * n + i] = 2.0 * sigmoid(g[n + i] * scale[1] + base[n + i]);
                        }
                        let zr: Vec<f64> = (0..n * n).map(|k| g[2 * n + k] * scale[2] + base[2 * n + k]).collect();
                        sinkhorn::forward(
                            form,
                            cfg.sinkhorn_iters,
                            eps,
                            &zr,
                            n,
                            &mut w_res[ti * n * n..(ti + 1) * n * n],
                        )
                        .unwrap();
                    }
                    let tag = format!("{form} n={n} T={t} std={logit_std} head={head}");
                    let e = max_abs(&download(&hpre, Dtype::F32, t * n).unwrap(), &w_pre);
                    assert!(e <= 1e-5, "{tag}: h_pre max abs error {e:.2e}");
                    if !head {
                        let e = max_abs(&download(&hpost, Dtype::F32, t * n).unwrap(), &w_post);
                        assert!(e <= 1e-5, "{tag}: h_post max abs error {e:.2e}");
                        let e = max_abs(&download(&hres, Dtype::F32, t * n * n).unwrap(), &w_res);
                        assert!(e <= 1e-5, "{tag}: h_res max abs error {e:.2e}");
                    } else {
                        // Head mode leaves h_post / h_res alone (they were not even passed).
                        assert!(download(&hpost, Dtype::F32, 1).unwrap()[0].is_nan());
                    }
                }
            }
        }
    }
}
