//! [`GcnSimRunner`]: `mhc::runner::StageRunner` on the simulator, so `mhc run <stage> --device
//! gcn-sim` runs the embedded gfx942 kernels. It validates every input before anything runs,
//! stores activations as the requested dtype (bf16 rounds once, to nearest even), keeps
//! parameters and coefficients in f32, poisons every output buffer (NaN) before the launch, and
//! builds kernargs by name from each kernel's metadata (so a layout mismatch is an error, not a
//! silent misread). Any hazard the simulator reports is returned as an error.

use crate::exec::{launch, Launch, Memory, Stats};
use crate::{elf, images, SimError};
use mhc::config::{Config, Dtype, Formulation, Stage};
use mhc::error::{Error, Result};
use mhc::runner::{resolve_config, signature, Array, Named, StageRunner};
use std::cell::RefCell;

/// Work-items per workgroup of every gfx942 kernel here.
const BLOCK: u32 = 256;

/// The stage runner for `--device gcn-sim`.
#[derive(Debug, Default)]
pub struct GcnSimRunner {
    /// Statistics of every launch of the last `run` (kernel name, stats), for reports.
    pub last_stats: RefCell<Vec<(String, Stats)>>,
    /// Workgroups per token for `mhc_pre`'s split K reduction; `None` = the plan's choice
    /// ([`pre_splits`]). Tests force both the single and the split path.
    pub splits: Option<usize>,
}

/// Workgroups per token for `mhc_pre`: decode-sized calls (T <= 64) split K = n C into slices
/// of about 2048 so that T * G workgroups keep the CUs busy; larger T use one per token.
pub fn pre_splits(t: usize, k: usize) -> usize {
    if t <= 64 {
        k.div_ceil(2048).clamp(1, 64)
    } else {
        1
    }
}

impl GcnSimRunner {
    pub fn new() -> Self {
        Self::default()
    }

    /// A runner that always splits `pre` over `splits` workgroups per token.
    pub fn with_splits(splits: usize) -> Self {
        GcnSimRunner { splits: Some(splits), ..Self::default() }
    }
}

fn sim_err(e: SimError) -> Error {
    Error::BadCodeObject { image: "gfx942 (gcn-sim)".into(), reason: e.to_string() }
}

fn no_variant(stage: Stage, cfg: &Config, t: usize, reason: String) -> Error {
    Error::NoVariant {
        stage: stage.name().into(),
        arch: "gfx942".into(),
        shape: format!("T={t} n={} C={}", cfg.n, cfg.c),
        rejected: vec![reason],
    }
}

/// Rounds to bf16 (nearest even) and returns the bits.
fn bf16_bits(v: f64) -> u16 {
    half::bf16::from_f32(v as f32).to_bits()
}

/// Simulated device memory of one stage run.
struct Dev {
    mem: Memory,
    dtype: Dtype,
}

impl Dev {
    fn new(dtype: Dtype) -> Self {
        Dev { mem: Memory::new(), dtype }
    }
    /// An activation (x, f, ...) stored as the run's dtype.
    fn act(&mut self, name: &str, data: &[f64]) -> u64 {
        let bytes = match self.dtype {
            Dtype::Bf16 => data.iter().flat_map(|&v| bf16_bits(v).to_le_bytes()).collect(),
            _ => data.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect(),
        };
        self.mem.alloc(name, bytes)
    }
    /// A parameter or coefficient: always f32.
    fn f32(&mut self, name: &str, data: &[f64]) -> u64 {
        self.mem.alloc(name, data.iter().flat_map(|&v| (v as f32).to_le_bytes()).collect())
    }
    /// An output of `len` elements, poisoned with NaN (f32 0x7fc00000 / bf16 0x7fc0) so an
    /// element the kernel fails to write cannot pass a comparison.
    fn out(&mut self, name: &str, len: usize, act: bool) -> u64 {
        let bytes = if act && self.dtype == Dtype::Bf16 {
            [0xc0u8, 0x7f].repeat(len)
        } else {
            [0u8, 0, 0xc0, 0x7f].repeat(len)
        };
        self.mem.alloc(name, bytes)
    }
    fn read(&self, addr: u64, shape: Vec<usize>, act: bool) -> Array {
        let b = self.mem.bytes(addr);
        let data = if act && self.dtype == Dtype::Bf16 {
            b.chunks(2).map(|c| half::bf16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f64()).collect()
        } else {
            b.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64).collect()
        };
        Array::new(shape, data)
    }
    fn bf16_flag(&self) -> u32 {
        (self.dtype == Dtype::Bf16) as u32
    }
}

