//! [`GcnSimRunner`]: `mhc::runner::StageRunner` on the simulator, so `mhc run <stage> --device
//! gcn-sim` runs the embedded gfx942 kernels exactly as the HIP plan launches them: the same
//! catalogue selection (`mhc::plan::choose` for gfx942), the same launch recipe
//! (`mhc::device::hip::recipe`: kernels, grids, kernarg blocks written through the metadata
//! layouts by argument name, workspace regions, the static layer's copies), executed on
//! simulated memory. Activations are stored in the requested dtype (bf16 rounds once, to
//! nearest even), parameters and coefficients in f32; every output is poisoned (NaN) before the
//! first launch. Any hazard
//! the simulator reports is returned as an error.

use crate::exec::{Launch, Memory, Stats};
use crate::SimError;
use mhc::config::{Config, Dtype, Stage};
use mhc::device::hip::recipe::{
    self, ArgLayout, KernargBlock, KernelArgs, PostIo, PreIo, Rows, Scratch, Step, Steps, WorkspaceLayout, BLOCK,
};
use mhc::error::{Error, Result};
use mhc::plan::{Ranges, Slot};
use mhc::runner::{check_finite, resolve_config, signature, Array, Class, Named, StageRunner};
use mhc_loader::{AmdFeatures, Arch};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The stage runner for `--device gcn-sim`.
#[derive(Debug, Default)]
pub struct GcnSimRunner {
    /// Statistics of every launch of the last `run` (kernel name, stats), for reports.
    pub last_stats: RefCell<Vec<(String, Stats)>>,
    /// Workgroups per 4-token tile of `mhc_pre`'s split K reduction; `None` = the recipe's
    /// choice ([`recipe::pre_splits`]). Tests force both the single and the split path.
    pub splits: Option<usize>,
}

impl GcnSimRunner {
    pub fn new() -> Self {
        Self::default()
    }

    /// A runner that always splits `pre` over `splits` workgroups per tile.
    pub fn with_splits(splits: usize) -> Self {
        GcnSimRunner { splits: Some(splits), ..Self::default() }
    }
}

fn sim_err(e: SimError) -> Error {
    Error::BadCodeObject { image: "gfx942 (gcn-sim)".into(), reason: e.to_string() }
}

fn recipe_err(image: &str, reason: String) -> Error {
    Error::BadCodeObject { image: image.into(), reason }
}

/// Simulated device memory of one stage call.
struct Dev {
    mem: Memory,
}

impl Dev {
    /// Host values stored as `dtype` (activations) or f32 (everything else).
    fn store(&mut self, name: &str, data: &[f64], dtype: Dtype) -> u64 {
        let bytes = match dtype {
            Dtype::Bf16 => data.iter().flat_map(|&v| mhc::bf16_nearest(v).to_bits().to_le_bytes()).collect(),
            _ => data.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        };
        self.mem.alloc(name, bytes)
    }
    /// An output of `len` elements poisoned with NaN (f32 0x7fc00000 / bf16 0x7fc0), so an
    /// element the kernels fail to write cannot pass a comparison.
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
            _ => (0..len)
                .map(|i| f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]) as f64)
                .collect(),
        }
    }
    /// `Step::Copy` inside simulated memory (addresses are a buffer's base + an offset).
    fn copy(&mut self, dst: u64, src: u64, bytes: usize) {
        let off = |a: u64| (a & 0xffff_ffff) as usize;
        let data = self.mem.bytes(src & !0xffff_ffff)[off(src)..off(src) + bytes].to_vec();
        self.mem.bytes_mut(dst & !0xffff_ffff)[off(dst)..off(dst) + bytes].copy_from_slice(&data);
    }
}

