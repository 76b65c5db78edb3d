//! Plans: a layer configuration bound to a HIP device, with the gfx942 kernels of every stage
//! it can run loaded up front, and the ops. Each op validates its views in O(1) (dtype, rows,
//! row length against the storage, strides, alignment, through [`crate::Layout::check`] like
//! the CUDA device), then enqueues exactly the launches of the stage's recipe
//! ([`super::recipe`]): one `hipModuleLaunchKernel` per kernel (`post` 1, `pre` 1, or 2 with
//! the F-pre-norm, `head` 1, `static` 2, `post_pre` 1 or 2: `mhc_pre`'s post prologue does the
//! merge). Nothing is launched or written when a check fails.

use super::device::{Function, HipDevice};
use super::memory::{DeviceBuffer, DeviceTensor, DeviceTensorMut};
use super::recipe::{
    self, CoeffsArgs, KernargBlock, Kernel, KernelArgs, PostArgs, PreArgs, RmsNormArgs, StaticArgs, WorkspaceLayout,
    ACT_BF16, BLOCK, COEFFS_PAPER, MAX_ARGS, PRE_BF16, PRE_HEAD, PRE_PAPER, PRE_POST,
};
use super::result;
use super::stream::Stream;
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::error::{Error, Result};
use crate::tensor::Layout;
use std::ffi::c_void;

/// Position of a stage in [`Stage::ALL`].
const fn stage_index(s: Stage) -> usize {
    match s {
        Stage::Pre => 0,
        Stage::Post => 1,
        Stage::PostPre => 2,
        Stage::Head => 3,
        Stage::Expand => 4,
        Stage::Static => 5,
        Stage::Sinkhorn => 6,
        Stage::PreBackward => 7,
        Stage::PostBackward => 8,
        Stage::HeadBackward => 9,
        Stage::StaticBackward => 10,
    }
}

/// A configuration on a HIP device: the kernels of every stage it supports, loaded and checked.
pub struct Plan {
    dev: HipDevice,
    cfg: Config,
    dtype: Dtype,
    max_tokens: usize,
    /// Per stage: supported, or its [`Error::NoVariant`].
    stages: Vec<Result<()>>,
    /// Per kernel slot: loaded if some supported stage needs it.
    funcs: [Option<Function>; Kernel::ALL.len()],
    ws: WorkspaceLayout,
    /// The static layer's constant coefficient inputs ([`recipe::static_constants`]).
    consts: Option<DeviceBuffer>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("device", &self.dev)
            .field("cfg", &self.cfg)
            .field("dtype", &self.dtype)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// The parameters of `pre` on the device: `phi [M, n*C]` (with `gamma_k` folded in, see
/// [`recipe::stage_kernels`]), `scale [3]`, `base [M]`, and `gamma_f [C]` exactly when the
/// configuration asks for it; all dense f32.
#[derive(Debug, Clone, Copy)]
pub struct PreParamViews<'a> {
    pub phi: DeviceTensor<'a>,
    pub scale: DeviceTensor<'a>,
    pub base: DeviceTensor<'a>,
    pub gamma_f: Option<DeviceTensor<'a>>,
}

/// Where `pre` writes: `a` (and `y` iff `cfg.gamma_f`) T rows of C in the plan's dtype;
/// `h_pre`, `h_post` `[T, n]`, `h_res` `[T, n, n]`, `inv_rms` `[T]` dense f32.
#[derive(Debug)]
pub struct PreOutViews<'a> {
    pub a: DeviceTensorMut<'a>,
    pub y: Option<DeviceTensorMut<'a>>,
    pub h_pre: DeviceTensorMut<'a>,
    pub h_post: DeviceTensorMut<'a>,
    pub h_res: DeviceTensorMut<'a>,
    pub inv_rms: DeviceTensorMut<'a>,
}

/// What `post_pre` adds to `pre`'s inputs: layer l's sublayer output and coefficients.
#[derive(Debug, Clone, Copy)]
pub struct PostInViews<'a> {
    pub f: DeviceTensor<'a>,
    pub h_post: DeviceTensor<'a>,
    pub h_res: DeviceTensor<'a>,
}

/// The scratch memory of a plan's ops, zeroed once; `mhc_pre` leaves its tile counters at zero,
/// so the workspace is reusable without a memset.
pub struct Workspace {
    buf: DeviceBuffer,
}