/// Kernel arguments written by name, checked against the metadata's offsets and sizes.
struct Args<'k> {
    k: &'k elf::Kernel,
    bytes: Vec<u8>,
    set: Vec<bool>,
}

impl<'k> Args<'k> {
    fn new(k: &'k elf::Kernel) -> Self {
        Args { k, bytes: vec![0; k.kernarg_size as usize], set: vec![false; k.args.len()] }
    }
    fn put(&mut self, name: &str, v: &[u8]) -> Result<&mut Self> {
        let idx =
            self.k.args.iter().position(|a| a.name == name).ok_or_else(|| {
                sim_err(SimError::BadCodeObject(format!("{}: no kernel argument `{name}`", self.k.name)))
            })?;
        let a = &self.k.args[idx];
        if a.size != v.len() {
            return Err(sim_err(SimError::BadCodeObject(format!(
                "{}: argument `{name}` is {} bytes, not {}",
                self.k.name,
                a.size,
                v.len()
            ))));
        }
        self.bytes[a.offset..a.offset + a.size].copy_from_slice(v);
        self.set[idx] = true;
        Ok(self)
    }
    fn ptr(&mut self, name: &str, addr: u64) -> Result<&mut Self> {
        self.put(name, &addr.to_le_bytes())
    }
    fn u32(&mut self, name: &str, v: usize) -> Result<&mut Self> {
        let v = u32::try_from(v).map_err(|_| Error::shape("kernel argument", "< 2^32", v))?;
        self.put(name, &v.to_le_bytes())
    }
    fn f32(&mut self, name: &str, v: f64) -> Result<&mut Self> {
        self.put(name, &(v as f32).to_le_bytes())
    }
}

/// Loads kernel `name` of image `stem` and checks its metadata against its descriptor.
fn kernel(stem: &str, name: &str) -> Result<elf::Kernel> {
    let image = images::image(stem).ok_or_else(|| Error::BadCodeObject {
        image: format!("asm/bin/gfx942/{stem}.hsaco"),
        reason: "not embedded".into(),
    })?;
    let k = elf::load_kernel(image, name).map_err(sim_err)?;
    k.check_metadata()
        .map_err(|reason| Error::BadCodeObject { image: format!("asm/bin/gfx942/{stem}.hsaco"), reason })?;
    Ok(k)
}

impl GcnSimRunner {
    fn go(&self, dev: &mut Dev, args: &Args, grid: [u32; 3]) -> Result<()> {
        if let Some(missing) = args.set.iter().position(|s| !s) {
            return Err(sim_err(SimError::BadCodeObject(format!(
                "{}: argument `{}` was not set",
                args.k.name, args.k.args[missing].name
            ))));
        }
        let ka = dev.mem.alloc("kernarg", args.bytes.clone());
        let stats = launch(args.k, Launch { grid, block: [BLOCK, 1, 1] }, ka, &mut dev.mem).map_err(sim_err)?;
        self.last_stats.borrow_mut().push((args.k.name.clone(), stats));
        Ok(())
    }

    /// `mhc_post` on device buffers; returns the address of `out` ([t, n, C], activation).
    fn post_launch(&self, dev: &mut Dev, cfg: &Config, t: usize, inputs: &Named) -> Result<u64> {
        let (n, c) = (cfg.n, cfg.c);
        let k = kernel("post", "mhc_post")?;
        let (xa, fa) = (dev.act("x", &inputs["x"].data), dev.act("f", &inputs["f"].data));
        let (hpa, hra) = (dev.f32("h_post", &inputs["h_post"].data), dev.f32("h_res", &inputs["h_res"].data));
        let oa = dev.out("out", t * n * c, true);
        let (si, sj) = res_strides(cfg);
        let mut a = Args::new(&k);
        a.ptr("x", xa)?.ptr("f", fa)?.ptr("h_post", hpa)?.ptr("h_res", hra)?.ptr("out", oa)?;
        a.u32("tokens", t)?.u32("streams", n)?.u32("channels", c)?.u32("x_stride", n * c)?.u32("f_stride", c)?;
        a.u32("res_si", si)?.u32("res_sj", sj)?.u32("flags", dev.bf16_flag() as usize)?;
        self.go(dev, &a, [c.div_ceil(BLOCK as usize) as u32, t as u32, 1])?;
        Ok(oa)
    }

