//! Plans: a layer configuration bound to a HIP device, with the gfx942 kernels of every stage
//! it can run loaded up front, and the ops. Each op validates its views in O(1) (dtype, rows,
//! row length against the storage, strides, alignment, through [`crate::Layout::check`] like
//! the CUDA device, and that no output overlaps another argument), then enqueues exactly the
//! launches of the stage's recipe ([`super::recipe`]): one `hipModuleLaunchKernel` per kernel
//! (`post` 1, `pre` 1, or 2 with the F-pre-norm, `head` 1, `static` 2, `post_pre` 1 or 2:
//! `mhc_pre`'s post prologue does the merge, `expand` 1). Nothing is launched or written when a
//! check fails.

use super::device::{Function, HipDevice};
use super::memory::{DeviceBuffer, DeviceTensor, DeviceTensorMut};
use super::recipe::{
    self, KernargBlock, Kernel, KernelArgs, PostIo, PreIo, Rows, Scratch, Step, Steps, WorkspaceLayout, BLOCK, MAX_ARGS,
};
use super::result;
use super::stream::Stream;
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::device::view::{check_disjoint, post_pre_disjoint, pre_disjoint};
use crate::error::{Error, Result};
use crate::plan::{Ranges, Slot};
use crate::tensor::Layout;
use mhc_loader::Variant;
use std::ffi::c_void;

/// A configuration on a HIP device: the kernels of every stage it supports, loaded and checked.
pub struct Plan {
    /// Identity of this plan (its workspaces carry it).
    id: u64,
    dev: HipDevice,
    cfg: Config,
    dtype: Dtype,
    max_tokens: usize,
    /// Per [`Slot`]: the catalogue rows chosen per token range, or why the stage has none.
    stages: Vec<Result<Ranges<&'static Variant>>>,
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

/// The parameters of `pre` (see [`crate::device::view::PreParamViews`]).
pub type PreParamViews<'a> = crate::device::view::PreParamViews<'a, super::memory::DeviceBuffer>;

/// Where `pre` writes (see [`crate::device::view::PreOutViews`]).
pub type PreOutViews<'a> = crate::device::view::PreOutViews<'a, super::memory::DeviceBuffer>;

/// Layer l's side of `post_pre` (see [`crate::device::view::PostInViews`]).
pub type PostInViews<'a> = crate::device::view::PostInViews<'a, super::memory::DeviceBuffer>;

/// The scratch memory of a plan's ops, zeroed once; `mhc_pre` leaves its tile counters at zero,
/// so the workspace is reusable without a memset. Ops that share a workspace must run in order:
/// use one workspace per stream. A kernel fault can leave a counter non-zero; make a new
/// workspace (or [`Workspace::from_buffer`], which zeroes) after one.
pub struct Workspace {
    buf: DeviceBuffer,
    binding: crate::plan::Binding,
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
        Ok(Workspace { buf, binding: crate::plan::Binding::new(plan.id) })
    }
    /// The workspace's device address.
    pub fn device_ptr(&self) -> u64 {
        self.buf.device_ptr()
    }
    /// Size of the workspace, bytes (at least the plan's `workspace_bytes()`).
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}

/// Element strides and counts are 32-bit kernel arguments.
fn arg_u32(what: &'static str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| Error::shape(what, "< 2^32 (a 32-bit kernel argument)", v))
}

/// A dense f32 parameter of exactly `len` elements, as one row or as dense rows (`[n, n]`).
fn check_param(device: u32, v: &DeviceTensor<'_>, what: &'static str, len: usize) -> Result<()> {
    let l = v.layout;
    if l.tokens.checked_mul(l.row_len) != Some(len) || (l.tokens > 1 && l.row_stride != l.row_len) {
        return Err(Error::shape(
            what,
            format!("{len} dense f32 values"),
            format!("{} rows of {}", l.tokens, l.row_len),
        ));
    }
    v.check(device, what, Dtype::F32, l.tokens, l.row_len, 4)
}

/// The O(1) checks of every op's views against a configuration and storage dtype (no device
/// needed: the unit tests run them on raw views).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ViewCheck {
    pub(crate) cfg: Config,
    pub(crate) dtype: Dtype,
    /// The plan's device (ordinal + 1), which every view must be on (0: not checked).
    pub(crate) device: u32,
}