impl GcnSimRunner {
    /// One launch: the kernarg block written through the layout resolved by name from the
    /// kernel's metadata (the HIP device's own path), then the simulator.
    fn launch<A: KernelArgs>(&self, dev: &mut Dev, grid: [u32; 3], args: &A) -> Result<()> {
        let image = A::KERNEL.image();
        let (bytes, info) = A::KERNEL.info().map_err(|r| recipe_err(image, r))?;
        let layout = ArgLayout::of::<A>(&info).map_err(|r| recipe_err(image, r))?;
        let mut block = KernargBlock::default();
        layout.write(args, &mut block).map_err(|r| recipe_err(image, r))?;
        let kernel = crate::load_kernel(bytes, A::KERNEL.entry()).map_err(sim_err)?;
        kernel.check_metadata().map_err(|reason| recipe_err(image, reason))?;
        let ka = dev.mem.alloc("kernarg", block.as_bytes().to_vec());
        let stats = crate::launch(&kernel, Launch { grid, block: [BLOCK, 1, 1] }, ka, &mut dev.mem).map_err(sim_err)?;
        self.last_stats.borrow_mut().push((kernel.name.clone(), stats));
        Ok(())
    }

    fn run_steps(&self, dev: &mut Dev, steps: &Steps) -> Result<()> {
        for step in steps.as_slice() {
            match step {
                Step::Copy { dst, src, bytes } => dev.copy(*dst, *src, *bytes),
                Step::Post { grid, args } => self.launch(dev, *grid, args)?,
                Step::Pre { grid, args } => self.launch(dev, *grid, args)?,
                Step::Coeffs { grid, args } => self.launch(dev, *grid, args)?,
                Step::Static { grid, args } => self.launch(dev, *grid, args)?,
                Step::RmsNorm { grid, args } => self.launch(dev, *grid, args)?,
                Step::Expand { grid, args } => self.launch(dev, *grid, args)?,
            }
        }
        Ok(())
    }

    /// `stage` as the HIP plan runs it: the recipe's steps on simulated memory.
    fn run_recipe(&self, stage: Stage, cfg: &Config, dtype: Dtype, ins: &Named, t: usize) -> Result<Named> {
        let (n, c, k) = (cfg.n, cfg.c, cfg.k());
        let mut d = Dev { mem: Memory::new() };
        let sig = signature(stage, cfg);
        // Activations in the run's dtype, dense rows; parameters f32.
        let mut addr: BTreeMap<&str, u64> = BTreeMap::new();
        for p in &sig.inputs {
            let Some(a) = ins.get(p.name) else { continue };
            let dt = if p.class == Class::Activation { dtype } else { Dtype::F32 };
            addr.insert(p.name, d.store(p.name, &a.data, dt));
        }
        let rows = |name: &str, row: usize| Rows { ptr: addr[name], stride: row };
        let splits = self.splits.unwrap_or_else(|| recipe::pre_splits(t, k));
        let mut layout = WorkspaceLayout::new(cfg, t);
        // A forced split count may need more partials than the plan's own choice.
        layout.total = layout.total.max(layout.scratch + recipe::align256(t * splits * (cfg.m() + 1) * 4));
        let ws = Scratch { base: d.mem.alloc("workspace", vec![0; layout.total]), layout };
        let mut outs: Vec<(String, u64, usize, Dtype, Vec<usize>)> = Vec::new();
        for p in &sig.outputs {
            let dt = if p.class == Class::Activation { dtype } else { Dtype::F32 };
            let a = d.poisoned(p.name, t * p.row_len(), dt);
            outs.push((p.name.to_string(), a, p.row_len(), dt, p.shape(t)));
        }
        let out = |name: &str| outs.iter().find(|o| o.0 == name).map(|o| o.1).unwrap_or(0);
        let pre_io = |x: Rows| PreIo {
            x,
            phi: addr["phi"],
            scale: addr["scale"],
            base: addr["base"],
            gamma_k: cfg.gamma_k.then(|| addr["gamma_k"]),
            gamma_f: cfg.gamma_f.then(|| addr["gamma_f"]),
            a: Rows { ptr: out("a"), stride: c },
            y: cfg.gamma_f.then(|| Rows { ptr: out("y"), stride: c }),
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
            Stage::Pre => recipe::pre_steps(cfg, dtype, t, splits, &ws, &pre_io(rows("x", k)), None),
            Stage::PostPre => recipe::pre_steps(cfg, dtype, t, splits, &ws, &pre_io(rows("x", k)), Some(&post_io())),
            Stage::Head => recipe::head_steps(
                cfg,
                dtype,
                t,
                splits,
                &ws,
                rows("x", k),
                addr["phi"],
                addr["scale"],
                addr["base"],
                Rows { ptr: out("out"), stride: c },
            ),
            Stage::Static => {
                let consts: Vec<f64> = recipe::static_constants(cfg).iter().map(|&v| v as f64).collect();
                let consts = d.store("consts", &consts, Dtype::F32);
                let logits = [addr["h_pre_logits"], addr["h_post_logits"], addr["h_res_logits"]];
                recipe::static_steps(cfg, dtype, t, &ws, consts, rows("x", k), logits, addr["gamma"], out("out"))
            }
            Stage::Expand => recipe::expand_steps(cfg, dtype, t, rows("e", c), Rows { ptr: out("x"), stride: k }),
            other => return Err(no_variant(other, cfg, t, format!("no gfx942 kernel computes {other}"))),
        }
        .map_err(|reason| Error::shape("launch", reason, format!("T = {t}")))?;
        self.run_steps(&mut d, &steps)?;
        // The tile counters are back at zero: the workspace is reusable without a memset.
        if d.mem.bytes(ws.base)[..ws.layout.counter_bytes].iter().any(|&b| b != 0) {
            return Err(sim_err(SimError::Launch("mhc_pre left its tile counters non-zero".into())));
        }
        Ok(outs
            .iter()
            .map(|(name, a, row, dt, shape)| (name.clone(), Array::new(shape.clone(), d.load(*a, t * row, *dt))))
            .collect())
    }
}