    fn post(&self, cfg: &Config, dtype: Dtype, inputs: &Named, t: usize) -> Result<Named> {
        let mut dev = Dev::new(dtype);
        let oa = self.post_launch(&mut dev, cfg, t, inputs)?;
        let mut out = Named::new();
        out.insert("out".into(), dev.read(oa, vec![t, cfg.n, cfg.c], true));
        Ok(out)
    }

    /// `post` then `pre` reading `out` as stored, in ONE launch: `mhc_pre`'s post prologue
    /// writes x' for its slice and the projection reads it back (see pre.s).
    fn post_pre(&self, cfg: &Config, dtype: Dtype, inputs: &Named, t: usize) -> Result<Named> {
        let (n, c) = (cfg.n, cfg.c);
        let mut dev = Dev::new(dtype);
        let xa = dev.act("x", &inputs["x"].data);
        let (si, sj) = res_strides(cfg);
        let post = PostIn {
            f: dev.act("f", &inputs["f"].data),
            h_post: dev.f32("h_post", &inputs["h_post"].data),
            h_res: dev.f32("h_res", &inputs["h_res"].data),
            out: dev.out("out", t * n * c, true),
            si,
            sj,
        };
        let mut out = self.pre_on(&mut dev, cfg, t, xa, inputs, Some(&post))?;
        out.insert("out".into(), dev.read(post.out, vec![t, n, c], true));
        Ok(out)
    }
}

/// What the selector chose (the parts the runner needs).
#[derive(Debug, Clone)]
struct Selected {
    /// The catalogue's split factor of the chosen variant (1: one workgroup per token tile).
    split: u32,
}

/// Selects the gfx942 variant for `stage` through the loader's selector (catalogue filters,
/// cost model, tuned tables), mapping its rejection list to `Error::NoVariant`.
fn select(stage: Stage, cfg: &Config, dtype: Dtype, t: usize) -> Result<Selected> {
    let arch = mhc_loader::Arch::Gfx942(mhc_loader::AmdFeatures::ANY);
    let shape = mhc_loader::Shape::new(t as u64, cfg.n as u32, cfg.c as u64, dtype.name())
        .with_formulation(&cfg.formulation.to_string());
    match mhc_loader::select(arch, stage.name(), &shape, &mhc_loader::Budget::default()) {
        Ok(sel) => Ok(Selected { split: sel.variant.entry.tile.split }),
        Err(mhc_loader::Error::NoVariant(nv)) => {
            // Variants of other architectures are not candidates here: list the gfx942 ones.
            let mut rejected: Vec<String> = nv
                .rejected
                .iter()
                .filter(|r| !matches!(r.reason, mhc_loader::Reason::Arch { .. }))
                .map(|r| format!("{}: {}", r.id, r.reason))
                .collect();
            if rejected.is_empty() {
                rejected.push("no gfx942 kernel for this stage".into());
            }
            Err(Error::NoVariant { stage: nv.stage, arch: nv.arch, shape: nv.shape, rejected })
        }
        Err(e) => Err(Error::BadCodeObject { image: "asm/catalogue.toml".into(), reason: e.to_string() }),
    }
}

/// Element strides (i, j) of the coefficient of output stream i, input stream j in `h_res`:
/// V4 applies `h_res` transposed (`h_res[j][i]`), the paper does not (`h_res[i][j]`).
fn res_strides(cfg: &Config) -> (usize, usize) {
    match cfg.formulation {
        Formulation::DeepSeekV4 => (1, cfg.n),
        Formulation::Paper => (cfg.n, 1),
    }
}

/// Device addresses of `post`'s inputs and output, for `mhc_pre`'s post prologue (post_pre).
#[derive(Debug, Clone, Copy, Default)]
struct PostIn {
    f: u64,
    h_post: u64,
    h_res: u64,
    out: u64,
    /// Element strides of the coefficient of output stream i, input stream j in `h_res`.
    si: usize,
    sj: usize,
}

/// Tokens per workgroup of `mhc_pre` (one phi load feeds this many tokens).
const PRE_TILE: usize = 4;

/// Which optional behaviours the `coeffs` kernel runs (its `flags` kernarg).
const COEFFS_PAPER: usize = 1;
const COEFFS_HEAD: usize = 2;