impl ViewCheck {
    /// Checks an activation view: the plan's dtype, `t` rows of `row_len`, element-aligned,
    /// stride a 32-bit argument.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn act(
        &self,
        what: &'static str,
        view_device: u32,
        ptr: u64,
        len: usize,
        dtype: Dtype,
        l: &Layout,
        t: usize,
        row_len: usize,
    ) -> Result<u32> {
        crate::device::view::check_device(what, view_device, self.device)?;
        crate::device::view::check_view(what, ptr, len, dtype, l, self.dtype, t, row_len, self.dtype.size())?;
        arg_u32(what, l.row_stride)
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
        self.act("x", x.device, x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
        self.act("f", f.device, f.ptr, f.len, f.dtype, &f.layout, t, c)?;
        h_post.check_dense_f32(self.device, "h_post", t, n)?;
        h_res.check_dense_f32(self.device, "h_res", t, n * n)?;
        self.act("out", out.device, out.ptr, out.len, out.dtype, &out.layout, t, n * c)?;
        if out.layout.row_stride != x.layout.row_stride {
            return Err(Error::shape(
                "out",
                format!("row stride {} (that of x)", x.layout.row_stride),
                out.layout.row_stride,
            ));
        }
        check_disjoint(&[out.span("out")], &[x.span("x"), f.span("f"), h_post.span("h_post"), h_res.span("h_res")])?;
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
        self.act("x", x.device, x.ptr, x.len, x.dtype, &x.layout, t, k)?;
        check_param(self.device, &params.phi, "phi", m * k)?;
        check_param(self.device, &params.scale, "scale", 3)?;
        check_param(self.device, &params.base, "base", m)?;
        let presence = |what: &'static str, want: bool| {
            Error::shape(
                what,
                if want { "present (the configuration asks for it)" } else { "absent" },
                if want { "absent" } else { "present" },
            )
        };
        let gamma_k = match (&params.gamma_k, self.cfg.gamma_k) {
            (Some(g), true) => {
                check_param(self.device, g, "gamma_k", k)?;
                Some(g.ptr)
            }
            (None, false) => None,
            (_, want) => return Err(presence("gamma_k", want)),
        };
        let gamma_f = match (&params.gamma_f, self.cfg.gamma_f) {
            (Some(g), true) => {
                check_param(self.device, g, "gamma_f", c)?;
                Some(g.ptr)
            }
            (None, false) => None,
            (_, want) => return Err(presence("gamma_f", want)),
        };
        let a = &out.a;
        self.act("a", a.device, a.ptr, a.len, a.dtype, &a.layout, t, c)?;
        let y = match (&out.y, self.cfg.gamma_f) {
            (Some(y), true) => {
                self.act("y", y.device, y.ptr, y.len, y.dtype, &y.layout, t, c)?;
                Some(Rows { ptr: y.ptr, stride: y.layout.row_stride })
            }
            (None, false) => None,
            (_, want) => return Err(presence("y", want)),
        };
        out.h_pre.check_dense_f32(self.device, "h_pre", t, n)?;
        out.h_post.check_dense_f32(self.device, "h_post", t, n)?;
        out.h_res.check_dense_f32(self.device, "h_res", t, n * n)?;
        out.inv_rms.check_dense_f32(self.device, "inv_rms", t, 1)?;
        pre_disjoint(x, params, out)?;
        Ok(PreIo {
            x: Rows { ptr: x.ptr, stride: x.layout.row_stride },
            phi: params.phi.ptr,
            scale: params.scale.ptr,
            base: params.base.ptr,
            gamma_k,
            gamma_f,
            a: Rows { ptr: a.ptr, stride: a.layout.row_stride },
            y,
            h_pre: out.h_pre.ptr,
            h_post: out.h_post.ptr,
            h_res: out.h_res.ptr,
            inv_rms: out.inv_rms.ptr,
        })
    }

    /// Checks `head`'s views: `x [T, nC]`, `phi [n, nC]`, `scale [1]`, `base [n]`, `out [T, C]`.
    fn head_io(
        &self,
        t: usize,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &DeviceTensorMut<'_>,
    ) -> Result<(Rows, Rows)> {
        let (n, c, k) = (self.cfg.n, self.cfg.c, self.cfg.k());
        self.act("x", x.device, x.ptr, x.len, x.dtype, &x.layout, t, k)?;
        check_param(self.device, phi, "phi", n * k)?;
        check_param(self.device, scale, "scale", 1)?;
        check_param(self.device, base, "base", n)?;
        self.act("out", out.device, out.ptr, out.len, out.dtype, &out.layout, t, c)?;
        check_disjoint(&[out.span("out")], &[x.span("x"), phi.span("phi"), scale.span("scale"), base.span("base")])?;
        Ok((Rows { ptr: x.ptr, stride: x.layout.row_stride }, Rows { ptr: out.ptr, stride: out.layout.row_stride }))
    }

    /// Checks the static layer's views: `x` and `out` `[T, nC]` sharing a stride, the logits
    /// `[n]`, `[n]`, `[n, n]` and `gamma [C]` dense f32.
    fn static_io(
        &self,
        t: usize,
        x: &DeviceTensor<'_>,
        logits: [&DeviceTensor<'_>; 3],
        gamma: &DeviceTensor<'_>,
        out: &DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c) = (self.cfg.n, self.cfg.c);
        self.act("x", x.device, x.ptr, x.len, x.dtype, &x.layout, t, n * c)?;
        check_param(self.device, logits[0], "h_pre_logits", n)?;
        check_param(self.device, logits[1], "h_post_logits", n)?;
        check_param(self.device, logits[2], "h_res_logits", n * n)?;
        check_param(self.device, gamma, "gamma", c)?;
        self.act("out", out.device, out.ptr, out.len, out.dtype, &out.layout, t, n * c)?;
        if out.layout.row_stride != x.layout.row_stride {
            return Err(Error::shape(
                "out",
                format!("row stride {} (that of x)", x.layout.row_stride),
                out.layout.row_stride,
            ));
        }
        let inputs = [
            x.span("x"),
            logits[0].span("h_pre_logits"),
            logits[1].span("h_post_logits"),
            logits[2].span("h_res_logits"),
            gamma.span("gamma"),
        ];
        check_disjoint(&[out.span("out")], &inputs)
    }

    /// Checks `expand`'s views: `e [T, C]` and `out [T, nC]` in the plan's dtype, not overlapping
    /// (a workgroup's stores must not change what another still loads).
    fn expand_io(&self, t: usize, e: &DeviceTensor<'_>, out: &DeviceTensorMut<'_>) -> Result<(Rows, Rows)> {
        let (n, c) = (self.cfg.n, self.cfg.c);
        self.act("e", e.device, e.ptr, e.len, e.dtype, &e.layout, t, c)?;
        self.act("out", out.device, out.ptr, out.len, out.dtype, &out.layout, t, n * c)?;
        check_disjoint(&[out.span("out")], &[e.span("e")])?;
        Ok((Rows { ptr: e.ptr, stride: e.layout.row_stride }, Rows { ptr: out.ptr, stride: out.layout.row_stride }))
    }
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
        let mut stages = Vec::with_capacity(Slot::ALL.len());
        for slot in Slot::ALL {
            let choices =
                crate::plan::choose(dev.arch(), dev.cu_count(), &cfg, dtype, slot, max_tokens, None, &|_| Ok(()))?;
            let mut ranges = Vec::with_capacity(choices.len());
            for (max, choice) in choices {
                if let Ok(v) = choice {
                    let kernels = recipe::kernels_of(v, &cfg)
                        .map_err(|reason| Error::BadCodeObject { image: v.entry.file.clone(), reason })?;
                    for k in kernels {
                        if funcs[k.slot()].is_none() {
                            funcs[k.slot()] = Some(dev.function(k)?);
                        }
                    }
                }
                ranges.push((max, choice));
            }
            stages.push(Ok(Ranges(ranges)));
        }
        let consts = if stages[Slot::Static.index()].as_ref().is_ok_and(Ranges::any) {
            Some(DeviceBuffer::from_slice(dev, &recipe::static_constants(&cfg))?)
        } else {
            None
        };
        let ws = WorkspaceLayout::new(&cfg, max_tokens);
        Ok(Plan {
            id: crate::plan::next_plan_id(),
            dev: dev.clone(),
            cfg,
            dtype,
            max_tokens,
            stages,
            funcs,
            ws,
            consts,
        })
    }

    /// The device the plan's kernels are loaded on.
    pub fn device(&self) -> &HipDevice {
        &self.dev
    }
    /// The configuration the plan was built for.
    pub fn config(&self) -> &Config {
        &self.cfg
    }
    /// The storage type of the activations (`x`, `f`, `a`, `y`, `out`): bf16 or f32.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// The most tokens one call may pass.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }
    /// The configuration's formulation.
    pub fn formulation(&self) -> Formulation {
        self.cfg.formulation
    }

    /// Bytes of the workspace the ops need ([`Plan::new_workspace`]).
    pub fn workspace_bytes(&self) -> usize {
        self.ws.total
    }

    /// A zeroed workspace of [`Plan::workspace_bytes`].
    pub fn new_workspace(&self) -> Result<Workspace> {
        Ok(Workspace {
            buf: DeviceBuffer::zeroed(&self.dev, self.ws.total.max(256))?,
            binding: crate::plan::Binding::new(self.id),
        })
    }

    /// Whether `stage` runs in this plan at every token count (else the reason).
    pub fn supports(&self, stage: Stage) -> Result<()> {
        let slot = Slot::of(stage).ok_or_else(|| Error::NoVariant {
            stage: stage.name().into(),
            arch: self.dev.arch().name().into(),
            shape: format!("n={} C={}", self.cfg.n, self.cfg.c),
            rejected: vec![format!("no gfx942 kernel computes {stage}")],
        })?;
        self.stages[slot.index()].as_ref().map_err(Clone::clone)?.complete()
    }

    /// The loaded kernels (for `mhc inspect` and tests).
    pub fn functions(&self) -> impl Iterator<Item = &Function> {
        self.funcs.iter().flatten()
    }

    /// The launch-path preamble of every op: the stage is supported, `t` within the plan, the
    /// stream and workspace on this device.
    #[inline]
    fn enter(&self, stage: Stage, t: usize, stream: &Stream, ws: Option<&Workspace>) -> Result<()> {
        self.supports(stage)?;
        if t > self.max_tokens {
            return Err(Error::shape("tokens", format!("<= max_tokens = {}", self.max_tokens), t));
        }
        if !stream.same_device(&self.dev) {
            return Err(Error::NoDevice("the stream belongs to another device than the plan".into()));
        }
        if let Some(ws) = ws {
            ws.binding.check(self.id, stream.raw() as usize)?;
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
                Step::Expand { grid, args } => self.launch(stream, *grid, args)?,
            }
        }
        Ok(())
    }

    fn views(&self) -> ViewCheck {
        ViewCheck { cfg: self.cfg, dtype: self.dtype, device: self.dev.ordinal() as u32 + 1 }
    }

    fn scratch(&self, ws: &Workspace) -> Scratch {
        Scratch { base: ws.device_ptr(), layout: self.ws }
    }

    /// `post` (docs/math.md stage 4): `out = h_post f + h_res-mix of x`, one launch. `x` and `out`
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
        let io = self.views().post_io(t, x, f, h_post, h_res, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(stream, recipe::post_steps(&self.cfg, self.dtype, t, &io), t)
    }

    /// `pre` (docs/math.md stages 1-3, plus the F-pre-norm with `gamma_f`): one `mhc_pre` launch
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
        let io = self.views().pre_io(t, x, params, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(
            stream,
            recipe::pre_steps(
                &self.cfg,
                self.dtype,
                t,
                recipe::pre_splits(t, self.cfg.k()),
                &self.scratch(ws),
                &io,
                None,
            ),
            t,
        )
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
        let post_io = self.views().post_io(t, x, &post.f, &post.h_post, &post.h_res, x_out)?;
        let io = self.views().pre_io(t, x, params, out)?;
        post_pre_disjoint(x, post, x_out, params, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(
            stream,
            recipe::pre_steps(
                &self.cfg,
                self.dtype,
                t,
                recipe::pre_splits(t, self.cfg.k()),
                &self.scratch(ws),
                &io,
                Some(&post_io),
            ),
            t,
        )
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
        let t = x.layout.tokens;
        self.enter(Stage::Head, t, stream, Some(ws))?;
        let (x, out) = self.views().head_io(t, x, phi, scale, base, out)?;
        if t == 0 {
            return Ok(());
        }
        let steps = recipe::head_steps(
            &self.cfg,
            self.dtype,
            t,
            recipe::pre_splits(t, self.cfg.k()),
            &self.scratch(ws),
            x,
            phi.ptr,
            scale.ptr,
            base.ptr,
            out,
        );
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
        let t = x.layout.tokens;
        self.enter(Stage::Static, t, stream, Some(ws))?;
        self.views().static_io(t, x, [h_pre_logits, h_post_logits, h_res_logits], gamma, out)?;
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

    /// `expand` (docs/math.md, "expand"): `out[t][i][:] = e[t][:]` for every stream i, one
    /// `mhc_expand` launch. `e` T rows of C, `out` T rows of `n*C` (the plan's dtype, any row
    /// strides), not overlapping.
    pub fn expand(&self, stream: &Stream, e: &DeviceTensor<'_>, out: &mut DeviceTensorMut<'_>) -> Result<()> {
        let t = e.layout.tokens;
        self.enter(Stage::Expand, t, stream, None)?;
        let (e, out) = self.views().expand_io(t, e, out)?;
        if t == 0 {
            return Ok(());
        }
        self.run(stream, recipe::expand_steps(&self.cfg, self.dtype, t, e, out), t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::testing::Rng;

    /// A view of a fake device address: the checks only read pointer, length, dtype and layout.
    fn view(ptr: u64, len: usize, dtype: Dtype, layout: Layout) -> DeviceTensor<'static> {
        // SAFETY: the view is only validated, never dereferenced or launched on.
        unsafe { DeviceTensor::from_raw(ptr, len, dtype, layout) }
    }
    fn view_mut(ptr: u64, len: usize, dtype: Dtype, layout: Layout) -> DeviceTensorMut<'static> {
        // SAFETY: as above.
        unsafe { DeviceTensorMut::from_raw(ptr, len, dtype, layout) }
    }
    fn dense(rows: usize, len: usize) -> DeviceTensor<'static> {
        view(0x10_0000, rows * len, Dtype::F32, Layout::dense(rows, len))
    }

    #[test]
    fn post_views_are_checked_in_full() {
        let (n, c, t) = (4, 136, 5);
        let v = ViewCheck { cfg: Config::new(n, c), dtype: Dtype::Bf16, device: 0 };
        let xl = Layout::dense(t, n * c).with_stride(n * c + 8);
        let x = view(0x1000, t * (n * c + 8), Dtype::Bf16, xl);
        let f = view(0x2000, t * c, Dtype::Bf16, Layout::dense(t, c));
        let (hp, hr) = (dense(t, n), dense(t, n * n));
        let out = view_mut(0x8000, t * (n * c + 8), Dtype::Bf16, xl);
        let io = v.post_io(t, &x, &f, &hp, &hr, &out).unwrap();
        assert_eq!((io.x.stride, io.f.stride, io.out), (n * c + 8, c, 0x8000));

        let bad_dtype = view(0x1000, t * n * c, Dtype::F32, Layout::dense(t, n * c));
        assert!(matches!(v.post_io(t, &bad_dtype, &f, &hp, &hr, &out), Err(Error::Dtype { tensor: "x", .. })));
        let short_f = view(0x2000, t * c - 1, Dtype::Bf16, Layout::dense(t, c));
        assert!(matches!(v.post_io(t, &x, &short_f, &hp, &hr, &out), Err(Error::Shape { what: "f", .. })));
        let odd = view(0x1001, t * (n * c + 8), Dtype::Bf16, xl);
        assert!(matches!(v.post_io(t, &odd, &f, &hp, &hr, &out), Err(Error::Alignment { tensor: "x", required: 2 })));
        let null = view(0, t * (n * c + 8), Dtype::Bf16, xl);
        assert!(matches!(v.post_io(t, &null, &f, &hp, &hr, &out), Err(Error::Alignment { tensor: "x", .. })));
        let strided_res = view(0x3000, t * 20, Dtype::F32, Layout::dense(t, n * n).with_stride(20));
        assert!(matches!(v.post_io(t, &x, &f, &hp, &strided_res, &out), Err(Error::Shape { what: "h_res", .. })));
        let dense_out = view_mut(0x8000, t * n * c, Dtype::Bf16, Layout::dense(t, n * c));
        assert!(matches!(v.post_io(t, &x, &f, &hp, &hr, &dense_out), Err(Error::Shape { what: "out", .. })));
        let wrong_t = view(0x2000, 6 * c, Dtype::Bf16, Layout::dense(6, c));
        assert!(matches!(v.post_io(t, &x, &wrong_t, &hp, &hr, &out), Err(Error::Shape { what: "f", .. })));
        // A stride beyond the kernels' 32-bit arguments.
        let huge = Layout::dense(1, n * c).with_stride(1 << 33);
        let x_huge = view(0x1000, n * c, Dtype::Bf16, huge);
        assert!(matches!(
            v.post_io(1, &x_huge, &dense(1, c), &dense(1, n), &dense(1, n * n), &out),
            Err(Error::Shape { .. })
        ));
    }

    #[test]
    fn pre_head_and_static_views_are_checked_in_full() {
        let (n, c, t) = (2, 64, 3);
        let cfg = Config { gamma_f: true, ..Config::new(n, c) };
        let v = ViewCheck { cfg, dtype: Dtype::F32, device: 0 };
        let (k, m) = (cfg.k(), cfg.m());
        let x = view(0x1000, t * k, Dtype::F32, Layout::dense(t, k));
        let params = |gamma_f| PreParamViews {
            phi: view(0x2000, m * k, Dtype::F32, Layout::dense(m, k)),
            scale: dense(1, 3),
            base: dense(1, m),
            gamma_k: None,
            gamma_f,
        };
        let outs = |y: Option<DeviceTensorMut<'static>>, inv_rms_len: usize| PreOutViews {
            a: view_mut(0x5000, t * c, Dtype::F32, Layout::dense(t, c)),
            y,
            h_pre: view_mut(0x6000, t * n, Dtype::F32, Layout::dense(t, n)),
            h_post: view_mut(0x7000, t * n, Dtype::F32, Layout::dense(t, n)),
            h_res: view_mut(0x8000, t * n * n, Dtype::F32, Layout::dense(t, n * n)),
            inv_rms: view_mut(0x9000, inv_rms_len, Dtype::F32, Layout::dense(t, 1)),
        };
        let y = || Some(view_mut(0xa000, t * c, Dtype::F32, Layout::dense(t, c)));
        let io = v.pre_io(t, &x, &params(Some(dense(1, c))), &outs(y(), t)).unwrap();
        assert_eq!((io.gamma_f, io.y.map(|r| r.ptr)), (Some(0x10_0000), Some(0xa000)));
        assert!(matches!(v.pre_io(t, &x, &params(None), &outs(y(), t)), Err(Error::Shape { what: "gamma_f", .. })));
        assert!(matches!(
            v.pre_io(t, &x, &params(Some(dense(1, c))), &outs(None, t)),
            Err(Error::Shape { what: "y", .. })
        ));
        assert!(matches!(
            v.pre_io(t, &x, &params(Some(dense(1, c - 8))), &outs(y(), t)),
            Err(Error::Shape { what: "gamma_f", .. })
        ));
        assert!(matches!(
            v.pre_io(t, &x, &params(Some(dense(1, c))), &outs(y(), t - 1)),
            Err(Error::Shape { what: "inv_rms", .. })
        ));
        let mut p = params(Some(dense(1, c)));
        p.phi = dense(m - 1, k);
        assert!(matches!(v.pre_io(t, &x, &p, &outs(y(), t)), Err(Error::Shape { what: "phi", .. })));

        let out = view_mut(0x5000, t * c, Dtype::F32, Layout::dense(t, c));
        let phi = view(0x2000, n * k, Dtype::F32, Layout::dense(n, k));
        assert!(v.head_io(t, &x, &phi, &dense(1, 1), &dense(1, n), &out).is_ok());
        assert!(matches!(
            v.head_io(t, &x, &phi, &dense(1, 3), &dense(1, n), &out),
            Err(Error::Shape { what: "scale", .. })
        ));

        let xs = view(0x1000, t * k, Dtype::F32, Layout::dense(t, k));
        let os = view_mut(0xb000, t * k, Dtype::F32, Layout::dense(t, k));
        // h_res_logits as one row of n*n or as n dense rows; padded rows are refused.
        for res in [dense(1, n * n), dense(n, n)] {
            assert!(v.static_io(t, &xs, [&dense(1, n), &dense(1, n), &res], &dense(1, c), &os).is_ok());
        }
        let padded = view(0x10_0000, 2 * n + 1, Dtype::F32, Layout::dense(n, n).with_stride(n + 1));
        assert!(matches!(
            v.static_io(t, &xs, [&dense(1, n), &dense(1, n), &padded], &dense(1, c), &os),
            Err(Error::Shape { what: "h_res_logits", .. })
        ));
        let bf = view(0x10_0000, c, Dtype::Bf16, Layout::dense(1, c));
        assert!(matches!(
            v.static_io(t, &xs, [&dense(1, n), &dense(1, n), &dense(1, n * n)], &bf, &os),
            Err(Error::Dtype { tensor: "gamma", .. })
        ));

        // post_pre: x_out in place or overlapping x is refused; adjacent is fine.
        let bytes = (t * k * 4) as u64;
        let post = PostInViews {
            f: view(0xc000, t * c, Dtype::F32, Layout::dense(t, c)),
            h_post: view(0xd000, t * n, Dtype::F32, Layout::dense(t, n)),
            h_res: view(0xe000, t * n * n, Dtype::F32, Layout::dense(t, n * n)),
        };
        let p = params(Some(dense(1, c)));
        for (at, ok) in [(0x1000, false), (0x1000 + bytes - 4, false), (0x1000 + bytes, true), (0x1000 - bytes, true)] {
            let o = view_mut(at, t * k, Dtype::F32, Layout::dense(t, k));
            assert_eq!(post_pre_disjoint(&xs, &post, &o, &p, &outs(y(), t)).is_ok(), ok, "x_out at {at:#x}");
        }
        // ... and the pre outputs may not land on layer l's coefficients or on x_out.
        let x_out = view_mut(0xf000, t * k, Dtype::F32, Layout::dense(t, k));
        assert!(post_pre_disjoint(&xs, &post, &x_out, &p, &outs(y(), t)).is_ok());
        let mut reuse = outs(y(), t);
        reuse.h_post = view_mut(0xd000, t * n, Dtype::F32, Layout::dense(t, n));
        let err = post_pre_disjoint(&xs, &post, &x_out, &p, &reuse).unwrap_err().to_string();
        assert!(err.starts_with("h_post overlaps post h_post"), "{err}");
        let mut into_x_out = outs(y(), t);
        into_x_out.a = view_mut(0xf000, t * c, Dtype::F32, Layout::dense(t, c));
        assert!(matches!(
            post_pre_disjoint(&xs, &post, &x_out, &p, &into_x_out),
            Err(Error::Overlap { tensor: "x_out", other: "a" })
        ));
    }

    #[test]
    fn no_output_may_overlap_another_argument() {
        let (n, c, t) = (2, 64, 3);
        let cfg = Config::new(n, c);
        let v = ViewCheck { cfg, dtype: Dtype::F32, device: 0 };
        let (k, m) = (cfg.k(), cfg.m());
        let x = view(0x1000, t * k, Dtype::F32, Layout::dense(t, k));
        let at = |ptr: u64, rows: usize, len: usize| view_mut(ptr, rows * len, Dtype::F32, Layout::dense(rows, len));
        let overlap = |r: Result<()>| match r {
            Err(Error::Overlap { tensor, other }) => format!("{tensor}: memory overlapping {other}"),
            other => format!("{other:?}"),
        };
        // post: out on x, on f, and clear of both.
        let f = view(0x3000, t * c, Dtype::F32, Layout::dense(t, c));
        let (hp, hr) = (view(0x4000, t * n, Dtype::F32, Layout::dense(t, n)), dense(t, n * n));
        let post = |o: &DeviceTensorMut<'_>| v.post_io(t, &x, &f, &hp, &hr, o).map(|_| ());
        assert_eq!(overlap(post(&at(0x1000, t, k))), "out: memory overlapping x");
        assert_eq!(overlap(post(&at(0x3000 - 4, t, k))), "out: memory overlapping f");
        assert!(post(&at(0x8000, t, k)).is_ok());
        // pre: an output on a parameter, two outputs on one another.
        let params = PreParamViews {
            phi: view(0x2_0000, m * k, Dtype::F32, Layout::dense(m, k)),
            scale: view(0x3_0000, 3, Dtype::F32, Layout::dense(1, 3)),
            base: view(0x3_1000, m, Dtype::F32, Layout::dense(1, m)),
            gamma_k: None,
            gamma_f: None,
        };
        let outs = || PreOutViews {
            a: at(0x5000, t, c),
            y: None,
            h_pre: at(0x6000, t, n),
            h_post: at(0x7000, t, n),
            h_res: at(0x8000, t, n * n),
            inv_rms: at(0x9000, t, 1),
        };
        assert!(v.pre_io(t, &x, &params, &outs()).is_ok());
        let mut o = outs();
        o.inv_rms = at(0x3_1000, t, 1);
        assert_eq!(overlap(v.pre_io(t, &x, &params, &o).map(|_| ())), "inv_rms: memory overlapping base");
        let mut o = outs();
        o.h_post = at(0x6000 + 4, t, n);
        assert_eq!(overlap(v.pre_io(t, &x, &params, &o).map(|_| ())), "h_pre: memory overlapping h_post");
        // head, static, expand: out on an input.
        let phi = view(0x2_0000, n * k, Dtype::F32, Layout::dense(n, k));
        let (scale, base) = (view(0x3_0000, 1, Dtype::F32, Layout::dense(1, 1)), dense(1, n));
        let head = |o: &DeviceTensorMut<'_>| v.head_io(t, &x, &phi, &scale, &base, o).map(|_| ());
        assert_eq!(overlap(head(&at(0x2_0000 + 64, t, c))), "out: memory overlapping phi");
        assert!(head(&at(0x5000, t, c)).is_ok());
        let logits = [view(0x4_0000, n, Dtype::F32, Layout::dense(1, n)), dense(1, n), dense(1, n * n)];
        let gamma = view(0x5_0000, c, Dtype::F32, Layout::dense(1, c));
        let stat = |o: &DeviceTensorMut<'_>| v.static_io(t, &x, [&logits[0], &logits[1], &logits[2]], &gamma, o);
        assert_eq!(overlap(stat(&at(0x4_0000 - 4, t, k))), "out: memory overlapping h_pre_logits");
        assert!(stat(&at(0x8000, t, k)).is_ok());
        let e = view(0x3000, t * c, Dtype::F32, Layout::dense(t, c));
        assert_eq!(overlap(v.expand_io(t, &e, &at(0x2f00, t, k)).map(|_| ())), "out: memory overlapping e");
        assert!(v.expand_io(t, &e, &at(0x8000, t, k)).is_ok());
    }

    /// Randomised calls of every op's view checks (one to three mutations each): none panics,
    /// and whatever is accepted satisfies the contract re-derived in the test (dtypes, rows,
    /// dense parameters, storage long enough, aligned non-null pointers, 32-bit strides, outputs
    /// overlapping nothing else): the checks are what stands between user input and a launch.
    #[test]
    fn randomised_views_are_accepted_only_when_safe() {
        use crate::device::hostile::{config, pre_args, pre_views, trials, Arg, SHAPE};
        let mut rng = Rng::new(Rng::test_seed("hip-view-checks"));
        let ((n, c, t), cfg) = (SHAPE, config());
        let k = cfg.k();
        let (mut refused, mut accepted) = (0, 0);
        for dtype in [Dtype::F32, Dtype::Bf16] {
            let v = ViewCheck { cfg, dtype, device: 0 };
            let act = |i, rows, len, output| Arg::act(i, dtype, rows, len, output);
            let (par, coef) = (Arg::param, Arg::coef);
            let mut run = |what: &str, valid: Vec<Arg>, call: &dyn Fn(&[Arg]) -> Result<()>| {
                let (r, a) = trials(&mut rng, &format!("{what} {dtype}"), &valid, 2000, call);
                (refused, accepted) = (refused + r, accepted + a);
            };
            let post = vec![act(0, t, k, false), act(1, t, c, false), coef(2, t, n, false), coef(3, t, n * n, false)];
            run("post", [post, vec![act(4, t, k, true)]].concat(), &|a| {
                v.post_io(t, &a[0].view(), &a[1].view(), &a[2].view(), &a[3].view(), &a[4].view_mut()).map(|_| ())
            });
            run("pre", pre_args(dtype, n, c, t), &|a| {
                let (params, out) = pre_views(a);
                v.pre_io(t, &a[0].view(), &params, &out).map(|_| ())
            });
            let head = vec![act(0, t, k, false), par(1, n, k), par(2, 1, 1), par(3, 1, n), act(4, t, c, true)];
            run("head", head, &|a| {
                v.head_io(t, &a[0].view(), &a[1].view(), &a[2].view(), &a[3].view(), &a[4].view_mut()).map(|_| ())
            });
            let stat =
                vec![act(0, t, k, false), par(1, 1, n), par(2, 1, n), par(3, n, n), par(4, 1, c), act(5, t, k, true)];
            run("static", stat, &|a| {
                v.static_io(t, &a[0].view(), [&a[1].view(), &a[2].view(), &a[3].view()], &a[4].view(), &a[5].view_mut())
            });
            run("expand", vec![act(0, t, c, false), act(1, t, k, true)], &|a| {
                v.expand_io(t, &a[0].view(), &a[1].view_mut()).map(|_| ())
            });
        }
        eprintln!("view checks: {refused} calls refused, {accepted} accepted");
        assert!(refused > accepted && accepted >= 10, "refused {refused}, accepted {accepted}");
    }
}
