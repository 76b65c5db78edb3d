//! [`HipRunner`]: the HIP device behind the [`StageRunner`] seam (`mhc run --device hip`). Per
//! call: check the inputs against the stage's signature and the gfx942 recipes (before any
//! runtime call), store activations in the requested dtype and parameters in f32 on the
//! device, poison every output with NaN, run the stage's op, synchronize, read the outputs back.

use super::device::HipDevice;
use super::memory::DeviceBuffer;
use super::plan::{Plan, PostInViews, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::config::{Config, Dtype, Stage};
use crate::error::{Error, Result};
use crate::plan::{Ranges, Slot};
use crate::runner::{check_finite, resolve_config, signature, Array, Class, Named, Port, StageRunner};
use crate::tensor::Layout;
use half::bf16;
use std::cell::OnceCell;
use std::collections::BTreeMap;

/// Runs stages on one AMD GPU.
pub struct HipRunner {
    ordinal: usize,
    opened: OnceCell<Result<(HipDevice, Stream)>>,
}

impl std::fmt::Debug for HipRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HipRunner(hip:{})", self.ordinal)
    }
}

fn open(ordinal: usize) -> Result<(HipDevice, Stream)> {
    let dev = HipDevice::new(ordinal)?;
    let stream = Stream::new(&dev)?;
    Ok((dev, stream))
}

impl HipRunner {
    /// Opens GPU `ordinal` now (see [`HipDevice::new`] for the errors).
    pub fn new(ordinal: usize) -> Result<Self> {
        let r = Self::deferred(ordinal);
        r.device()?;
        Ok(r)
    }

    /// A runner that opens GPU `ordinal` on its first valid `run`: bad inputs are reported
    /// without touching the runtime at all.
    pub fn deferred(ordinal: usize) -> Self {
        HipRunner { ordinal, opened: OnceCell::new() }
    }

    /// A one-line reason for a failed open, for the command line: a missing library reads
    /// `libamdhip64.so not found (tried ...)`, missing entry points name themselves.
    pub fn explain(e: &Error) -> String {
        match e {
            // Missing entry points are listed as `<library>:<symbol>`; paths tried are not.
            Error::LibraryMissing { tried } if !tried.iter().any(|p| p.contains(":hip")) => {
                format!("libamdhip64.so not found (tried {})", tried.join(", "))
            }
            Error::LibraryMissing { tried } => format!("libamdhip64 lacks {}", tried.join(", ")),
            other => other.to_string(),
        }
    }

    fn device(&self) -> Result<&(HipDevice, Stream)> {
        self.opened.get_or_init(|| open(self.ordinal)).as_ref().map_err(Clone::clone)
    }

    /// Everything `run` checks before it calls the runtime: the configuration (with the
    /// optional pre-norms switched on by their inputs), the dtype, the names, shapes and
    /// finiteness of the inputs, and that the gfx942 build has kernels for the stage. Returns
    /// the resolved configuration and T.
    pub fn check_inputs(stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<(Config, usize)> {
        let cfg = resolve_config(stage, cfg, |name| inputs.contains_key(name));
        cfg.validate()?;
        if dtype == Dtype::F64 {
            return Err(Error::Config { what: "dtype", reason: "the HIP device stores bf16 or f32".into() });
        }
        let sig = signature(stage, &cfg);
        let t = sig.check(inputs)?;
        check_finite(&sig, inputs)?;
        let plan_cfg = cfg;
        let arch = mhc_loader::Arch::Gfx942(mhc_loader::AmdFeatures::ANY);
        let slot = Slot::of(stage).ok_or_else(|| Error::NoVariant {
            stage: stage.name().into(),
            arch: arch.name().into(),
            shape: format!("T={t} n={} C={}", cfg.n, cfg.c),
            rejected: vec![format!("no gfx942 kernel computes {stage}")],
        })?;
        let units = arch.default_compute_units();
        let ranges = super::recipe::choose(arch, units, &plan_cfg, dtype, slot, t.max(1))?;
        Ranges(ranges).at(slot, arch.name(), t.max(1))?;
        Ok((cfg, t))
    }
}

/// Host values stored in `dtype` on the device (bf16 rounds once, to nearest even).
fn upload(dev: &HipDevice, dtype: Dtype, data: &[f64]) -> Result<DeviceBuffer> {
    match dtype {
        Dtype::Bf16 => DeviceBuffer::from_slice(dev, &data.iter().map(|&v| crate::bf16_nearest(v)).collect::<Vec<_>>()),
        _ => DeviceBuffer::from_slice(dev, &data.iter().map(|&v| v as f32).collect::<Vec<_>>()),
    }
}

/// `len` device values of `dtype`, widened exactly to f64.
fn download(buf: &DeviceBuffer, dtype: Dtype, len: usize) -> Result<Vec<f64>> {
    Ok(match dtype {
        Dtype::Bf16 => {
            let mut v = vec![bf16::ZERO; len];
            buf.download(&mut v)?;
            v.into_iter().map(|x| x.to_f64()).collect()
        }
        _ => {
            let mut v = vec![0f32; len];
            buf.download(&mut v)?;
            v.into_iter().map(f64::from).collect()
        }
    })
}

/// A device copy of one port's array.
struct Dev {
    buf: DeviceBuffer,
    dtype: Dtype,
    layout: Layout,
}

impl Dev {
    fn view(&self) -> super::memory::DeviceTensor<'_> {
        self.buf.view(self.dtype, self.layout)
    }
}

