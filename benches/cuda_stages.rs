//! Criterion benches of the CUDA stages (wall clock per launch + stream synchronize, so they
//! include the launch latency; `mhc bench` is the device-event measurement). Without a CUDA GPU
//! they print why and measure nothing. Names: `cuda_sm_90a_{stage}_bf16_T{t}_n{n}_C{c}`.

use criterion::{criterion_group, criterion_main, Criterion};
use mhc::device::cuda::runner::upload;
use mhc::device::cuda::{CudaDevice, DeviceBuffer, Plan, Stream};
use mhc::reference::testing::Rng;
use mhc::{Config, Dtype, Layout};

fn stages(c: &mut Criterion) {
    let dev = match CudaDevice::new(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("skipping CUDA benches: {e}");
            return;
        }
    };
    let s = Stream::new(&dev).unwrap();
    let mut rng = Rng::new(1);
    let dt = Dtype::Bf16;
    for (t, n, ch) in [(1usize, 4usize, 4096usize), (16, 4, 4096), (8192, 4, 4096)] {
        let plan = Plan::new(&dev, Config::new(n, ch), dt, t).unwrap();
        let x = upload(&dev, dt, &rng.normals(t * n * ch, 1.0)).unwrap();
        let f = upload(&dev, dt, &rng.normals(t * ch, 1.0)).unwrap();
        let hp = upload(&dev, Dtype::F32, &rng.uniforms(t * n, 0.1, 2.0)).unwrap();
        let hr = upload(&dev, Dtype::F32, &rng.uniforms(t * n * n, 0.0, 0.5)).unwrap();
        let phi = upload(&dev, Dtype::F32, &rng.normals(n * n * ch, 0.02)).unwrap();
        let sc = upload(&dev, Dtype::F32, &[0.5]).unwrap();
        let base = upload(&dev, Dtype::F32, &rng.normals(n, 0.1)).unwrap();
        let mut out = DeviceBuffer::alloc(&dev, t * n * ch * 2).unwrap();
        let mut out_c = DeviceBuffer::alloc(&dev, t * ch * 2).unwrap();
        let xs = Layout::streams(t, n, ch);
        c.bench_function(&format!("cuda_sm_90a_post_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                plan.post(
                    &s,
                    &x.view(dt, xs),
                    &f.view(dt, Layout::dense(t, ch)),
                    &hp.view(Dtype::F32, Layout::dense(t, n)),
                    &hr.view(Dtype::F32, Layout::dense(t, n * n)),
                    &mut out.view_mut(dt, xs),
                )
                .unwrap();
                s.synchronize().unwrap();
            })
        });
        c.bench_function(&format!("cuda_sm_90a_head_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                plan.head(
                    &s,
                    &x.view(dt, xs),
                    &phi.view(Dtype::F32, Layout::dense(n, n * ch)),
                    &sc.view(Dtype::F32, Layout::dense(1, 1)),
                    &base.view(Dtype::F32, Layout::dense(1, n)),
                    &mut out_c.view_mut(dt, Layout::dense(t, ch)),
                )
                .unwrap();
                s.synchronize().unwrap();
            })
        });
    }
}

criterion_group!(benches, stages);
criterion_main!(benches);
