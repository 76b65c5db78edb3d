//! [`CudaRunner`]: the CUDA device behind the [`StageRunner`] seam (`mhc run --device cuda`,
//! and the GPU tests' harness). Per call: check the inputs against the stage's signature, store
//! activations in the requested dtype and parameters in f32 on the device, poison every output
//! with NaN, launch the stage's op once, synchronize, and read the outputs back as f64.

use super::device::CudaDevice;
use super::memory::DeviceBuffer;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::pre::{PostInViews, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::config::{Config, Dtype, Stage};
use crate::error::{Error, Result};
use crate::plan::Tuning;
use crate::runner::{check_finite, resolve_config, signature, Array, Class, Named, Port, StageRunner};
use crate::tensor::Layout;
use half::bf16;

/// Runs stages on one CUDA GPU.
pub struct CudaRunner {
    dev: CudaDevice,
    stream: Stream,
    tuning: Tuning,
}

impl CudaRunner {
    /// Opens GPU `ordinal` (see [`CudaDevice::new`] for the errors).
    pub fn new(ordinal: usize) -> Result<Self> {
        let dev = CudaDevice::new(ordinal)?;
        let stream = Stream::new(&dev)?;
        Ok(CudaRunner { dev, stream, tuning: Tuning::Embedded })
    }

    /// Makes the runner's plans select with `tuning`'s tables ([`Plan::with_tuning`]).
    pub fn set_tuning(&mut self, tuning: Tuning) {
        self.tuning = tuning;
    }
    /// The GPU the stages run on.
    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }
}

/// Host values stored in `dtype` on the device (bf16 rounds once to nearest even).
pub fn upload(dev: &CudaDevice, dtype: Dtype, data: &[f64]) -> Result<DeviceBuffer> {
    match dtype {
        Dtype::F32 => DeviceBuffer::from_slice(dev, &data.iter().map(|&v| v as f32).collect::<Vec<_>>()),
        Dtype::Bf16 => DeviceBuffer::from_slice(dev, &data.iter().map(|&v| crate::bf16_nearest(v)).collect::<Vec<_>>()),
        Dtype::F64 => DeviceBuffer::from_slice(dev, data),
    }
}

/// `len` device values of `dtype`, widened exactly to f64.
pub fn download(buf: &DeviceBuffer, dtype: Dtype, len: usize) -> Result<Vec<f64>> {
    Ok(match dtype {
        Dtype::F32 => {
            let mut v = vec![0f32; len];
            buf.download(&mut v)?;
            v.into_iter().map(f64::from).collect()
        }
        Dtype::Bf16 => {
            let mut v = vec![bf16::ZERO; len];
            buf.download(&mut v)?;
            v.into_iter().map(|x| x.to_f64()).collect()
        }
        Dtype::F64 => {
            let mut v = vec![0f64; len];
            buf.download(&mut v)?;
            v
        }
    })
}

/// The 32-bit fill that makes every element of `dtype` a quiet NaN.
pub const fn nan_pattern(dtype: Dtype) -> u32 {
    match dtype {
        Dtype::F32 => 0x7fc0_0000,
        Dtype::Bf16 => 0x7fc0_7fc0,
        Dtype::F64 => 0x7ff8_0000, // never used: f64 outputs are not produced on the GPU
    }
}

fn view(d: &Dev) -> super::memory::DeviceTensor<'_> {
    d.buf.view(d.dtype, d.layout)
}

/// A device copy of one port's array.
struct Dev {
    buf: DeviceBuffer,
    dtype: Dtype,
    layout: Layout,
}

impl StageRunner for CudaRunner {
    fn name(&self) -> String {
        format!("cuda:{} ({}, {})", self.dev.ordinal(), self.dev.name(), self.dev.arch())
    }