fn no_variant(stage: Stage, cfg: &Config, t: usize, reason: String) -> Error {
    Error::NoVariant {
        stage: stage.name().into(),
        arch: "gfx942".into(),
        shape: format!("T={t} n={} C={}", cfg.n, cfg.c),
        rejected: vec![reason],
    }
}

impl StageRunner for GcnSimRunner {
    fn name(&self) -> String {
        "gcn-sim (gfx942 simulator)".into()
    }

    fn run(&self, stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<Named> {
        let cfg = resolve_config(stage, cfg, |name| inputs.contains_key(name));
        let cfg = &cfg;
        cfg.validate()?;
        self.last_stats.borrow_mut().clear();
        let sig = signature(stage, cfg);
        let t = sig.check(inputs)?;
        check_finite(&sig, inputs)?;
        if dtype == Dtype::F64 {
            return Err(no_variant(stage, cfg, t, "gfx942 kernels store activations as f32 or bf16, not f64".into()));
        }
        if t == 0 {
            // Nothing to launch: every output is empty.
            return Ok(sig.outputs.iter().map(|p| (p.name.to_string(), Array::new(p.shape(0), vec![]))).collect());
        }
        // The catalogue decides, as on a device: the HIP plan's own selection for gfx942; its
        // rejections become the NoVariant error.
        let slot =
            Slot::of(stage).ok_or_else(|| no_variant(stage, cfg, t, format!("no gfx942 kernel computes {stage}")))?;
        let arch = Arch::Gfx942(AmdFeatures::ANY);
        let choices = mhc::plan::choose(arch, arch.default_compute_units(), cfg, dtype, slot, t, None, &|_| Ok(()))?;
        Ranges(choices).at(slot, arch.name(), t)?;
        // Byte offsets are 32-bit per lane inside one tensor.
        if t.saturating_mul(cfg.k()).max(cfg.m() * cfg.k()).saturating_mul(4) > u32::MAX as usize {
            return Err(no_variant(stage, cfg, t, "tensors over 4 GiB are not simulated".into()));
        }
        self.run_recipe(stage, cfg, dtype, inputs, t)
    }
}
