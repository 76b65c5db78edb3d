//! The HIP device's launch recipes run on the gfx942 simulator (`gcn-sim`): the exact steps
//! `Plan`'s ops enqueue (kernels, grids, kernarg blocks written through the metadata layouts,
//! workspace regions, the static layer's copies) against the CPU f64 reference, with seeded
//! random inputs and outputs poisoned with NaN. This is the wiring check of the HIP device on a
//! machine without an AMD GPU: only the runtime calls themselves are not exercised here.
//!
//! `gcn-sim` depends on `mhc`, so it links its own copy of this crate; only plain data (bytes,
//! grids, addresses) crosses between the two.

use super::recipe::{
    self, ArgLayout, KernargBlock, Kernel, KernelArgs, PostIo, PreIo, Rows, Scratch, Step, WorkspaceLayout, BLOCK,
};
use super::test_support::{compare, seed};
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::reference::testing::Rng;
use crate::runner::random_inputs as inputs;
use crate::runner::{signature, Array, Class, CpuRunner, Named, StageRunner};
use gcn_sim::{Launch, Memory};

/// Simulated device memory holding one stage call.
struct SimDev {
    mem: Memory,
}

impl SimDev {
    fn store(&mut self, name: &str, data: &[f64], dtype: Dtype) -> u64 {
        let bytes = match dtype {
            Dtype::Bf16 => data.iter().flat_map(|&v| half::bf16::from_f64(v).to_bits().to_le_bytes()).collect(),
            _ => data.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        };
        self.mem.alloc(name, bytes)
    }
    /// An output of `len` elements poisoned with NaN.
    fn poisoned(&mut self, name: &str, len: usize, dtype: Dtype) -> u64 {
        let bytes = if dtype == Dtype::Bf16 { [0xc0u8, 0x7f].repeat(len) } else { [0u8, 0, 0xc0, 0x7f].repeat(len) };
        self.mem.alloc(name, bytes)
    }
    fn load(&self, addr: u64, len: usize, dtype: Dtype) -> Vec<f64> {
        let b = &self.mem.bytes(addr);
        match dtype {
            Dtype::Bf16 => {
                (0..len).map(|i| half::bf16::from_bits(u16::from_le_bytes([b[2 * i], b[2 * i + 1]])).to_f64()).collect()
            }
            _ => (0..len).map(|i| f32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap()) as f64).collect(),
        }
    }
    /// `Step::Copy` inside simulated memory (addresses are buffer base + offset).
    fn copy(&mut self, dst: u64, src: u64, bytes: usize) {
        let off = |a: u64| (a & 0xffff_ffff) as usize;
        let data = self.mem.bytes(src & !0xffff_ffff)[off(src)..off(src) + bytes].to_vec();
        self.mem.bytes_mut(dst & !0xffff_ffff)[off(dst)..off(dst) + bytes].copy_from_slice(&data);
    }
    fn launch<A: KernelArgs>(&mut self, grid: [u32; 3], args: &A) {
        let (bytes, info) = A::KERNEL.info().unwrap();
        let layout = ArgLayout::of::<A>(&info).unwrap();
        let mut block = KernargBlock::default();
        layout.write(args, &mut block).unwrap();
        let kernel = gcn_sim::load_kernel(bytes, A::KERNEL.entry()).unwrap();
        let ka = self.mem.alloc("kernarg", block.as_bytes().to_vec());
        gcn_sim::launch(&kernel, Launch { grid, block: [BLOCK, 1, 1] }, ka, &mut self.mem)
            .unwrap_or_else(|e| panic!("{}: {e}", A::KERNEL.entry()));
    }
    fn run(&mut self, steps: &recipe::Steps) {
        for step in steps.as_slice() {
            match step {
                Step::Copy { dst, src, bytes } => self.copy(*dst, *src, *bytes),
                Step::Post { grid, args } => self.launch(*grid, args),
                Step::Pre { grid, args } => self.launch(*grid, args),
                Step::Coeffs { grid, args } => self.launch(*grid, args),
                Step::Static { grid, args } => self.launch(*grid, args),
                Step::RmsNorm { grid, args } => self.launch(*grid, args),
            }
        }
    }
}