impl Workspace {
    /// Takes `buf` as the workspace of `plan` (it must hold `plan.workspace_bytes()`), zeroing it.
    pub fn from_buffer(plan: &Plan, buf: DeviceBuffer) -> Result<Self> {
        if buf.bytes() < plan.workspace_bytes() {
            return Err(Error::shape("workspace", format!(">= {} bytes", plan.workspace_bytes()), buf.bytes()));
        }
        if !buf.same_device(&plan.dev) {
            return Err(Error::NoDevice("the workspace belongs to another device than the plan".into()));
        }
        buf.upload(&vec![0u8; buf.bytes()])?;
        Ok(Workspace { buf })
    }
    pub fn device_ptr(&self) -> u64 {
        self.buf.device_ptr()
    }
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}

/// Element strides and counts are 32-bit kernel arguments.
fn arg_u32(what: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::shape(what, "< 2^32 (a 32-bit kernel argument)", v))
}

/// A dense f32 parameter of exactly `len` elements, as one row or as dense rows (`[n, n]`).
fn check_param(v: &DeviceTensor<'_>, what: &'static str, len: usize) -> Result<()> {
    let l = v.layout;
    if l.tokens.checked_mul(l.row_len) != Some(len) || (l.tokens > 1 && l.row_stride != l.row_len) {
        return Err(Error::shape(
            what,
            format!("{len} dense f32 values"),
            format!("{} rows of {}", l.tokens, l.row_len),
        ));
    }
    v.check(what, Dtype::F32, l.tokens, l.row_len, 4)
}

impl Plan {
    /// Validates `cfg`, and loads the kernels of every stage the gfx942 build can run for it. A
    /// stage without kernels for this configuration is recorded with its
    /// [`Error::NoVariant`], which its op returns; `new` itself fails only on a bad
    /// configuration or a load failure.
    pub fn new(dev: &HipDevice, cfg: Config, dtype: Dtype, max_tokens: usize) -> Result<Self> {
        cfg.validate()?;
        if dtype == Dtype::F64 {
            return Err(Error::Config { what: "dtype", reason: "HIP kernels store bf16 or f32, not f64".into() });
        }
        if max_tokens == 0 || max_tokens > i32::MAX as usize {
            return Err(Error::Config { what: "max_tokens", reason: format!("must be in 1..2^31, got {max_tokens}") });
        }
        let mut funcs = [None; Kernel::ALL.len()];
        let mut stages = Vec::with_capacity(Stage::ALL.len());
        for stage in Stage::ALL {
            stages.push(match recipe::stage_kernels(stage, &cfg, dtype) {
                Ok(kernels) => {
                    for &k in kernels {
                        if funcs[k.slot()].is_none() {
                            funcs[k.slot()] = Some(dev.function(k)?);
                        }
                    }
                    Ok(())
                }
                Err(reason) => Err(Error::NoVariant {
                    stage: stage.name().into(),
                    arch: dev.arch().name().into(),
                    shape: format!("n={} C={} {} {}", cfg.n, cfg.c, dtype, cfg.formulation),
                    rejected: vec![reason],
                }),
            });
        }
        let consts = if stages[stage_index(Stage::Static)].is_ok() {
            Some(DeviceBuffer::from_slice(dev, &recipe::static_constants(&cfg))?)
        } else {
            None
        };
        let ws = WorkspaceLayout::new(&cfg, max_tokens);
        Ok(Plan { dev: dev.clone(), cfg, dtype, max_tokens, stages, funcs, ws, consts })
    }

