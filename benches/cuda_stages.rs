//! Criterion benches of every CUDA forward stage (pre, post, post_pre, head, static, expand;
//! wall clock per launch + stream synchronize, so they include the launch latency; `mhc bench`
//! is the device-event measurement). Without a CUDA GPU
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
        let m = n * n + 2 * n;
        let phi_pre = upload(&dev, Dtype::F32, &rng.normals(m * n * ch, 0.02)).unwrap();
        let scale3 = upload(&dev, Dtype::F32, &[0.5, 0.5, 0.5]).unwrap();
        let base_m = upload(&dev, Dtype::F32, &rng.normals(m, 0.1)).unwrap();
        let gamma = upload(&dev, Dtype::F32, &rng.uniforms(ch, 0.5, 1.5)).unwrap();
        let logits = upload(&dev, Dtype::F32, &rng.normals(n * n, 1.0)).unwrap();
        let mut a = DeviceBuffer::alloc(&dev, t * ch * 2).unwrap();
        let mut coef = [t * n * 4, t * n * 4, t * n * n * 4, t * 4].map(|b| DeviceBuffer::alloc(&dev, b).unwrap());
        let mut x_out = DeviceBuffer::alloc(&dev, t * n * ch * 2).unwrap();
        let ws = plan.new_workspace().unwrap();
        let params = mhc::device::cuda::PreParamViews {
            phi: phi_pre.view(Dtype::F32, Layout::dense(m, n * ch)),
            scale: scale3.view(Dtype::F32, Layout::dense(1, 3)),
            base: base_m.view(Dtype::F32, Layout::dense(1, m)),
            gamma_k: None,
            gamma_f: None,
        };
        c.bench_function(&format!("cuda_sm_90a_pre_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                let [hp_o, hq_o, hr_o, ir_o] = &mut coef;
                let mut outs = mhc::device::cuda::PreOutViews {
                    a: a.view_mut(dt, Layout::dense(t, ch)),
                    y: None,
                    h_pre: hp_o.view_mut(Dtype::F32, Layout::dense(t, n)),
                    h_post: hq_o.view_mut(Dtype::F32, Layout::dense(t, n)),
                    h_res: hr_o.view_mut(Dtype::F32, Layout::dense(t, n * n)),
                    inv_rms: ir_o.view_mut(Dtype::F32, Layout::dense(t, 1)),
                };
                plan.pre(&s, &ws, &x.view(dt, xs), &params, &mut outs).unwrap();
                s.synchronize().unwrap();
            })
        });
        c.bench_function(&format!("cuda_sm_90a_post_pre_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                let [hp_o, hq_o, hr_o, ir_o] = &mut coef;
                let mut outs = mhc::device::cuda::PreOutViews {
                    a: a.view_mut(dt, Layout::dense(t, ch)),
                    y: None,
                    h_pre: hp_o.view_mut(Dtype::F32, Layout::dense(t, n)),
                    h_post: hq_o.view_mut(Dtype::F32, Layout::dense(t, n)),
                    h_res: hr_o.view_mut(Dtype::F32, Layout::dense(t, n * n)),
                    inv_rms: ir_o.view_mut(Dtype::F32, Layout::dense(t, 1)),
                };
                let post = mhc::device::cuda::PostInViews {
                    f: f.view(dt, Layout::dense(t, ch)),
                    h_post: hp.view(Dtype::F32, Layout::dense(t, n)),
                    h_res: hr.view(Dtype::F32, Layout::dense(t, n * n)),
                };
                plan.post_pre(&s, &ws, &x.view(dt, xs), &post, &mut x_out.view_mut(dt, xs), &params, &mut outs)
                    .unwrap();
                s.synchronize().unwrap();
            })
        });
        c.bench_function(&format!("cuda_sm_90a_static_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                plan.static_layer(
                    &s,
                    &x.view(dt, xs),
                    &base.view(Dtype::F32, Layout::dense(1, n)),
                    &base.view(Dtype::F32, Layout::dense(1, n)),
                    &logits.view(Dtype::F32, Layout::dense(n, n)),
                    &gamma.view(Dtype::F32, Layout::dense(1, ch)),
                    &mut out.view_mut(dt, xs),
                )
                .unwrap();
                s.synchronize().unwrap();
            })
        });
        c.bench_function(&format!("cuda_sm_90a_expand_bf16_T{t}_n{n}_C{ch}"), |b| {
            b.iter(|| {
                plan.expand(&s, &f.view(dt, Layout::dense(t, ch)), &mut out.view_mut(dt, xs)).unwrap();
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