/// Runs `stage` as the HIP plan would: the same recipe, on simulated memory. Activations get a
/// padded row stride (`+ pad` elements) so the strides reach the kernels as given.
fn run_recipe(stage: Stage, cfg: &Config, dtype: Dtype, ins: &Named, t: usize, pad: usize) -> Named {
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    let mut d = SimDev { mem: Memory::new() };
    let sig = signature(stage, cfg);
    // Activations as padded rows; parameters dense f32; gamma_k folded into phi.
    let mut addr = std::collections::BTreeMap::new();
    for p in &sig.inputs {
        let Some(a) = ins.get(p.name) else { continue };
        let dt = if p.class == Class::Activation { dtype } else { Dtype::F32 };
        let data: Vec<f64> = if p.class == Class::Activation && p.tokens {
            let row = p.row_len();
            (0..t)
                .flat_map(|r| a.data[r * row..(r + 1) * row].iter().copied().chain(std::iter::repeat_n(7.0, pad)))
                .collect()
        } else if p.name == "phi" && cfg.gamma_k {
            a.data.chunks(k).flat_map(|row| row.iter().zip(&ins["gamma_k"].data).map(|(p, g)| p * g)).collect()
        } else {
            a.data.clone()
        };
        addr.insert(p.name, d.store(p.name, &data, dt));
    }
    let rows = |name: &str, row: usize| Rows { ptr: addr[name], stride: row + pad };
    let ws_layout = WorkspaceLayout::new(cfg, t);
    let ws = Scratch { base: d.mem.alloc("workspace", vec![0; ws_layout.total]), layout: ws_layout };
    let mut outs: Vec<(String, u64, usize, usize, Dtype, Vec<usize>)> = Vec::new();
    for p in &sig.outputs {
        let (dt, row) =
            if p.class == Class::Activation { (dtype, p.row_len() + pad) } else { (Dtype::F32, p.row_len()) };
        let a = d.poisoned(p.name, t * row, dt);
        outs.push((p.name.to_string(), a, row, p.row_len(), dt, p.shape(t)));
    }
    let out = |name: &str| outs.iter().find(|o| o.0 == name).map(|o| o.1).unwrap();
    let pre_io = |x: Rows| PreIo {
        x,
        phi: addr["phi"],
        scale: addr["scale"],
        base: addr["base"],
        gamma_f: cfg.gamma_f.then(|| addr["gamma_f"]),
        a: Rows { ptr: out("a"), stride: c + pad },
        y: cfg.gamma_f.then(|| Rows { ptr: out("y"), stride: c + pad }),
        h_pre: out("h_pre"),
        h_post: out("h_post"),
        h_res: out("h_res"),
        inv_rms: out("inv_rms"),
    };
    let post_io = || PostIo {
        x: rows("x", n * c),
        f: rows("f", c),
        h_post: addr["h_post"],
        h_res: addr["h_res"],
        out: out("out"),
    };
    let steps = match stage {
        Stage::Post => recipe::post_steps(cfg, dtype, t, &post_io()),
        Stage::Pre => recipe::pre_steps(cfg, dtype, t, &ws, &pre_io(rows("x", k)), None),
        Stage::PostPre => recipe::pre_steps(cfg, dtype, t, &ws, &pre_io(rows("x", k)), Some(&post_io())),
        Stage::Head => recipe::head_steps(
            cfg,
            dtype,
            t,
            &ws,
            rows("x", k),
            addr["phi"],
            addr["scale"],
            addr["base"],
            Rows { ptr: out("out"), stride: c + pad },
        ),
        Stage::Static => {
            let consts = d.store(
                "consts",
                &recipe::static_constants(cfg).iter().map(|&v| v as f64).collect::<Vec<_>>(),
                Dtype::F32,
            );
            let logits = [addr["h_pre_logits"], addr["h_post_logits"], addr["h_res_logits"]];
            recipe::static_steps(cfg, dtype, t, &ws, consts, rows("x", k), logits, addr["gamma"], out("out"))
        }
        other => panic!("{other} has no recipe"),
    }
    .unwrap();
    let kernels: Vec<Kernel> = steps.kernels().collect();
    assert_eq!(kernels, recipe::stage_kernels(stage, &Config { gamma_k: false, ..*cfg }, dtype).unwrap(), "{stage}");
    d.run(&steps);
    // The tile counters are back at zero: the workspace is reusable without a memset.
    assert!(d.mem.bytes(ws.base)[..ws.layout.counter_bytes].iter().all(|&b| b == 0), "counters left non-zero");
    outs.iter()
        .map(|(name, a, row, len, dt, shape)| {
            let all = d.load(*a, t * row, *dt);
            let data = (0..t).flat_map(|r| all[r * row..r * row + len].to_vec()).collect();
            (name.clone(), Array::new(shape.clone(), data))
        })
        .collect()
}

fn check(stage: Stage, cfg: Config, dtype: Dtype, t: usize, pad: usize, rng: &mut Rng, seed: u64) {
    let ins = inputs(stage, &cfg, t, 0.05, rng);
    let got = run_recipe(stage, &cfg, dtype, &ins, t, pad);
    let want = CpuRunner.run(stage, &cfg, dtype, &ins).expect("reference");
    let ctx = format!(
        "{stage} T={t} n={} C={} {dtype} {} gk={} gf={} pad={pad} seed={seed}",
        cfg.n, cfg.c, cfg.formulation, cfg.gamma_k, cfg.gamma_f
    );
    compare(&ctx, dtype, &got, &want);
}

#[test]
fn post_and_static_recipes_match_the_reference_on_the_simulator() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    for (n, c) in [(4, 264), (1, 40), (32, 64)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                check(Stage::Post, cfg, dtype, 5, 8, &mut rng, seed);
                check(Stage::Static, cfg, dtype, 3, 8, &mut rng, seed);
            }
        }
    }
}

#[test]
fn pre_post_pre_and_head_recipes_match_the_reference_on_the_simulator() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    // T = 6: two 4-token tiles, the second partial; K = 4 x 1032 > 2048: split K (G = 3).
    for (n, c, t) in [(4, 1032, 6), (2, 72, 5), (8, 40, 1)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                check(Stage::Pre, cfg, dtype, t, 8, &mut rng, seed);
                check(Stage::Head, cfg, dtype, t, 8, &mut rng, seed);
                check(Stage::PostPre, Config { gamma_f: true, ..cfg }, dtype, t, 8, &mut rng, seed);
            }
        }
        let both = Config { gamma_k: true, gamma_f: true, ..Config::new(n, c) };
        check(Stage::Pre, both, Dtype::F32, t, 0, &mut rng, seed);
    }
}

#[test]
fn many_token_pre_uses_one_workgroup_per_tile_and_matches() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    // T = 66 > 64: G = 1, 17 tiles, the last holding 2 tokens.
    let cfg = Config::new(4, 64);
    assert_eq!(recipe::pre_splits(66, cfg.k()), 1);
    check(Stage::Pre, cfg, Dtype::Bf16, 66, 8, &mut rng, seed);
    check(Stage::PostPre, cfg, Dtype::F32, 66, 0, &mut rng, seed);
}