impl StageRunner for HipRunner {
    fn name(&self) -> String {
        match self.opened.get() {
            Some(Ok((dev, _))) => format!("hip:{} ({}, {})", self.ordinal, dev.name(), dev.gcn_arch_name()),
            _ => format!("hip:{}", self.ordinal),
        }
    }

    fn run(&self, stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<Named> {
        let (cfg, t) = Self::check_inputs(stage, cfg, dtype, inputs)?;
        let sig = signature(stage, &cfg);
        let (dev, stream) = self.device()?;
        if t == 0 {
            return Ok(sig.outputs.iter().map(|p| (p.name.to_string(), Array::new(p.shape(0), vec![]))).collect());
        }
        let plan = Plan::new(dev, cfg, dtype, t)?;
        plan.supports(stage)?;
        let storage = |p: &Port| match p.class {
            Class::Activation => dtype,
            Class::Parameter => Dtype::F32,
        };
        let layout_of = |p: &Port| if p.tokens { Layout::dense(t, p.row_len()) } else { Layout::dense(1, p.row_len()) };
        let mut ins: BTreeMap<&str, Dev> = BTreeMap::new();
        for p in &sig.inputs {
            let Some(a) = inputs.get(p.name) else { continue };
            let dt = storage(p);
            ins.insert(p.name, Dev { buf: upload(dev, dt, &a.data)?, dtype: dt, layout: layout_of(p) });
        }
        let mut outs: Vec<(Port, Dev)> = Vec::new();
        for p in &sig.outputs {
            let dt = storage(p);
            let layout = layout_of(p);
            let bytes = layout.required_len().unwrap_or(0).max(1) * dt.size();
            let buf = DeviceBuffer::alloc(dev, bytes.next_multiple_of(4))?;
            // Poison: an element the kernels fail to write reads back as NaN.
            buf.fill_u32(stream, if dt == Dtype::Bf16 { 0x7fc0_7fc0 } else { 0x7fc0_0000 })?;
            outs.push((p.clone(), Dev { buf, dtype: dt, layout }));
        }
        let get = |name: &str| -> Result<&Dev> {
            ins.get(name).ok_or_else(|| Error::shape("inputs", format!("an input named {name}"), "missing"))
        };
        let ws = plan.new_workspace()?;
        {
            let mut views: BTreeMap<&str, super::memory::DeviceTensorMut<'_>> =
                outs.iter_mut().map(|(p, d)| (p.name, d.buf.view_mut(d.dtype, d.layout))).collect();
            let mut take = |name: &str| {
                views.remove(name).ok_or_else(|| Error::shape("outputs", format!("an output named {name}"), "missing"))
            };
            match stage {
                Stage::Post => plan.post(
                    stream,
                    &get("x")?.view(),
                    &get("f")?.view(),
                    &get("h_post")?.view(),
                    &get("h_res")?.view(),
                    &mut take("out")?,
                )?,
                Stage::Head => plan.head(
                    stream,
                    &ws,
                    &get("x")?.view(),
                    &get("phi")?.view(),
                    &get("scale")?.view(),
                    &get("base")?.view(),
                    &mut take("out")?,
                )?,
                Stage::Static => plan.static_layer(
                    stream,
                    &ws,
                    &get("x")?.view(),
                    &get("h_pre_logits")?.view(),
                    &get("h_post_logits")?.view(),
                    &get("h_res_logits")?.view(),
                    &get("gamma")?.view(),
                    &mut take("out")?,
                )?,
                Stage::Pre | Stage::PostPre => {
                    let params = PreParamViews {
                        phi: get("phi")?.view().with_layout(Layout::dense(cfg.m(), cfg.k())),
                        scale: get("scale")?.view(),
                        base: get("base")?.view(),
                        gamma_k: if cfg.gamma_k { Some(get("gamma_k")?.view()) } else { None },
                        gamma_f: if cfg.gamma_f { Some(get("gamma_f")?.view()) } else { None },
                    };
                    let mut x_out = if stage == Stage::PostPre { Some(take("out")?) } else { None };
                    let mut out = PreOutViews {
                        a: take("a")?,
                        y: if cfg.gamma_f { Some(take("y")?) } else { None },
                        h_pre: take("h_pre")?,
                        h_post: take("h_post")?,
                        h_res: take("h_res")?,
                        inv_rms: take("inv_rms")?,
                    };
                    match x_out.as_mut() {
                        Some(x_out) => {
                            let post = PostInViews {
                                f: get("f")?.view(),
                                h_post: get("h_post")?.view(),
                                h_res: get("h_res")?.view(),
                            };
                            plan.post_pre(stream, &ws, &get("x")?.view(), &post, x_out, &params, &mut out)?
                        }
                        None => plan.pre(stream, &ws, &get("x")?.view(), &params, &mut out)?,
                    }
                }
                Stage::Expand => plan.expand(stream, &get("e")?.view(), &mut take("x")?)?,
                other => plan.supports(other)?,
            }
        }
        stream.synchronize()?;
        let mut named = Named::new();
        for (p, d) in &outs {
            let len = d.layout.required_len().unwrap_or(0);
            named.insert(p.name.to_string(), Array::new(p.shape(t), download(&d.buf, d.dtype, len)?));
        }
        Ok(named)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Formulation;

    /// Seeded, never-zero inputs of every port of `stage` for `t` tokens.
    fn inputs(stage: Stage, cfg: &Config, t: usize, seed: u64) -> Named {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 1.5 + 0.25
        };
        signature(stage, cfg)
            .inputs
            .iter()
            .filter(|p| !p.optional)
            .map(|p| {
                let shape = p.shape(t);
                let data = (0..shape.iter().product::<usize>()).map(|_| next()).collect();
                (p.name.to_string(), Array::new(shape, data))
            })
            .collect()
    }

    fn check(stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<(Config, usize)> {
        HipRunner::check_inputs(stage, cfg, dtype, inputs)
    }

    #[test]
    fn bad_inputs_are_refused_before_any_runtime_call() {
        let cfg = Config::new(4, 64);
        let good = inputs(Stage::Post, &cfg, 5, 1);
        assert_eq!(check(Stage::Post, &cfg, Dtype::Bf16, &good).unwrap().1, 5);

        let mut short = good.clone();
        short.get_mut("f").unwrap().shape = vec![4, 64];
        assert!(matches!(check(Stage::Post, &cfg, Dtype::F32, &short), Err(Error::Shape { what: "f", .. })));

        let mut nan = good.clone();
        nan.get_mut("h_res").unwrap().data[7] = f64::NAN;
        assert!(matches!(
            check(Stage::Post, &cfg, Dtype::F32, &nan),
            Err(Error::NonFinite { tensor: "h_res", index: 7 })
        ));

        let mut extra = good.clone();
        extra.insert("bogus".into(), Array::new(vec![1], vec![1.0]));
        assert!(matches!(check(Stage::Post, &cfg, Dtype::F32, &extra), Err(Error::Shape { what: "inputs", .. })));

        let mut missing = good.clone();
        missing.remove("x");
        assert!(matches!(check(Stage::Post, &cfg, Dtype::F32, &missing), Err(Error::Shape { what: "x", .. })));

        assert!(matches!(check(Stage::Post, &cfg, Dtype::F64, &good), Err(Error::Config { what: "dtype", .. })));
        let bad_cfg = Config { sinkhorn_iters: 0, ..cfg };
        assert!(matches!(check(Stage::Post, &bad_cfg, Dtype::F32, &good), Err(Error::Config { .. })));

        // n = 3 and stages without gfx942 kernels: NoVariant with the reason.
        let c3 = Config::new(3, 64);
        match check(Stage::Post, &c3, Dtype::F32, &inputs(Stage::Post, &c3, 2, 2)) {
            Err(Error::NoVariant { rejected, .. }) => assert!(rejected[0].contains("n=3 not supported")),
            other => panic!("{other:?}"),
        }
        let e = inputs(Stage::Expand, &c3, 2, 3);
        assert_eq!(check(Stage::Expand, &c3, Dtype::F32, &e).unwrap().1, 2, "expand serves every n");
        let s = inputs(Stage::Sinkhorn, &cfg, 2, 3);
        assert!(matches!(check(Stage::Sinkhorn, &cfg, Dtype::F32, &s), Err(Error::NoVariant { .. })));

        // The deferred runner answers these without opening the runtime; on this machine a
        // valid call reaches the runtime and reports why there is none.
        let r = HipRunner::deferred(0);
        assert!(matches!(r.run(Stage::Post, &cfg, Dtype::F32, &nan), Err(Error::NonFinite { .. })));
        assert!(r.opened.get().is_none(), "validation opened the runtime");
        if crate::device::hip::sys::hip().is_err() {
            assert!(matches!(r.run(Stage::Post, &cfg, Dtype::F32, &good), Err(Error::LibraryMissing { .. })));
        }
    }

    #[test]
    fn open_errors_read_as_one_line() {
        let missing =
            Error::LibraryMissing { tried: vec!["libamdhip64.so".into(), "/opt/rocm/lib/libamdhip64.so".into()] };
        assert_eq!(
            HipRunner::explain(&missing),
            "libamdhip64.so not found (tried libamdhip64.so, /opt/rocm/lib/libamdhip64.so)"
        );
        let symbols = Error::LibraryMissing { tried: vec!["libamdhip64.so.5:hipGetDevicePropertiesR0600".into()] };
        assert_eq!(HipRunner::explain(&symbols), "libamdhip64 lacks libamdhip64.so.5:hipGetDevicePropertiesR0600");
        let no_gpu = Error::NoDevice("libamdhip64 reports no HIP device".into());
        assert!(HipRunner::explain(&no_gpu).contains("no HIP device"));
        if let Err(e) = HipRunner::new(0) {
            assert!(!HipRunner::explain(&e).contains('\n'));
        }
    }

    #[test]
    fn optional_pre_norms_are_switched_on_by_their_inputs() {
        let cfg = Config::new(2, 16).with_formulation(Formulation::Paper);
        let mut ins = inputs(Stage::Pre, &cfg, 3, 4);
        ins.insert("gamma_k".into(), Array::new(vec![32], vec![0.5; 32]));
        ins.insert("gamma_f".into(), Array::new(vec![16], vec![1.5; 16]));
        let (resolved, t) = check(Stage::Pre, &cfg, Dtype::Bf16, &ins).unwrap();
        assert!(resolved.gamma_k && resolved.gamma_f && t == 3);
        // A wrongly sized gamma_f is a shape error.
        ins.insert("gamma_f".into(), Array::new(vec![15], vec![1.5; 15]));
        assert!(matches!(check(Stage::Pre, &cfg, Dtype::Bf16, &ins), Err(Error::Shape { what: "gamma_f", .. })));
    }
}