    fn run(&self, stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<Named> {
        if dtype == Dtype::F64 {
            return Err(Error::Config { what: "dtype", reason: "the CUDA device stores bf16 or f32".into() });
        }
        let cfg = resolve_config(stage, cfg, |name| inputs.contains_key(name));
        cfg.validate()?;
        let sig = signature(stage, &cfg);
        let t = sig.check(inputs)?;
        check_finite(&sig, inputs)?;
        let plan = Plan::with_tuning(&self.dev, cfg, dtype, t.max(1), &self.tuning)?;
        plan.supports(stage)?;
        let layout_of = |p: &Port| if p.tokens { Layout::dense(t, p.row_len()) } else { Layout::dense(1, p.row_len()) };
        let storage = |p: &Port| match p.class {
            Class::Activation => dtype,
            Class::Parameter => Dtype::F32,
        };
        let mut ins = std::collections::BTreeMap::new();
        for p in &sig.inputs {
            if let Some(a) = inputs.get(p.name) {
                let dt = storage(p);
                // Parameters are dense rows; a one-row parameter with several dims (phi [M, K],
                // h_res_logits [n, n]) is viewed as rows of its last dimension by the ops.
                let layout =
                    if !p.tokens && p.dims.len() == 2 { Layout::dense(p.dims[0].1, p.dims[1].1) } else { layout_of(p) };
                ins.insert(p.name, Dev { buf: upload(&self.dev, dt, &a.data)?, dtype: dt, layout });
            }
        }
        let mut outs = Vec::new();
        for p in &sig.outputs {
            let dt = storage(p);
            let layout = layout_of(p);
            let len = layout.required_len().unwrap_or(0).max(1);
            let buf = DeviceBuffer::alloc(&self.dev, len * dt.size())?;
            // Poison: an element the kernel fails to write reads back as NaN.
            if (len * dt.size()) % 4 == 0 {
                buf.fill_u32(&self.stream, nan_pattern(dt))?;
            } else {
                buf.upload(&vec![0xffu8; len * dt.size()])?;
            }
            outs.push((p.clone(), Dev { buf, dtype: dt, layout }));
        }
        let get = |name: &str| -> Result<&Dev> {
            ins.get(name).ok_or_else(|| Error::shape("inputs", format!("an input named {name}"), "missing"))
        };
        let s = &self.stream;
        if matches!(stage, Stage::Pre | Stage::PostPre) {
            let views = outs.iter_mut().map(|(p, d)| (p.name, d.buf.view_mut(d.dtype, d.layout))).collect();
            run_pre_stage(&plan, s, stage, &|name| ins.get(name).map(view), views)?;
        }
        {
            let out0 = &mut outs[0].1;
            let mut o = out0.buf.view_mut(out0.dtype, out0.layout);
            match stage {
                Stage::Post => plan.post(
                    s,
                    &view(get("x")?),
                    &view(get("f")?),
                    &view(get("h_post")?),
                    &view(get("h_res")?),
                    &mut o,
                )?,
                Stage::Head => plan.head(
                    s,
                    &view(get("x")?),
                    &view(get("phi")?),
                    &view(get("scale")?),
                    &view(get("base")?),
                    &mut o,
                )?,
                Stage::Static => plan.static_layer(
                    s,
                    &view(get("x")?),
                    &view(get("h_pre_logits")?),
                    &view(get("h_post_logits")?),
                    &view(get("h_res_logits")?),
                    &view(get("gamma")?),
                    &mut o,
                )?,
                Stage::Expand => plan.expand(s, &view(get("e")?), &mut o)?,
                Stage::Pre | Stage::PostPre => {} // launched above (pre.rs)
                other => {
                    return Err(Error::NoVariant {
                        stage: other.name().into(),
                        arch: self.dev.arch().name().into(),
                        shape: format!("n={} C={}", cfg.n, cfg.c),
                        rejected: vec![format!("the CUDA runner has no launch for {other} yet")],
                    })
                }
            }
        }
        self.stream.synchronize()?;
        let mut named = Named::new();
        for (p, d) in &outs {
            let len = d.layout.required_len().unwrap_or(0);
            named.insert(p.name.to_string(), Array::new(p.shape(t), download(&d.buf, d.dtype, len)?));
        }
        Ok(named)
    }
}

/// The `pre` / `post_pre` launch of [`super::CudaRunner`]: inputs by name (`get`), outputs as
/// (name, view) in signature order; allocates a workspace for the call (not the hot path).
fn run_pre_stage<'a>(
    plan: &Plan,
    stream: &Stream,
    stage: Stage,
    get: &dyn Fn(&str) -> Option<DeviceTensor<'a>>,
    outs: Vec<(&'static str, DeviceTensorMut<'_>)>,
) -> Result<()> {
    let need =
        |name: &str| get(name).ok_or_else(|| Error::shape("inputs", format!("an input named {name}"), "missing"));
    let params = PreParamViews {
        phi: need("phi")?,
        scale: need("scale")?,
        base: need("base")?,
        gamma_k: get("gamma_k"),
        gamma_f: get("gamma_f"),
    };
    let mut by_name: std::collections::BTreeMap<&str, DeviceTensorMut<'_>> = outs.into_iter().collect();
    let mut take =
        |name: &str| by_name.remove(name).ok_or_else(|| Error::shape("outputs", name.to_string(), "missing"));
    let x_out = if stage == Stage::PostPre { Some(take("out")?) } else { None };
    let mut out = PreOutViews {
        a: take("a")?,
        y: by_name_take_opt(&mut take, plan.config().gamma_f, "y")?,
        h_pre: take("h_pre")?,
        h_post: take("h_post")?,
        h_res: take("h_res")?,
        inv_rms: take("inv_rms")?,
    };
    let ws = plan.new_workspace()?;
    let x = need("x")?;
    match x_out {
        Some(mut xo) => {
            let post = PostInViews { f: need("f")?, h_post: need("h_post")?, h_res: need("h_res")? };
            plan.post_pre(stream, &ws, &x, &post, &mut xo, &params, &mut out)?;
        }
        None => plan.pre(stream, &ws, &x, &params, &mut out)?,
    }
    // The workspace is freed on drop: wait for the launch first.
    stream.synchronize()
}

fn by_name_take_opt<'v>(
    take: &mut dyn FnMut(&str) -> Result<DeviceTensorMut<'v>>,
    wanted: bool,
    name: &str,
) -> Result<Option<DeviceTensorMut<'v>>> {
    if wanted {
        take(name).map(Some)
    } else {
        Ok(None)
    }
}
