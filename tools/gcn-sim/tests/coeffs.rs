//! The standalone coefficient kernel (`mhc_coeffs`, docs/math.md stage 2 from given logits) on the
//! simulator against the f64 reference: both formulations, head mode, every n.

use gcn_sim::{launch, load_kernel, Launch, Memory};
use mhc::config::Formulation;
use mhc::reference::testing::Rng;
use mhc::reference::{sigmoid, sinkhorn};

fn f32_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect()
}

fn read_f32(mem: &Memory, addr: u64) -> Vec<f64> {
    mem.bytes(addr).chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()
}

#[allow(clippy::too_many_arguments)]
fn check(n: usize, t: usize, f: Formulation, head: bool, iters: u32, eps: f64, rng: &mut Rng) {
    let image = gcn_sim::images::image("coeffs").expect("embedded");
    let k = load_kernel(image, "mhc_coeffs").unwrap();
    let m = if head { n } else { n * n + 2 * n };
    let p = rng.normals(t * m, 2.0);
    let inv_rms = rng.uniforms(t, 0.5, 1.5);
    let scale = rng.uniforms(if head { 1 } else { 3 }, 0.01, 1.0);
    let base = rng.normals(m, 0.1);
    let mut mem = Memory::new();
    let (pa, ra) = (mem.alloc("p", f32_bytes(&p)), mem.alloc("inv_rms", f32_bytes(&inv_rms)));
    let (sa, ba) = (mem.alloc("scale", f32_bytes(&scale)), mem.alloc("base", f32_bytes(&base)));
    let nan = |len: usize| [0u8, 0, 0xc0, 0x7f].repeat(len);
    let hpre = mem.alloc("h_pre", nan(t * n));
    let hpost = mem.alloc("h_post", nan(t * n));
    let hres = mem.alloc("h_res", nan(t * n * n));
    let mut args = vec![0u8; k.kernarg_size as usize];
    let mut put = |name: &str, v: &[u8]| {
        let a = k.arg(name).unwrap_or_else(|| panic!("arg {name}"));
        args[a.offset..a.offset + v.len()].copy_from_slice(v);
    };
    for (name, addr) in
        [("p", pa), ("inv_rms", ra), ("scale", sa), ("base", ba), ("h_pre", hpre), ("h_post", hpost), ("h_res", hres)]
    {
        put(name, &addr.to_le_bytes());
    }
    let flags = (f == Formulation::Paper) as u32 | (head as u32) << 1;
    for (name, v) in
        [("tokens", t as u32), ("streams", n as u32), ("iters", iters), ("flags", flags), ("p_stride", m as u32)]
    {
        put(name, &v.to_le_bytes());
    }
    put("eps_hc", &(eps as f32).to_le_bytes());
    let ka = mem.alloc("kernarg", args);
    launch(&k, Launch { grid: [t.div_ceil(4) as u32, 1, 1], block: [256, 1, 1] }, ka, &mut mem).unwrap();

    // Reference in f64 from the same f32-rounded inputs.
    let r = |v: f64| v as f32 as f64;
    let (got_pre, got_post, got_res) = (read_f32(&mem, hpre), read_f32(&mem, hpost), read_f32(&mem, hres));
    // The largest error so far; a NaN (an unwritten or non-finite output) is kept, not skipped.
    let mut worst: f64 = 0.0;
    let mut note = |got: f64, want: f64| {
        let e = (got - want).abs();
        if e.is_nan() || e > worst {
            worst = e;
        }
    };
    for ti in 0..t {
        let z: Vec<f64> = (0..m)
            .map(|j| {
                let s = if head || j < n {
                    scale[0]
                } else if j < 2 * n {
                    scale[1]
                } else {
                    scale[2]
                };
                r(p[ti * m + j]) * r(inv_rms[ti]) * r(s) + r(base[j])
            })
            .collect();
        let eps_pre = if head || f == Formulation::DeepSeekV4 { eps as f32 as f64 } else { 0.0 };
        for i in 0..n {
            note(got_pre[ti * n + i], sigmoid(z[i]) + eps_pre);
        }
        if head {
            continue;
        }
        for i in 0..n {
            note(got_post[ti * n + i], 2.0 * sigmoid(z[n + i]));
        }
        let mut h = vec![0.0; n * n];
        sinkhorn::forward(f, iters, eps as f32 as f64, &z[2 * n..], n, &mut h).unwrap();
        for e in 0..n * n {
            note(got_res[ti * n * n + e], h[e]);
        }
    }
    let outputs: Vec<&Vec<f64>> = if head { vec![&got_pre] } else { vec![&got_pre, &got_post, &got_res] };
    assert!(
        outputs.iter().all(|o| o.iter().all(|v| v.is_finite())),
        "n={n} T={t} {f:?} head={head}: a non-finite output"
    );
    assert!(worst.is_finite() && worst <= 1e-5, "n={n} T={t} {f:?} head={head} iters={iters}: max abs error {worst:e}");
    if head {
        // Head mode writes h_pre only.
        assert!(read_f32(&mem, hpost).iter().all(|v| v.is_nan()) && read_f32(&mem, hres).iter().all(|v| v.is_nan()));
    }
}

#[test]
fn coefficients_match_reference_both_formulations_and_head_mode() {
    let seed = Rng::test_seed("coeffs");
    gcn_sim::exec::set_thread_options(Some(gcn_sim::Options {
        order: gcn_sim::Order::Seeded(seed),
        trans: gcn_sim::Trans::Ulp(seed),
        xnack: false,
    }));
    let mut rng = Rng::new(seed);
    for n in [1, 2, 4, 8, 16, 32] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            check(n, 5, f, false, 20, 1e-6, &mut rng);
        }
        check(n, 3, Formulation::DeepSeekV4, true, 20, 1e-6, &mut rng);
    }
    check(4, 2, Formulation::DeepSeekV4, false, 1, 1e-3, &mut rng);
    check(4, 2, Formulation::Paper, false, 2, 1e-3, &mut rng);
}
