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
    self, KernargBlock, Kernel, KernelArgs, PostIo, PreIo, Rows, Scratch, Step, Steps, WorkspaceLayout, BLOCK, MAX_ARGS,
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

    /// Enqueues a stage's steps ([`recipe`]) after the op's checks.
    fn run(&self, stream: &Stream, steps: std::result::Result<Steps, String>, t: usize) -> Result<()> {
        let steps = steps.map_err(|e| Error::shape("launch", e, format!("T = {t}")))?;
        for step in steps.as_slice() {
            match step {
                Step::Copy { dst, src, bytes } => {
                    // SAFETY: the recipe copies the static layer's logits (checked f32 tensors of
                    // the copied sizes) into the logits region of this plan's workspace (inside
                    // it: `enter` checked its size); both live until the stream ran the copy.
                    unsafe { result::mem::dtod_async(stream.hip(), *dst, *src, *bytes, stream.raw())? }
                }
                Step::Post { grid, args } => self.launch(stream, *grid, args)?,
                Step::Pre { grid, args } => self.launch(stream, *grid, args)?,
                Step::Coeffs { grid, args } => self.launch(stream, *grid, args)?,
                Step::Static { grid, args } => self.launch(stream, *grid, args)?,
                Step::RmsNorm { grid, args } => self.launch(stream, *grid, args)?,
            }
        }
        Ok(())
    }

    fn scratch(&self, ws: &Workspace) -> Scratch {
        Scratch { base: ws.device_ptr(), layout: self.ws }
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
        let io = self.post_io(t, x, f, h_post, h_res, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(stream, recipe::post_steps(&self.cfg, self.dtype, t, &io), t)
    }

    /// Checks `post`'s views for `t` tokens.
    fn post_io(
        &self,
        t: usize,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out: &DeviceTensorMut<'_>,
    ) -> Result<PostIo> {
        let (n, c) = (self.cfg.n, self.cfg.c);
        self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
        self.act("f", f.ptr, f.len, f.dtype, &f.layout, t, c)?;
        h_post.check_dense_f32("h_post", t, n)?;
        h_res.check_dense_f32("h_res", t, n * n)?;
        self.act("out", out.ptr, out.len, out.dtype, &out.layout, t, n * c)?;
        if out.layout.row_stride != x.layout.row_stride {
            return Err(Error::shape(
                "out",
                format!("row stride {} (that of x)", x.layout.row_stride),
                out.layout.row_stride,
            ));
        }
        Ok(PostIo {
            x: Rows { ptr: x.ptr, stride: x.layout.row_stride },
            f: Rows { ptr: f.ptr, stride: f.layout.row_stride },
            h_post: h_post.ptr,
            h_res: h_res.ptr,
            out: out.ptr,
        })
    }

    /// Checks `pre`'s input, parameters and outputs for `t` tokens.
    fn pre_io(
        &self,
        t: usize,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &PreOutViews<'_>,
    ) -> Result<PreIo> {
        let (n, c, k, m) = (self.cfg.n, self.cfg.c, self.cfg.k(), self.cfg.m());
        self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, k)?;
        check_param(&params.phi, "phi", m * k)?;
        check_param(&params.scale, "scale", 3)?;
        check_param(&params.base, "base", m)?;
        let presence = |what: &'static str, want: bool| {
            Error::shape(
                what,
                if want { "present (cfg.gamma_f)" } else { "absent" },
                if want { "absent" } else { "present" },
            )
        };
        let gamma_f = match (&params.gamma_f, self.cfg.gamma_f) {
            (Some(g), true) => {
                check_param(g, "gamma_f", c)?;
                Some(g.ptr)
            }
            (None, false) => None,
            (_, want) => return Err(presence("gamma_f", want)),
        };
        let a = &out.a;
        self.act("a", a.ptr, a.len, a.dtype, &a.layout, t, c)?;
        let y = match (&out.y, self.cfg.gamma_f) {
            (Some(y), true) => {
                self.act("y", y.ptr, y.len, y.dtype, &y.layout, t, c)?;
                Some(Rows { ptr: y.ptr, stride: y.layout.row_stride })
            }
            (None, false) => None,
            (_, want) => return Err(presence("y", want)),
        };
        out.h_pre.check_dense_f32("h_pre", t, n)?;
        out.h_post.check_dense_f32("h_post", t, n)?;
        out.h_res.check_dense_f32("h_res", t, n * n)?;
        out.inv_rms.check_dense_f32("inv_rms", t, 1)?;
        Ok(PreIo {
            x: Rows { ptr: x.ptr, stride: x.layout.row_stride },
            phi: params.phi.ptr,
            scale: params.scale.ptr,
            base: params.base.ptr,
            gamma_f,
            a: Rows { ptr: a.ptr, stride: a.layout.row_stride },
            y,
            h_pre: out.h_pre.ptr,
            h_post: out.h_post.ptr,
            h_res: out.h_res.ptr,
            inv_rms: out.inv_rms.ptr,
        })
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
        let io = self.pre_io(t, x, params, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(stream, recipe::pre_steps(&self.cfg, self.dtype, t, &self.scratch(ws), &io, None), t)
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
        let post_io = self.post_io(t, x, &post.f, &post.h_post, &post.h_res, x_out)?;
        let io = self.pre_io(t, x, params, out)?;
        // The post prologue of one workgroup writes x_out while others still read x.
        let span = |ptr: u64, l: &Layout| (ptr, ptr + (l.required_len().unwrap_or(0) * self.dtype.size()) as u64);
        let ((x0, x1), (o0, o1)) = (span(x.ptr, &x.layout), span(x_out.ptr, &x_out.layout));
        if t > 0 && x0 < o1 && o0 < x1 {
            return Err(Error::shape("x_out", "a buffer not overlapping x", "an overlapping one"));
        }
        if t == 0 {
            return Ok(());
        }
        self.run(stream, recipe::pre_steps(&self.cfg, self.dtype, t, &self.scratch(ws), &io, Some(&post_io)), t)
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
        self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, k)?;
        check_param(phi, "phi", n * k)?;
        check_param(scale, "scale", 1)?;
        check_param(base, "base", n)?;
        self.act("out", out.ptr, out.len, out.dtype, &out.layout, t, c)?;
        if t == 0 {
            return Ok(());
        }
        let x = Rows { ptr: x.ptr, stride: x.layout.row_stride };
        let out = Rows { ptr: out.ptr, stride: out.layout.row_stride };
        let steps =
            recipe::head_steps(&self.cfg, self.dtype, t, &self.scratch(ws), x, phi.ptr, scale.ptr, base.ptr, out);
        self.run(stream, steps, t)
    }

    /// The static layer (mHC.cu parity): the logits are gathered into the workspace (three
    /// stream-ordered copies), `mhc_coeffs` turns them into `h_pre`, `h_post`, `h_res` once
    /// (Paper start and order, on the raw logits), and `mhc_static` applies them to every
    /// token. `x` and `out` share their row stride.
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
        self.act("x", x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
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
        let steps = recipe::static_steps(
            &self.cfg,
            self.dtype,
            t,
            &self.scratch(ws),
            consts.device_ptr(),
            Rows { ptr: x.ptr, stride: x.layout.row_stride },
            [h_pre_logits.ptr, h_post_logits.ptr, h_res_logits.ptr],
            gamma.ptr,
            out.ptr,
        );
        self.run(stream, steps, t)
    }
}