impl GcnSimRunner {
    /// Coefficients from the raw logits `pa` ([t, M]) and `ra` (inv_rms[t]) (`mhc_coeffs`):
    /// returns the addresses of (h_pre, h_post, h_res); in head mode only h_pre is written.
    #[allow(clippy::too_many_arguments)]
    fn coeffs(
        &self,
        dev: &mut Dev,
        formulation: Formulation,
        cfg: &Config,
        t: usize,
        pa: u64,
        ra: u64,
        scale: &[f64],
        base: &[f64],
        head: bool,
    ) -> Result<[u64; 3]> {
        let n = cfg.n;
        let m = if head { n } else { cfg.m() };
        let k = kernel("coeffs", "mhc_coeffs")?;
        let (sa, ba) = (dev.f32("scale", scale), dev.f32("base", base));
        let hpre = dev.out("h_pre", t * n, false);
        let (hpost, hres) =
            if head { (hpre, hpre) } else { (dev.out("h_post", t * n, false), dev.out("h_res", t * n * n, false)) };
        let mut flags = if head { COEFFS_HEAD } else { 0 };
        if formulation == Formulation::Paper {
            flags |= COEFFS_PAPER;
        }
        let mut a = Args::new(&k);
        a.ptr("p", pa)?.ptr("inv_rms", ra)?.ptr("scale", sa)?.ptr("base", ba)?;
        a.ptr("h_pre", hpre)?.ptr("h_post", hpost)?.ptr("h_res", hres)?;
        a.u32("tokens", t)?.u32("streams", n)?.u32("iters", cfg.sinkhorn_iters as usize)?;
        a.f32("eps_hc", cfg.eps_hc)?.u32("flags", flags)?.u32("p_stride", m)?;
        self.go(dev, &a, [t.div_ceil(4) as u32, 1, 1])?;
        Ok([hpre, hpost, hres])
    }

    /// The static layer: coefficients from the logits once (`mhc_coeffs`, Paper start and order,
    /// on one "token" whose raw logits are the given ones with inv_rms = 1, scale = 1, base = 0,
    /// all exact), then `mhc_static` for every token.
    fn static_layer(&self, cfg: &Config, dtype: Dtype, inputs: &Named, t: usize) -> Result<Named> {
        let (n, c) = (cfg.n, cfg.c);
        let mut dev = Dev::new(dtype);
        let mut logits = inputs["h_pre_logits"].data.clone();
        logits.extend(&inputs["h_post_logits"].data);
        logits.extend(&inputs["h_res_logits"].data);
        let pa = dev.f32("logits", &logits);
        let ra = dev.f32("one", &[1.0]);
        let zeros = vec![0.0; cfg.m()];
        let [hpre, hpost, hres] =
            self.coeffs(&mut dev, Formulation::Paper, cfg, 1, pa, ra, &[1.0; 3], &zeros, false)?;
        let k = kernel("static", "mhc_static")?;
        let xa = dev.act("x", &inputs["x"].data);
        let ga = dev.f32("gamma", &inputs["gamma"].data);
        let oa = dev.out("out", t * n * c, true);
        let mut a = Args::new(&k);
        a.ptr("x", xa)?
            .ptr("h_pre", hpre)?
            .ptr("h_post", hpost)?
            .ptr("h_res", hres)?
            .ptr("gamma", ga)?
            .ptr("out", oa)?;
        a.u32("tokens", t)?.u32("streams", n)?.u32("channels", c)?.u32("x_stride", n * c)?;
        a.f32("eps_f", cfg.eps_f)?.u32("flags", dev.bf16_flag() as usize)?;
        self.go(&mut dev, &a, [t as u32, 1, 1])?;
        let mut out = Named::new();
        out.insert("out".into(), dev.read(oa, vec![t, n, c], true));
        Ok(out)
    }

    /// The F-pre-norm `y = a gamma_f / rms(a)` (`mhc_rmsnorm`) of the stored `a`.
    fn rmsnorm(&self, dev: &mut Dev, cfg: &Config, t: usize, aa: u64, gamma: &[f64]) -> Result<u64> {
        let c = cfg.c;
        let k = kernel("rmsnorm", "mhc_rmsnorm")?;
        let ga = dev.f32("gamma_f", gamma);
        let ya = dev.out("y", t * c, true);
        let mut a = Args::new(&k);
        a.ptr("a", aa)?.ptr("gamma", ga)?.ptr("out", ya)?;
        a.u32("tokens", t)?.u32("channels", c)?.u32("a_stride", c)?.u32("y_stride", c)?;
        a.f32("eps_f", cfg.eps_f)?.u32("flags", dev.bf16_flag() as usize)?;
        self.go(dev, &a, [t as u32, 1, 1])?;
        Ok(ya)
    }