    pub fn device(&self) -> &HipDevice {
        &self.dev
    }
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }
    pub fn formulation(&self) -> Formulation {
        self.cfg.formulation
    }

    /// Bytes of the workspace the ops need ([`Plan::new_workspace`]).
    pub fn workspace_bytes(&self) -> usize {
        self.ws.total
    }

    /// A zeroed workspace of [`Plan::workspace_bytes`].
    pub fn new_workspace(&self) -> Result<Workspace> {
        Ok(Workspace { buf: DeviceBuffer::zeroed(&self.dev, self.ws.total.max(256))? })
    }

    /// Whether `stage` runs in this plan (else the reason).
    pub fn supports(&self, stage: Stage) -> Result<()> {
        self.stages[stage_index(stage)].clone()
    }

    /// The loaded kernels (for `mhc inspect` and tests).
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.funcs.iter().flatten()
    }

    /// The launch-path preamble of every op: the stage is supported, `t` within the plan, the
    /// stream and workspace on this device.
    #[inline]
    fn enter(&self, stage: Stage, t: usize, stream: &Stream, ws: Option<&Workspace>) -> Result<()> {
        if let Err(e) = &self.stages[stage_index(stage)] {
            return Err(e.clone());
        }
        if t > self.max_tokens {
            return Err(Error::shape("tokens", format!("<= max_tokens = {}", self.max_tokens), t));
        }
        if !stream.same_device(&self.dev) {
            return Err(Error::NoDevice("the stream belongs to another device than the plan".into()));
        }
        if let Some(ws) = ws {
            if ws.bytes() < self.ws.total || !ws.buf.same_device(&self.dev) {
                return Err(Error::shape(
                    "workspace",
                    format!("this plan's workspace (>= {} bytes on its device)", self.ws.total),
                    ws.bytes(),
                ));
            }
        }
        Ok(())
    }

    /// Checks an activation view: the plan's dtype, `t` rows of `row_len`, element-aligned,
    /// stride a 32-bit argument.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn act(
        &self,
        what: &'static str,
        ptr: u64,
        len: usize,
        dtype: Dtype,
        l: &Layout,
        t: usize,
        row_len: usize,
    ) -> Result<u32> {
        super::memory::check_view(what, ptr, len, dtype, l, self.dtype, t, row_len, self.dtype.size())?;
        arg_u32(what, l.row_stride)
    }

    fn flags(&self) -> u32 {
        if self.dtype == Dtype::Bf16 {
            ACT_BF16
        } else {
            0
        }
    }

    /// One launch of the kernel `A` is for: the kernarg block written from `args` through the
    /// layout resolved at load, one `kernelParams` pointer per explicit argument.
    #[inline]
    fn launch<A: KernelArgs>(&self, stream: &Stream, grid: [u32; 3], args: &A) -> Result<()> {
        let f = self.funcs[A::KERNEL.slot()].as_ref().ok_or_else(|| Error::BadCodeObject {
            image: A::KERNEL.image().into(),
            reason: format!("{} was not loaded by this plan", A::KERNEL.entry()),
        })?;
        let mut block = KernargBlock::default();
        f.layout
            .write(args, &mut block)
            .map_err(|reason| Error::BadCodeObject { image: A::KERNEL.image().into(), reason })?;
        let mut params = [std::ptr::null_mut::<c_void>(); MAX_ARGS];
        let mut count = 0;
        for off in f.layout.param_offsets() {
            params[count] = block.bytes.as_mut_ptr().wrapping_add(off) as *mut c_void;
            count += 1;
        }
        // SAFETY: `params` holds one pointer per explicit argument, in metadata order, into a
        // block laid out by the metadata's offsets and sizes (checked at load); it lives until
        // the call returns (the runtime copies the arguments at enqueue). The op validated every
        // device range in `args` against what this grid reads and writes.
        unsafe { result::launch(stream.hip(), f.raw, grid, [BLOCK, 1, 1], 0, stream.raw(), &mut params[..count]) }
    }

    /// `post` (MATH.md stage 4): `out = h_post f + h_res-mix of x`, one launch. `x` and `out`
    /// must share their row stride (the kernel takes one).
    pub fn post(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let t = x.layout.tokens;
        self.enter(Stage::Post, t, stream, None)?;
        let args = self.post_args(t, x, f, h_post, h_res, out.ptr, out.len, out.dtype, &out.layout)?;
        if t == 0 {
            return Ok(());
        }
        self.launch(stream, recipe::post_grid(t, self.cfg.c).map_err(|e| Error::shape("tokens", e, t))?, &args)
    }

    #[allow(clippy::too_many_arguments)]
    fn post_args(
        &self,
        t: usize,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out_ptr: u64,
        out_len: usize,
        out_dtype: Dtype,
        out_layout: &Layout,
    ) -> Result<PostArgs> {
        let (n, c) = (self.cfg.n, self.cfg.c);
        let x_stride = self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
        let f_stride = self.act("f", f.ptr, f.len, f.dtype, &f.layout, t, c)?;
        h_post.check_dense_f32("h_post", t, n)?;
        h_res.check_dense_f32("h_res", t, n * n)?;
        self.act("out", out_ptr, out_len, out_dtype, out_layout, t, n * c)?;
        if out_layout.row_stride != x.layout.row_stride {
            return Err(Error::shape(
                "out",
                format!("row stride {} (that of x)", x.layout.row_stride),
                out_layout.row_stride,
            ));
        }
        let (si, sj) = recipe::post_res_strides(self.cfg.formulation, n);
        Ok(PostArgs {
            x: x.ptr,
            f: f.ptr,
            h_post: h_post.ptr,
            h_res: h_res.ptr,
            out: out_ptr,
            tokens: arg_u32("tokens", t)?,
            streams: n as u32,
            channels: arg_u32("C", c)?,
            x_stride,
            f_stride,
            res_si: si as u32,
            res_sj: sj as u32,
            flags: self.flags(),
        })
    }

    /// Checks `pre`'s parameters and outputs for `t` tokens (the input `x` is checked by the caller).
    fn pre_checks(&self, t: usize, params: &PreParamViews<'_>, out: &PreOutViews<'_>) -> Result<(u32, Option<u32>)> {
        let (n, c, k, m) = (self.cfg.n, self.cfg.c, self.cfg.k(), self.cfg.m());
        check_param(&params.phi, "phi", m * k)?;
        check_param(&params.scale, "scale", 3)?;
        check_param(&params.base, "base", m)?;
        match (&params.gamma_f, self.cfg.gamma_f) {
            (Some(g), true) => check_param(g, "gamma_f", c)?,
            (None, false) => {}
            (_, want) => {
                return Err(Error::shape(
                    "gamma_f",
                    if want { "present" } else { "absent" },
                    if want { "absent" } else { "present" },
                ))
            }
        }
        let a = &out.a;
        let a_stride = self.act("a", a.ptr, a.len, a.dtype, &a.layout, t, c)?;
        let y_stride = match (&out.y, self.cfg.gamma_f) {
            (Some(y), true) => Some(self.act("y", y.ptr, y.len, y.dtype, &y.layout, t, c)?),
            (None, false) => None,
            (_, want) => {
                return Err(Error::shape(
                    "y",
                    if want { "present" } else { "absent" },
                    if want { "absent" } else { "present" },
                ))
            }
        };
        out.h_pre.check_dense_f32("h_pre", t, n)?;
        out.h_post.check_dense_f32("h_post", t, n)?;
        out.h_res.check_dense_f32("h_res", t, n * n)?;
        out.inv_rms.check_dense_f32("inv_rms", t, 1)?;
        Ok((a_stride, y_stride))
    }

    /// `mhc_pre` (+ `mhc_rmsnorm` with `gamma_f`) on `x` at `x_ptr` (row stride `x_stride`);
    /// with `post`, the kernel's post prologue first writes `post.out` from `x` and the pre
    /// part runs on it.
    #[allow(clippy::too_many_arguments)]
    fn pre_launch(
        &self,
        stream: &Stream,
        ws: &Workspace,
        t: usize,
        x_ptr: u64,
        x_stride: u32,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        strides: (u32, Option<u32>),
        post: Option<&PostArgs>,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let g = recipe::pre_splits(t, cfg.k());
        let grid = recipe::pre_grid(t, g).map_err(|e| Error::shape("tokens", e, t))?;
        let mut flags = if self.dtype == Dtype::Bf16 { PRE_BF16 } else { 0 };
        if cfg.formulation == Formulation::Paper {
            flags |= PRE_PAPER;
        }
        if post.is_some() {
            flags |= PRE_POST;
        }
        let p = post.copied().unwrap_or_default();
        let args = PreArgs {
            x: x_ptr,
            phi: params.phi.ptr,
            scale: params.scale.ptr,
            base: params.base.ptr,
            h_pre: out.h_pre.ptr,
            h_post: out.h_post.ptr,
            h_res: out.h_res.ptr,
            inv_rms: out.inv_rms.ptr,
            a: out.a.ptr,
            work: ws.device_ptr() + self.ws.scratch as u64,
            counter: ws.device_ptr(),
            tokens: t as u32,
            streams: cfg.n as u32,
            channels: cfg.c as u32,
            x_stride,
            a_stride: strides.0,
            splits: g as u32,
            iters: cfg.sinkhorn_iters,
            eps_norm: cfg.eps_norm as f32,
            eps_hc: cfg.eps_hc as f32,
            flags,
            f: p.f,
            post_h_post: p.h_post,
            post_h_res: p.h_res,
            out: p.out,
            f_stride: p.f_stride,
            res_si: p.res_si,
            res_sj: p.res_sj,
        };
        self.launch(stream, grid, &args)?;
        if let (Some(y), Some(gamma), Some(y_stride)) = (&out.y, &params.gamma_f, strides.1) {
            let args = RmsNormArgs {
                a: out.a.ptr,
                gamma: gamma.ptr,
                out: y.ptr,
                tokens: t as u32,
                channels: cfg.c as u32,
                a_stride: strides.0,
                y_stride,
                eps_f: cfg.eps_f as f32,
                flags: self.flags(),
            };
            self.launch(stream, recipe::token_grid(t).map_err(|e| Error::shape("tokens", e, t))?, &args)?;
        }
        Ok(())
    }

    /// `pre` (MATH.md stages 1-3, plus the F-pre-norm with `gamma_f`): one `mhc_pre` launch
    /// (split K over G workgroups per 4-token tile when T <= 64, the last one finishing), then
    /// `mhc_rmsnorm` when the configuration has `gamma_f`.
    pub fn pre(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
    ) -> Result<()> {
        let t = x.layout.tokens;
        self.enter(Stage::Pre, t, stream, Some(ws))?;
        let x_stride = self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, self.cfg.k())?;
        let strides = self.pre_checks(t, params, out)?;
        if t == 0 {
            return Ok(());
        }
        self.pre_launch(stream, ws, t, x.ptr, x_stride, params, out, strides, None)
    }

    /// `post` of layer l then `pre` of layer l+1 on its output `x_out`, in one `mhc_pre` launch
    /// (its post prologue writes `x_out`), then `mhc_rmsnorm` with `gamma_f`. `x_out` shares
    /// `x`'s row stride.
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
    ) -> Result<()> {
        let t = x.layout.tokens;
        self.enter(Stage::PostPre, t, stream, Some(ws))?;
        let post_args =
            self.post_args(t, x, &post.f, &post.h_post, &post.h_res, x_out.ptr, x_out.len, x_out.dtype, &x_out.layout)?;
        let strides = self.pre_checks(t, params, out)?;
        if t == 0 {
            return Ok(());
        }
        self.pre_launch(stream, ws, t, x.ptr, post_args.x_stride, params, out, strides, Some(&post_args))
    }

    /// `head` (the final collapse): one `mhc_pre` launch in head mode (M = n logits, sigmoid
    /// weights, no Sinkhorn); its weights and RMS go to the workspace. `phi [n, n*C]`,
    /// `scale [1]`, `base [n]`; `out` T rows of C.
    #[allow(clippy::too_many_arguments)]
    pub fn head(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c, k) = (self.cfg.n, self.cfg.c, self.cfg.k());
        let t = x.layout.tokens;
        self.enter(Stage::Head, t, stream, Some(ws))?;
        let x_stride = self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, k)?;
        check_param(phi, "phi", n * k)?;
        check_param(scale, "scale", 1)?;
        check_param(base, "base", n)?;
        let a_stride = self.act("out", out.ptr, out.len, out.dtype, &out.layout, t, c)?;
        if t == 0 {
            return Ok(());
        }
        let g = recipe::pre_splits(t, k);
        let [work, h, r, _] = recipe::head_scratch(t, &self.cfg);
        let base_ptr = ws.device_ptr() + self.ws.scratch as u64;
        let mut flags = PRE_HEAD | if self.dtype == Dtype::Bf16 { PRE_BF16 } else { 0 };
        if self.cfg.formulation == Formulation::Paper {
            flags |= PRE_PAPER;
        }
        let h_ptr = base_ptr + h as u64;
        let args = PreArgs {
            x: x.ptr,
            phi: phi.ptr,
            scale: scale.ptr,
            base: base.ptr,
            h_pre: h_ptr,
            // Unused in head mode; pointed at the weights so no stray address reaches the kernel.
            h_post: h_ptr,
            h_res: h_ptr,
            inv_rms: base_ptr + r as u64,
            a: out.ptr,
            work: base_ptr + work as u64,
            counter: ws.device_ptr(),
            tokens: t as u32,
            streams: n as u32,
            channels: c as u32,
            x_stride,
            a_stride,
            splits: g as u32,
            iters: self.cfg.sinkhorn_iters,
            eps_norm: self.cfg.eps_norm as f32,
            eps_hc: self.cfg.eps_hc as f32,
            flags,
            ..PreArgs::default()
        };
        self.launch(stream, recipe::pre_grid(t, g).map_err(|e| Error::shape("tokens", e, t))?, &args)
    }

    /// The static layer (mHC.cu parity): the logits are gathered into the workspace (three
    /// stream-ordered copies), `mhc_coeffs` turns them into `h_pre`, `h_post`, `h_res` once
    /// (Paper start and order, with `inv_rms = 1`, `scale = 1`, `base = 0`: the raw logits), and
    /// `mhc_static` applies them to every token. `x` and `out` share their row stride.
    #[allow(clippy::too_many_arguments)]
    pub fn static_layer(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        h_pre_logits: &DeviceTensor<'_>,
        h_post_logits: &DeviceTensor<'_>,
        h_res_logits: &DeviceTensor<'_>,
        gamma: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c) = (self.cfg.n, self.cfg.c);
        let t = x.layout.tokens;
        self.enter(Stage::Static, t, stream, Some(ws))?;
        let x_stride = self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
        check_param(h_pre_logits, "h_pre_logits", n)?;
        check_param(h_post_logits, "h_post_logits", n)?;
        check_param(h_res_logits, "h_res_logits", n * n)?;
        check_param(gamma, "gamma", c)?;
        self.act("out", out.ptr, out.len, out.dtype, &out.layout, t, n * c)?;
        if out.layout.row_stride != x.layout.row_stride {
            return Err(Error::shape(
                "out",
                format!("row stride {} (that of x)", x.layout.row_stride),
                out.layout.row_stride,
            ));
        }
        let consts = self
            .consts
            .as_ref()
            .ok_or_else(|| Error::Config { what: "plan", reason: "static constants were not created".into() })?;
        if t == 0 {
            return Ok(());
        }
        let [lg, hp, hq, hr, _] = recipe::static_scratch(&self.cfg);
        let base = ws.device_ptr() + self.ws.scratch as u64;
        let hip = stream.hip();
        // SAFETY: the three sources hold n, n and n*n f32 (checked above); the destination is the
        // logits region of this plan's workspace (M = n + n + n*n floats, inside `ws`, checked
        // by `enter`); all of them live until the stream ran the copies (borrowed by the caller).
        unsafe {
            result::mem::dtod_async(hip, base + lg as u64, h_pre_logits.ptr, n * 4, stream.raw())?;
            result::mem::dtod_async(hip, base + (lg + n * 4) as u64, h_post_logits.ptr, n * 4, stream.raw())?;
            result::mem::dtod_async(hip, base + (lg + 8 * n) as u64, h_res_logits.ptr, n * n * 4, stream.raw())?;
        }
        let k = consts.device_ptr();
        let coeffs = CoeffsArgs {
            p: base + lg as u64,
            inv_rms: k,
            scale: k + 4,
            base: k + 16,
            h_pre: base + hp as u64,
            h_post: base + hq as u64,
            h_res: base + hr as u64,
            tokens: 1,
            streams: n as u32,
            iters: self.cfg.sinkhorn_iters,
            eps_hc: self.cfg.eps_hc as f32,
            flags: COEFFS_PAPER,
            p_stride: self.cfg.m() as u32,
        };
        self.launch(stream, recipe::coeffs_grid(1).map_err(|e| Error::shape("tokens", e, 1))?, &coeffs)?;
        let args = StaticArgs {
            x: x.ptr,
            h_pre: coeffs.h_pre,
            h_post: coeffs.h_post,
            h_res: coeffs.h_res,
            gamma: gamma.ptr,
            out: out.ptr,
            tokens: t as u32,
            streams: n as u32,
            channels: c as u32,
            x_stride,
            eps_f: self.cfg.eps_f as f32,
            flags: self.flags(),
        };
        self.launch(stream, recipe::token_grid(t).map_err(|e| Error::shape("tokens", e, t))?, &args)
    }
}