    /// `phi` with the optional pre-norm weight folded in (MATH.md: `(v * gamma_k) . phi^T`
    /// equals `v . (phi * gamma_k)^T`; the product is rounded once, to f32).
    fn folded_phi(cfg: &Config, inputs: &Named) -> Vec<f64> {
        let phi = &inputs["phi"].data;
        match inputs.get("gamma_k") {
            Some(g) if cfg.gamma_k => {
                phi.chunks(cfg.k()).flat_map(|row| row.iter().zip(&g.data).map(|(p, g)| p * g)).collect()
            }
            _ => phi.clone(),
        }
    }

    fn pre(&self, cfg: &Config, dtype: Dtype, inputs: &Named, t: usize, selection: Selected) -> Result<Named> {
        let mut dev = Dev::new(dtype);
        let xa = dev.act("x", &inputs["x"].data);
        // The catalogue's split variant spreads K over workgroups; the tokens variant does not.
        let runner = GcnSimRunner {
            splits: self.splits.or((selection.split <= 1).then_some(1)),
            last_stats: RefCell::new(Vec::new()),
        };
        let out = runner.pre_on(&mut dev, cfg, t, xa, inputs, None);
        self.last_stats.borrow_mut().extend(runner.last_stats.take());
        out
    }

    /// One `mhc_pre` launch on the activation at `xa` (split K over G workgroups per 4-token
    /// tile, the last one finishing). `head` selects its head mode (M = n, sigmoid weights into
    /// `h_pre`, no Sinkhorn, `a` = the collapse). Returns (h_pre, h_post, h_res, inv_rms, a).
    #[allow(clippy::too_many_arguments)]
    fn pre_launch(
        &self,
        dev: &mut Dev,
        cfg: &Config,
        t: usize,
        xa: u64,
        phi: &[f64],
        scale: &[f64],
        base: &[f64],
        head: bool,
        post: Option<&PostIn>,
    ) -> Result<[u64; 5]> {
        let (n, c) = (cfg.n, cfg.c);
        let m = if head { n } else { cfg.m() };
        let g = self.splits.unwrap_or_else(|| pre_splits(t, cfg.k())).max(1);
        let k = kernel("pre", "mhc_pre")?;
        let phia = dev.f32("phi", phi);
        let (sa, ba) = (dev.f32("scale", scale), dev.f32("base", base));
        let hpre = dev.out("h_pre", t * n, false);
        let (hpost, hres) =
            if head { (hpre, hpre) } else { (dev.out("h_post", t * n, false), dev.out("h_res", t * n * n, false)) };
        let ra = dev.out("inv_rms", t, false);
        let aa = dev.out("a", t * c, true);
        // Scratch: partial logits (poisoned: a partial read before it is written shows up) and
        // the per-tile counters, which start at zero and which the kernel leaves at zero.
        let work = dev.out("work", t * g * (m + 1), false);
        let tiles = t.div_ceil(PRE_TILE);
        let counter = dev.mem.alloc("counter", vec![0; 4 * tiles]);
        let mut flags = dev.bf16_flag() as usize;
        if cfg.formulation == Formulation::Paper {
            flags |= 2;
        }
        if head {
            flags |= 4;
        }
        if post.is_some() {
            flags |= 8;
        }
        let mut a = Args::new(&k);
        a.ptr("x", xa)?.ptr("phi", phia)?.ptr("scale", sa)?.ptr("base", ba)?;
        a.ptr("h_pre", hpre)?.ptr("h_post", hpost)?.ptr("h_res", hres)?.ptr("inv_rms", ra)?.ptr("a", aa)?;
        a.ptr("work", work)?.ptr("counter", counter)?;
        a.u32("tokens", t)?.u32("streams", n)?.u32("channels", c)?.u32("x_stride", n * c)?.u32("a_stride", c)?;
        a.u32("splits", g)?.u32("iters", cfg.sinkhorn_iters as usize)?;
        a.f32("eps_norm", cfg.eps_norm)?.f32("eps_hc", cfg.eps_hc)?.u32("flags", flags)?;
        // The post prologue's inputs (post_pre); unused (null) otherwise.
        let p = post.copied().unwrap_or_default();
        a.ptr("f", p.f)?.ptr("post_h_post", p.h_post)?.ptr("post_h_res", p.h_res)?.ptr("out", p.out)?;
        a.u32("f_stride", c)?.u32("res_si", p.si)?.u32("res_sj", p.sj)?;
        self.go(dev, &a, [g as u32, tiles as u32, 1])?;
        if dev.mem.bytes(counter).iter().any(|&b| b != 0) {
            return Err(sim_err(SimError::Launch("mhc_pre left a tile counter non-zero".into())));
        }
        Ok([hpre, hpost, hres, ra, aa])
    }

    /// `pre` on the activation at `xa` (`mhc_pre`, then `mhc_rmsnorm` with gamma_f).
    fn pre_on(
        &self,
        dev: &mut Dev,
        cfg: &Config,
        t: usize,
        xa: u64,
        inputs: &Named,
        post: Option<&PostIn>,
    ) -> Result<Named> {
        let (n, c) = (cfg.n, cfg.c);
        let phi = Self::folded_phi(cfg, inputs);
        let [hpre, hpost, hres, ra, aa] =
            self.pre_launch(dev, cfg, t, xa, &phi, &inputs["scale"].data, &inputs["base"].data, false, post)?;
        let mut out = Named::new();
        if cfg.gamma_f {
            let ya = self.rmsnorm(dev, cfg, t, aa, &inputs["gamma_f"].data)?;
            out.insert("y".into(), dev.read(ya, vec![t, c], true));
        }
        out.insert("a".into(), dev.read(aa, vec![t, c], true));
        out.insert("h_pre".into(), dev.read(hpre, vec![t, n], false));
        out.insert("h_post".into(), dev.read(hpost, vec![t, n], false));
        out.insert("h_res".into(), dev.read(hres, vec![t, n, n], false));
        out.insert("inv_rms".into(), dev.read(ra, vec![t], false));
        Ok(out)
    }

    /// `head`: one `mhc_pre` launch in head mode.
    fn head(&self, cfg: &Config, dtype: Dtype, inputs: &Named, t: usize) -> Result<Named> {
        let mut dev = Dev::new(dtype);
        let xa = dev.act("x", &inputs["x"].data);
        let (phi, scale, base) = (&inputs["phi"].data, &inputs["scale"].data, &inputs["base"].data);
        let [.., oa] = self.pre_launch(&mut dev, cfg, t, xa, phi, scale, base, true, None)?;
        let mut out = Named::new();
        out.insert("out".into(), dev.read(oa, vec![t, cfg.c], true));
        Ok(out)
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
        for (name, a) in inputs {
            if let Some(index) = a.data.iter().position(|v| !v.is_finite()) {
                let what = sig.input(name).map(|p| p.name).unwrap_or("input");
                return Err(Error::NonFinite { tensor: what, index });
            }
        }
        if dtype == Dtype::F64 {
            return Err(no_variant(stage, cfg, t, "gfx942 kernels store activations as f32 or bf16, not f64".into()));
        }
        if t == 0 {
            // Nothing to launch: every output is empty.
            return Ok(sig.outputs.iter().map(|p| (p.name.to_string(), Array::new(p.shape(0), vec![]))).collect());
        }
        // The variant catalogue decides, as on a device: the selector's hard filters (stage, n,
        // C, dtype, formulation) and cost model pick the variant; its rejections become the
        // NoVariant error.
        let selection = select(stage, cfg, dtype, t)?;
        // Byte offsets are 32-bit per lane inside one tensor.
        if t.saturating_mul(cfg.k()).max(cfg.m() * cfg.k()).saturating_mul(4) > u32::MAX as usize {
            return Err(no_variant(stage, cfg, t, "tensors over 4 GiB are not simulated".into()));
        }
        match stage {
            Stage::Post => self.post(cfg, dtype, inputs, t),
            Stage::Pre => self.pre(cfg, dtype, inputs, t, selection),
            Stage::Head => self.head(cfg, dtype, inputs, t),
            Stage::Static => self.static_layer(cfg, dtype, inputs, t),
            Stage::PostPre => self.post_pre(cfg, dtype, inputs, t),
            _ => Err(no_variant(stage, cfg, t, "no gfx942 kernel for this stage".into())),
        }
    }
}
