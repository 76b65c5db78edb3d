//! Plans: a layer configuration bound to a device, with every stage's kernels chosen per token
//! range by the loader's selector over the kernel catalogue and loaded up front. The selection
//! runs without a device too ([`planned_kernels`], `mhc inspect --explain`): the only inputs a
//! device adds are its limits ([`DeviceLimits`]) and, for persistent kernels, how many clusters
//! it holds at once. The ops (`ops.rs`) look the bucket up by T, build its launch and enqueue it.

use super::device::{CudaDevice, DeviceLimits, Function};
use super::ffi;
use super::launch::{Bucket, Ctx, LaunchKind, Overlap, Row};
use super::memory::DeviceBuffer;
use super::pre::{self, WsLayout};
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::error::{Error, Result};
use crate::plan::{catalogue, row_index, Binding, Choices, Ranges, Slot, Tuning};
use mhc_loader::{Selector, Trait, Variant};
use std::collections::HashMap;

/// The device's limits of a catalogue row beyond what the catalogue itself filters, for a plan
/// of up to `max_tokens` tokens: every sm_90a kernel addresses a token row in 31-bit byte
/// offsets; some kernels form per-token offsets in 32 bits ([`LaunchKind::offset_limit`],
/// docs/kernels/address-arithmetic.md); the general static kernel keeps a[C] in shared memory;
/// the few-token kernels need their CTAs co-resident (the SM count).
pub(crate) fn launch_limits(
    v: &Variant,
    cfg: &Config,
    dtype: Dtype,
    limits: &DeviceLimits,
    max_tokens: usize,
) -> std::result::Result<(), String> {
    let kind =
        LaunchKind::from_name(&v.entry.launch).ok_or_else(|| format!("no CUDA launcher {:?}", v.entry.launch))?;
    if cfg.k().saturating_mul(dtype.size()) > u32::MAX as usize / 2 {
        return Err(format!("n*C*{} bytes exceed 31 bits", dtype.size()));
    }
    kind.offset_limit(cfg, max_tokens)?;
    match kind {
        LaunchKind::Static if cfg.c * 4 > limits.max_shared_per_block as usize => {
            Err("a[C] does not fit in shared memory".into())
        }
        LaunchKind::PreDecode => pre::decode::decode_limits(cfg, limits.sm_count as usize),
        LaunchKind::PreMid | LaunchKind::PostPreMid => {
            pre::decode::mid_limits(cfg, limits.sm_count as usize, v.entry.tile.tokens as usize)
        }
        _ => Ok(()),
    }
}

/// The choice of `selector` for `slot` of `cfg` in `dtype` at every token count up to
/// `max_tokens` on a device with `limits` ([`crate::plan::choose_with`] with this device's
/// launch limits); `request` restricts it to one launcher, `admit` adds cluster occupancy.
#[allow(clippy::too_many_arguments)]
pub(crate) fn choose(
    selector: &Selector<'static>,
    limits: &DeviceLimits,
    cfg: &Config,
    dtype: Dtype,
    slot: Slot,
    max_tokens: usize,
    request: Option<LaunchKind>,
    admit: &dyn Fn(&Variant) -> std::result::Result<(), String>,
) -> Choices {
    let admit = |v: &Variant| launch_limits(v, cfg, dtype, limits, max_tokens).and_then(|()| admit(v));
    let arch = limits.arch.loader_arch();
    let mut choices =
        crate::plan::choose_with(selector, arch, cfg, dtype, slot, max_tokens, request.map(LaunchKind::name), &admit);
    if slot == Slot::PostPre && request.is_none() {
        let pre = crate::plan::choose_with(selector, arch, cfg, dtype, Slot::Pre, max_tokens, None, &admit);
        folds_follow_pre(&mut choices, &pre.ranges, arch.name());
    }
    choices
}

/// The `pre` entry whose kernel a few-token `post_pre` fold runs (the logit clusters', the mid
/// kernels': the same text with `post` folded in after the loads), or `None` for another kind.
fn folded_pre_entry(v: &Variant) -> Option<String> {
    match LaunchKind::from_name(&v.entry.launch)? {
        LaunchKind::PostPreLogitClusters | LaunchKind::PostPreMid => {
            Some(v.entry.entry.replacen("mhc_post_pre_", "mhc_pre_", 1))
        }
        _ => None,
    }
}

/// How [`folds_follow_pre`]'s reason begins (after the row's id).
const FOLD_RULE: &str = "set aside: pre runs another kernel than this fold's";

/// A few-token fold's outputs are `post` then its own kernel's `pre`, bit for bit, and
/// `post_pre` must give `post` then `pre`'s: where `pre` (`pre_ranges`) runs another kernel at
/// some T of a fold's range (a tuned table that chose one stage alone), that range runs `post`,
/// then `pre` instead, and a warning names the entry that could not apply.
fn folds_follow_pre(post_pre: &mut Choices, pre_ranges: &[crate::plan::Choice], arch: &str) {
    let pre_at = |t: usize| pre_ranges.iter().find(|(max, _)| t <= *max).and_then(|(_, c)| c.as_ref().ok());
    let mut first = 1;
    for (max, choice) in &mut post_pre.ranges {
        let range = (first, *max);
        first = max.saturating_add(1);
        let Ok(v) = choice else { continue };
        let Some(twin) = folded_pre_entry(v) else { continue };
        let last = range.1.min(v.entry.tokens.max as usize);
        let Some(t) = (range.0..=last).find(|&t| pre_at(t).map(|p| p.entry.entry.as_str()) != Some(twin.as_str()))
        else {
            continue;
        };
        let other = pre_at(t).map_or("no kernel".to_string(), |p| p.id().to_string());
        let why = format!("{}: {FOLD_RULE} ({twin}; at T = {t}: {other}), so post, then pre", v.id());
        if !post_pre.warnings.contains(&why) {
            post_pre.warnings.push(why.clone());
        }
        *choice = Err(Error::NoVariant {
            stage: Slot::PostPre.name().into(),
            arch: arch.into(),
            shape: format!("T = {}..{}", range.0, range.1),
            rejected: vec![why],
        });
    }
}

/// A configuration on a device: kernels chosen and loaded for every stage the device has for it.
pub struct Plan {
    /// Identity of this plan (its workspaces carry it).
    pub(crate) id: u64,
    pub(crate) dev: CudaDevice,
    pub(crate) ctx: Ctx,
    pub(crate) overlap: Overlap,
    /// Per [`Slot`]: the token ranges and their buckets, or why the stage has none.
    stages: Vec<Result<Ranges<Bucket>>>,
    /// The `pre` kernels' workspace regions.
    pub(crate) ws: WsLayout,
    workspace_bytes: usize,
    /// The tuned tables the selection followed.
    tuning: Tuning,
    /// Tuned entries the selection ignored, and why.
    warnings: Vec<String>,
    /// The token ranges of each launcher a test or benchmark asked for ([`Plan::requested`]),
    /// selected on its first request: selecting and loading them takes the host tens of
    /// microseconds, which a timed loop of forced launches would otherwise measure instead of
    /// the kernels.
    #[cfg(feature = "testing")]
    requested: std::sync::Mutex<HashMap<(Slot, LaunchKind), Ranges<Bucket>>>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("device", &self.dev)
            .field("cfg", &self.ctx.cfg)
            .field("dtype", &self.ctx.dtype)
            .field("max_tokens", &self.ctx.max_tokens)
            .finish()
    }
}

impl Plan {
    /// Validates `cfg`, selects a kernel for every stage (per token range) and loads it. A stage
    /// without a kernel for this configuration is recorded with its [`Error::NoVariant`], which
    /// its op returns; `new` itself fails only on a bad configuration or a load failure.
    pub fn new(dev: &CudaDevice, cfg: Config, dtype: Dtype, max_tokens: usize) -> Result<Self> {
        Self::with_tuning(dev, cfg, dtype, max_tokens, &Tuning::Embedded)
    }

    /// [`Plan::new`], selecting with `tuning`'s tables (for example the file `mhc tune` wrote
    /// for this GPU, [`Tuning::from_file`]) instead of the embedded ones. Entries that do not
    /// apply (another part's SM count, a changed image, a kernel that cannot run this call) are
    /// ignored and named in [`Plan::tuning_warnings`].
    pub fn with_tuning(
        dev: &CudaDevice,
        cfg: Config,
        dtype: Dtype,
        max_tokens: usize,
        tuning: &Tuning,
    ) -> Result<Self> {
        cfg.validate()?;
        if dtype == Dtype::F64 {
            return Err(Error::Config { what: "dtype", reason: "CUDA kernels store bf16 or f32, not f64".into() });
        }
        if max_tokens == 0 || max_tokens > i32::MAX as usize {
            return Err(Error::Config { what: "max_tokens", reason: format!("must be in 1..2^31, got {max_tokens}") });
        }
        let limits = dev.limits();
        let device = dev.ordinal() as u32 + 1;
        let ctx = Ctx { cfg, dtype, sm_count: dev.sm_count(), max_tokens, arch: dev.arch().name(), device };
        let selector = crate::plan::selector(dev.sm_count(), Some(dev.name()), tuning)?;
        let mut stages = Vec::with_capacity(Slot::ALL.len());
        let mut warnings = Vec::new();
        for slot in Slot::ALL {
            stages.push(Self::plan_stage(&selector, dev, &limits, &ctx, slot, None).map(|(ranges, w)| {
                warnings.extend(w.into_iter().filter(|w| !warnings.contains(w)).collect::<Vec<_>>());
                ranges
            }));
        }
        let ws = pre::workspace::layout(&cfg, dtype, max_tokens);
        let uses_ws = |s: Slot| stages[s.index()].as_ref().is_ok_and(Ranges::any);
        let workspace_bytes = if uses_ws(Slot::Pre) || uses_ws(Slot::PostPre) { ws.total } else { 0 };
        let id = crate::plan::next_plan_id();
        Ok(Plan {
            id,
            dev: dev.clone(),
            ctx,
            overlap: Overlap::default(),
            stages,
            ws,
            workspace_bytes,
            tuning: tuning.clone(),
            warnings,
            #[cfg(feature = "testing")]
            requested: Default::default(),
        })
    }

    /// The tuned tables this plan's selection followed.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// Tuned entries this plan's selection ignored, each with why (empty when every entry that
    /// matched a call applied).
    pub fn tuning_warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The buckets of `slot`: the catalogue's choices with their functions loaded and persistent
    /// grids sized. `Err` only for a load failure or an inconsistent build; a configuration
    /// without kernels is `Ok` with every range's reason.
    fn plan_stage(
        selector: &Selector<'static>,
        dev: &CudaDevice,
        limits: &DeviceLimits,
        ctx: &Ctx,
        slot: Slot,
        request: Option<LaunchKind>,
    ) -> Result<(Ranges<Bucket>, Vec<String>)> {
        // Persistent kernels need whole clusters resident: ask the device once per row.
        let resident: std::cell::RefCell<HashMap<usize, Result<u32>>> = Default::default();
        let occupancy = |v: &Variant| -> std::result::Result<(), String> {
            if !v.has(Trait::Persistent) {
                return logit_clusters_fit(dev, ctx, v).map_err(|e| e.to_string())?;
            }
            let index = row_index(v).map_err(|e| e.to_string())?;
            let r = resident.borrow_mut().entry(index).or_insert_with(|| resident_ctas(dev, ctx, v, index)).clone();
            clusters_fit(v, r)
        };
        let choices = choose(selector, limits, &ctx.cfg, ctx.dtype, slot, ctx.max_tokens, request, &occupancy);
        let mut ranges = Vec::with_capacity(choices.ranges.len());
        for (max_tokens, choice) in choices.ranges {
            let bucket = match choice {
                Ok(variant) => {
                    let slot_index = row_index(variant)?;
                    let kind = LaunchKind::from_name(&variant.entry.launch).ok_or_else(|| Error::BadCodeObject {
                        image: variant.entry.file.clone(),
                        reason: format!("{}: no CUDA launcher {:?}", variant.id(), variant.entry.launch),
                    })?;
                    let func = dev.function(slot_index, kind.arg_bytes())?;
                    let resident_ctas = match resident.borrow().get(&slot_index) {
                        Some(Ok(n)) => *n,
                        _ => resident_ctas(dev, ctx, variant, slot_index)?,
                    };
                    Ok(Bucket { min_tokens: 0, max_tokens, variant, kind, func, resident_ctas })
                }
                Err(e) => Err(e),
            };
            ranges.push((max_tokens, bucket));
        }
        // Each range begins after the previous one.
        let mut start = 1;
        for (max, b) in &mut ranges {
            if let Ok(b) = b {
                b.min_tokens = start;
            }
            start = max.saturating_add(1);
        }
        Ok((Ranges(ranges), choices.warnings))
    }

    /// The same plan with launches overlapping the previous kernel as `overlap` says
    /// ([`Overlap::Launch`] unless changed).
    pub fn with_overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = overlap;
        self
    }

    /// Changes how this plan's launches overlap the previous kernel on the stream.
    pub fn set_overlap(&mut self, overlap: Overlap) {
        self.overlap = overlap;
    }

    /// How this plan's launches overlap the previous kernel on the stream.
    pub fn overlap(&self) -> Overlap {
        self.overlap
    }

    /// The device the plan's kernels are loaded on.
    pub fn device(&self) -> &CudaDevice {
        &self.dev
    }
    /// The configuration the plan was built for.
    pub fn config(&self) -> &Config {
        &self.ctx.cfg
    }
    /// The storage type of the activations (`x`, `f`, `a`, `y`, `out`).
    pub fn dtype(&self) -> Dtype {
        self.ctx.dtype
    }
    /// The most tokens one call may pass.
    pub fn max_tokens(&self) -> usize {
        self.ctx.max_tokens
    }
    /// The configuration's formulation.
    pub fn formulation(&self) -> Formulation {
        self.ctx.cfg.formulation
    }

    /// Bytes of the caller-provided workspace the plan's ops need (0 if none). Allocate it once
    /// with [`Plan::new_workspace`] (or hand in a buffer with [`Workspace::from_buffer`]); the
    /// kernels leave it ready for the next call.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// A zeroed workspace of [`Plan::workspace_bytes`] for this plan and one stream (the first
    /// it is used on).
    pub fn new_workspace(&self) -> Result<Workspace> {
        Ok(Workspace {
            buf: DeviceBuffer::zeroed(&self.dev, self.workspace_bytes.max(256))?,
            binding: Binding::new(self.id),
        })
    }

    /// Whether `stage` has a kernel in this plan for every token count (else the reason).
    /// `post_pre` runs `post` then `pre` where it has no fused kernel.
    pub fn supports(&self, stage: Stage) -> Result<()> {
        let Some(slot) = Slot::of(stage) else {
            return Err(Error::NoVariant {
                stage: stage.name().into(),
                arch: self.ctx.arch.into(),
                shape: format!("n={} C={}", self.ctx.cfg.n, self.ctx.cfg.c),
                rejected: vec![format!("no CUDA kernel computes {stage}")],
            });
        };
        if slot == Slot::PostPre {
            self.supports(Stage::Post)?;
            return self.supports(Stage::Pre);
        }
        self.slot_supports(slot)
    }

    pub(crate) fn slot_supports(&self, slot: Slot) -> Result<()> {
        self.stages[slot.index()].as_ref().map_err(Clone::clone)?.complete()
    }

    /// The kernel chosen for `stage` at `tokens` tokens (launch path: an index and a short scan).
    #[inline]
    pub(crate) fn bucket(&self, slot: Slot, tokens: usize) -> Result<&Bucket> {
        if tokens > self.ctx.max_tokens {
            return Err(Error::shape("tokens", format!("<= max_tokens = {}", self.ctx.max_tokens), tokens));
        }
        self.stages[slot.index()].as_ref().map_err(Clone::clone)?.at(slot, self.ctx.arch, tokens)
    }

    /// The bucket of `stage` at `tokens` tokens when the caller asks for one launcher
    /// (benchmarks and tests): the catalogue's choice among that launcher's rows, selected and
    /// loaded on the first request for the launcher, then kept.
    #[cfg(feature = "testing")]
    pub(crate) fn requested(&self, slot: Slot, kind: LaunchKind, tokens: usize) -> Result<Bucket> {
        use std::collections::hash_map::Entry;
        let mut kept = self.requested.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ranges = match kept.entry((slot, kind)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let limits = self.dev.limits();
                let selector = crate::plan::selector(self.dev.sm_count(), Some(self.dev.name()), &self.tuning)?;
                e.insert(Self::plan_stage(&selector, &self.dev, &limits, &self.ctx, slot, Some(kind))?.0)
            }
        };
        let found = ranges.0.iter().find(|(max, _)| tokens <= *max);
        found.map(|(_, b)| b.clone()).unwrap_or_else(|| {
            Err(Error::NoVariant {
                stage: slot.name().into(),
                arch: self.ctx.arch.into(),
                shape: format!("T={tokens}"),
                rejected: vec![format!("no {} kernel covers this token count", kind.name())],
            })
        })
    }

    /// The kernel `stage` runs at `tokens` tokens (benchmarks and `mhc inspect` name it).
    pub fn kernel_for(&self, stage: Stage, tokens: usize) -> Result<&Bucket> {
        match Slot::of(stage) {
            Some(slot) => self.bucket(slot, tokens),
            None => self.supports(stage).and_then(|()| unreachable_stage(stage)),
        }
    }

    /// Every catalogue row that can run `stage` at `tokens` tokens on this device, in the cost
    /// model's order (its choice first), tuned tables aside: what `mhc tune` measures. `Err`
    /// when no row can ([`Error::NoVariant`], every rejection with its reason).
    pub fn candidates(&self, stage: Stage, tokens: usize) -> Result<Vec<&'static Variant>> {
        let slot = Slot::of(stage).ok_or_else(|| no_slot(stage))?;
        let selector = crate::plan::selector(self.dev.sm_count(), None, &Tuning::CostModel)?;
        let (cfg, dtype, limits) = (&self.ctx.cfg, self.ctx.dtype, self.dev.limits());
        let admit = |v: &Variant| -> std::result::Result<(), String> {
            launch_limits(v, cfg, dtype, &limits, self.ctx.max_tokens)?;
            if !v.has(Trait::Persistent) {
                return Ok(());
            }
            let index = row_index(v).map_err(|e| e.to_string())?;
            clusters_fit(v, resident_ctas(&self.dev, &self.ctx, v, index))
        };
        let shape = crate::plan::shape_of(cfg, dtype, slot).at(tokens as u64);
        let arch = limits.arch.loader_arch();
        match selector.select_with(arch, slot.name(), &shape, &mhc_loader::Budget::default(), &admit) {
            Ok(sel) => {
                let reg = catalogue()?;
                Ok(sel.candidates.iter().filter_map(|c| reg.get(&c.id)).collect())
            }
            Err(nv) => Err(Error::NoVariant {
                stage: slot.name().into(),
                arch: self.ctx.arch.into(),
                shape: nv.shape.clone(),
                rejected: nv.reasons(),
            }),
        }
    }

    /// The selected kernels of `stage`, in token order (for `mhc bench` and `mhc inspect`).
    pub fn buckets(&self, stage: Stage) -> Result<Vec<&Bucket>> {
        let slot = Slot::of(stage).ok_or_else(|| self.supports(stage).err().unwrap_or_else(|| no_slot(stage)))?;
        Ok(self.stages[slot.index()].as_ref().map_err(Clone::clone)?.buckets().collect())
    }
}

fn no_slot(stage: Stage) -> Error {
    Error::NoVariant {
        stage: stage.name().into(),
        arch: "sm_90a".into(),
        shape: String::new(),
        rejected: vec![format!("no CUDA kernel computes {stage}")],
    }
}

fn unreachable_stage(stage: Stage) -> Result<&'static Bucket> {
    Err(no_slot(stage))
}

/// A logit-cluster row's admission (`Ok(Ok(()))` for every other row): one of its 16-CTA
/// clusters, with the shared memory this configuration's C needs, must fit the device (a part
/// or a partition with too few SMs in one GPC, or too little shared memory a CTA, holds none, and
/// its launch would fail). Its clusters never wait for each other, so one at a time is correct.
fn logit_clusters_fit(dev: &CudaDevice, ctx: &Ctx, v: &Variant) -> Result<std::result::Result<(), String>> {
    let post = match LaunchKind::from_name(&v.entry.launch) {
        Some(LaunchKind::PreLogitClusters) => false,
        Some(LaunchKind::PostPreLogitClusters) => true,
        _ => return Ok(Ok(())),
    };
    // The most shared memory any of the row's token counts needs.
    let top = (v.entry.tokens.max as usize).clamp(1, pre::lc::LC_MAX_TOKENS);
    let low = (v.entry.tokens.min as usize).clamp(1, top);
    let shared = (low..=top).map(|t| pre::lc::shape(ctx.cfg.c, t, ctx.dtype, post).2).max().unwrap_or(0);
    let kind = if post { LaunchKind::PostPreLogitClusters } else { LaunchKind::PreLogitClusters };
    let func = dev.function(row_index(v)?, kind.arg_bytes())?;
    let clusters = ffi::occupancy_max_active_clusters(func.raw, v.threads(), shared, v.cluster())?;
    Ok(if clusters >= 1 { Ok(()) } else { Err(format!("no cluster of {} CTAs fits this device", v.cluster())) })
}

/// A persistent row's admission from [`resident_ctas`]: at least one whole cluster must fit.
fn clusters_fit(v: &Variant, resident: Result<u32>) -> std::result::Result<(), String> {
    match resident {
        Ok(0)
            if [LaunchKind::PreClusterPair.name(), LaunchKind::PostPreClusterPair.name()]
                .contains(&v.entry.launch.as_str()) =>
        {
            Err(format!("fewer than two {}-CTA clusters fit this device at once (one per part of C)", v.cluster()))
        }
        Ok(0) => Err(format!("no cluster of {} CTAs fits this device", v.cluster())),
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Persistent kernels (`persistent`, `token_ring`): the CTAs the device holds at once with the
/// shared memory this configuration needs (whole clusters); 0 for the others.
fn resident_ctas(dev: &CudaDevice, ctx: &Ctx, v: &Variant, index: usize) -> Result<u32> {
    let geometry = &v.entry.geometry;
    let kind = LaunchKind::from_name(&v.entry.launch).ok_or_else(|| Error::BadCodeObject {
        image: v.entry.file.clone(),
        reason: format!("{}: no CUDA launcher {:?}", v.id(), v.entry.launch),
    })?;
    if geometry.has(Trait::Persistent) {
        let func = dev.function(index, kind.arg_bytes())?;
        let shared = match kind {
            LaunchKind::Head => super::head::persistent_shared_bytes(v, &ctx.cfg, ctx.dtype),
            other => pre::cluster::ring_bytes_of(other, ctx.cfg.c) as u32,
        };
        let clusters = ffi::occupancy_max_active_clusters(func.raw, v.threads(), shared, geometry.cluster)?;
        if matches!(kind, LaunchKind::PreClusterPair | LaunchKind::PostPreClusterPair) {
            return Ok(pre::cluster::pair_ctas(clusters.max(0) as u32, geometry.cluster));
        }
        return Ok(clusters.max(0) as u32 * geometry.cluster);
    }
    if geometry.has(Trait::TokenRing) {
        let func = dev.function(index, kind.arg_bytes())?;
        let shared = super::static_layer::token_ring_bytes(v, ctx.cfg.c, ctx.cfg.n, ctx.dtype) as u32;
        let per_sm = super::static_layer::resident_ctas(func.registers, v.threads(), shared + func.static_shared_bytes);
        return Ok(dev.sm_count() * per_sm);
    }
    Ok(0)
}

impl CudaDevice {
    /// Loads and checks every kernel of this architecture's catalogue rows against its
    /// launcher's argument block (tests and `mhc inspect` use it).
    pub fn load_all(&self) -> Result<Vec<Function>> {
        let arch = self.arch().loader_arch();
        let reg = catalogue()?;
        let mut out = Vec::new();
        for (i, v) in reg.variants().iter().enumerate().filter(|(_, v)| v.arch.runs_on(arch)) {
            let kind = LaunchKind::from_name(&v.entry.launch).ok_or_else(|| Error::BadCodeObject {
                image: v.entry.file.clone(),
                reason: format!("{}: no CUDA launcher {:?}", v.id(), v.entry.launch),
            })?;
            out.push(self.function(i, kind.arg_bytes())?);
        }
        Ok(out)
    }
}

/// One kernel a plan launches for a stage call, as [`planned_kernels`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedKernel {
    /// The catalogue stage whose kernel it is (`post_pre` without its fused kernel: `post`, then
    /// `pre`).
    pub stage: String,
    /// The catalogue row.
    pub variant: String,
    /// The kernel's entry symbol.
    pub entry: String,
    /// The code object it is in (repository path).
    pub image: String,
    /// The selector's account: the query, the winner and why, every candidate's rank and cost,
    /// every rejected row of the stage with its reason.
    pub explain: String,
}

/// The kernels a plan for `cfg` in `dtype` launches for one call of catalogue stage `stage`
/// (`pre`, `post`, `post_pre`, `head`, `expand`, `static`, `coeffs`) at `tokens` tokens on a
/// device with `limits` named `gpu` (tuned entries for one GPU apply only with its name), in
/// launch order, each with the selector's account: the plan's own selection, run without a
/// device (`mhc inspect --explain`). It assumes what only a device can say: the images load and
/// a persistent kernel's clusters fit.
pub fn planned_kernels(
    limits: &DeviceLimits,
    gpu: Option<&str>,
    cfg: &Config,
    dtype: Dtype,
    stage: &str,
    tokens: usize,
    tuning: &Tuning,
) -> Result<Vec<PlannedKernel>> {
    cfg.validate()?;
    if tokens == 0 {
        return Err(Error::shape("tokens", ">= 1", tokens));
    }
    let slot = Slot::named(stage).ok_or_else(|| Error::Config {
        what: "stage",
        reason: format!("{stage:?} has no CUDA kernels; the stages are {}", Slot::ALL.map(Slot::name).join(", ")),
    })?;
    let selector = crate::plan::selector(limits.sm_count, gpu, tuning)?;
    let choice = choose(&selector, limits, cfg, dtype, slot, tokens, None, &|_| Ok(())).ranges.pop().map(|(_, c)| c);
    let choice = choice.unwrap_or_else(|| Err(no_slot_named(stage)));
    let variant = match (slot, choice) {
        (_, Ok(v)) => v,
        (Slot::PostPre, Err(no_fused)) => {
            // Where no fused kernel serves T (or a tuned entry chose two launches): post, then
            // pre; the first kernel's account says why.
            let mut kernels = planned_kernels(limits, gpu, cfg, dtype, "post", tokens, tuning)?;
            kernels.extend(planned_kernels(limits, gpu, cfg, dtype, "pre", tokens, tuning)?);
            if let Some(first) = kernels.first_mut() {
                first.explain = format!("{}{}", why_two_launches(&no_fused), first.explain);
            }
            return Ok(kernels);
        }
        (_, Err(e)) => return Err(e),
    };
    let admit = |v: &Variant| launch_limits(v, cfg, dtype, limits, tokens);
    let mut explain = crate::plan::explain(&selector, limits.arch.loader_arch(), cfg, dtype, slot, tokens, &admit)?;
    if let Some(launch) = launch_account(variant, cfg, dtype, limits, tokens) {
        explain += &format!("launch at T={tokens} on {} SMs: {launch}", limits.sm_count);
    }
    Ok(vec![PlannedKernel {
        stage: slot.name().to_string(),
        variant: variant.id().to_string(),
        entry: variant.entry.entry.clone(),
        image: variant.entry.file.clone(),
        explain,
    }])
}

/// The host-side choices of `v`'s launch at `tokens` tokens in words, where its launcher makes
/// any (the `pre` family's grids, K splits and channel slices), from the functions the launcher
/// itself calls; `None` for launchers whose grid follows from the row and T alone.
fn launch_account(v: &Variant, cfg: &Config, dtype: Dtype, limits: &DeviceLimits, tokens: usize) -> Option<String> {
    let sms = limits.sm_count as usize;
    let (t, c) = (tokens, cfg.c);
    Some(match LaunchKind::from_name(&v.entry.launch)? {
        LaunchKind::Pre => pre::general::account(cfg, dtype, t, sms, false),
        LaunchKind::PostPre => pre::general::account(cfg, dtype, t, sms, true),
        LaunchKind::PreGemm => pre::gemm::account(cfg.n, c, t, sms),
        LaunchKind::PreDecode => pre::decode::account(cfg, sms, t, false),
        LaunchKind::PreMid | LaunchKind::PostPreMid => pre::decode::account(cfg, sms, t, true),
        LaunchKind::PreLogitClusters => pre::lc::account(c, t, dtype, false),
        LaunchKind::PostPreLogitClusters => pre::lc::account(c, t, dtype, true),
        kind @ (LaunchKind::PreCluster
        | LaunchKind::PreClusterTma
        | LaunchKind::PreClusterPair
        | LaunchKind::PostPreCluster
        | LaunchKind::PostPreClusterPair) => pre::cluster::account(kind, c, t, v.cluster()),
        LaunchKind::Post | LaunchKind::Head | LaunchKind::Static | LaunchKind::Expand | LaunchKind::Coeffs => {
            return None
        }
    })
}

/// Why `post_pre` runs as two launches: the tuned entry that chose them, or every fused row's
/// rejection.
fn why_two_launches(no_fused: &Error) -> String {
    let Error::NoVariant { rejected, .. } = no_fused else {
        return format!("post_pre runs as two launches: {no_fused}\n");
    };
    // Each rejection reads "row: reason"; a tuned entry's reason is the same for every row.
    let marker = mhc_loader::select::CHOSE_POST_THEN_PRE;
    let tuned = rejected.iter().find_map(|r| r.split_once(": ").map(|(_, why)| why).filter(|w| w.starts_with(marker)));
    if let Some(fold) = rejected.iter().find(|r| r.split_once(": ").is_some_and(|(_, why)| why.starts_with(FOLD_RULE)))
    {
        return format!("post_pre runs as two launches: {fold}\n");
    }
    match tuned {
        Some(why) => format!("post_pre runs as two launches: {why}\n"),
        None => {
            let lines: String = rejected.iter().map(|r| format!("  rejected {r}\n")).collect();
            format!("post_pre runs as two launches: no fused kernel serves this call\n{lines}")
        }
    }
}

fn no_slot_named(stage: &str) -> Error {
    Error::NoVariant {
        stage: stage.into(),
        arch: "sm_90a".into(),
        shape: String::new(),
        rejected: vec![format!("no CUDA kernel computes {stage}")],
    }
}

/// The scratch memory of a plan's ops, zeroed once at creation; kernels that use it restore
/// it (counters back to zero) before they finish, so it is reusable without a memset. It
/// belongs to the plan that made it and serves one stream (the first it is used on): every op
/// checks both, so another plan's workspace or a second stream is an error, not a race.
pub struct Workspace {
    pub(crate) buf: DeviceBuffer,
    pub(crate) binding: Binding,
}

impl Workspace {
    /// Takes `buf` as the workspace of `plan` (it must hold `plan.workspace_bytes()` and be on
    /// the plan's device), zeroing it.
    pub fn from_buffer(plan: &Plan, buf: DeviceBuffer) -> Result<Self> {
        if buf.bytes() < plan.workspace_bytes() {
            return Err(Error::shape("workspace", format!(">= {} bytes", plan.workspace_bytes()), buf.bytes()));
        }
        if buf.device_id() != plan.ctx.device {
            return Err(Error::Device {
                tensor: "workspace",
                tensor_device: buf.device_id() - 1,
                plan_device: plan.ctx.device - 1,
            });
        }
        let zero = vec![0u8; buf.bytes()];
        buf.upload(&zero)?;
        Ok(Workspace { buf, binding: Binding::new(plan.id) })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::CudaArch;
    use crate::Formulation;

    /// The catalogue's token ranges of `stage` up to `max` tokens on the flagship part (the cost
    /// model, no tuned table), as (last count, entry); the first range without a kernel is the
    /// error.
    fn entries(stage: Stage, cfg: Config, dtype: Dtype, max: usize) -> Result<Vec<(usize, &'static str)>> {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let slot = Slot::of(stage).unwrap();
        let selector = crate::plan::selector(limits.sm_count, None, &Tuning::CostModel).unwrap();
        choose(&selector, &limits, &cfg, dtype, slot, max, None, &|_| Ok(()))
            .ranges
            .into_iter()
            .map(|(m, v)| v.map(|v| (m, v.entry.entry.as_str())))
            .collect()
    }

    #[test]
    fn post_has_a_decode_bucket_for_few_tokens() {
        let cfg = Config::new(4, 4096);
        assert_eq!(
            entries(Stage::Post, cfg, Dtype::Bf16, 8192).unwrap(),
            vec![(64, "mhc_post_v4_bf16_n4_v2"), (usize::MAX, "mhc_post_v4_bf16_n4")]
        );
        assert_eq!(entries(Stage::Post, cfg, Dtype::Bf16, 8).unwrap(), vec![(usize::MAX, "mhc_post_v4_bf16_n4_v2")]);
        let paper = cfg.with_formulation(Formulation::Paper);
        assert_eq!(entries(Stage::Post, paper, Dtype::F32, 100).unwrap()[1].1, "mhc_post_paper_f32_n4");
        // n = 32: lane-per-stream decode up to 16 tokens, the V = 2 kernel up to 64, then tensor
        // cores (bf16, where the x tile fits shared memory).
        assert_eq!(
            entries(Stage::Post, Config::new(32, 1280), Dtype::Bf16, 8192).unwrap(),
            vec![
                (16, "mhc_post_v4_bf16_n32_lk"),
                (64, "mhc_post_v4_bf16_n32"),
                (usize::MAX, "mhc_post_mma_v4_bf16_n32")
            ]
        );
        // n = 16: the V = 4 kernel keeps up to 399 tokens (measured crossover 384..448, H100).
        let paper16 = Config::new(16, 7032).with_formulation(Formulation::Paper);
        let post16 = entries(Stage::Post, paper16, Dtype::Bf16, 8192).unwrap();
        assert_eq!(post16[1], (399, "mhc_post_paper_bf16_n16"));
        assert_eq!(post16[2].1, "mhc_post_mma_paper_bf16_n16");
        for (n, c, dtype) in [(32, 1280, Dtype::F32), (32, 3520, Dtype::Bf16), (16, 7040, Dtype::Bf16)] {
            let last = entries(Stage::Post, Config::new(n, c), dtype, 8192).unwrap().last().unwrap().1;
            assert_eq!(last, format!("mhc_post_v4_{}_n{n}", dtype.name()), "n={n} C={c} {dtype}");
        }
        // n = 8: the decode kernel up to 64 tokens, then the general one.
        assert_eq!(
            entries(Stage::Post, Config::new(8, 1280), Dtype::Bf16, 8192).unwrap(),
            vec![(64, "mhc_post_v4_bf16_n8_v2"), (usize::MAX, "mhc_post_v4_bf16_n8")]
        );
    }

    #[test]
    fn head_takes_the_cluster_kernels_where_their_tiles_fit() {
        let ty = |dtype: Dtype| if dtype == Dtype::Bf16 { "bf16" } else { "f32" };
        for (n, c, dtype) in
            [(4, 4096, Dtype::Bf16), (4, 7168, Dtype::Bf16), (4, 4096, Dtype::F32), (1, 64, Dtype::F32)]
        {
            let (cld, cl) = (format!("mhc_head_cld_{}_n{n}", ty(dtype)), format!("mhc_head_cl_{}_n{n}", ty(dtype)));
            let got = |max| entries(Stage::Head, Config::new(n, c), dtype, max).unwrap();
            assert_eq!(got(1), vec![(usize::MAX, cld.as_str())]);
            assert_eq!(got(16), vec![(usize::MAX, cld.as_str())]);
            // The persistent kernel: 4-CTA clusters while n C esize <= 32 KiB (the items a CTA
            // holds), 8-CTA clusters up to twice that.
            let pc = if n * c * dtype.size() <= 32768 { "pc4" } else { "pc8" };
            let pc = format!("mhc_head_{pc}_{}_n{n}", ty(dtype));
            assert_eq!(got(8192), vec![(16, cld.as_str()), (512, cl.as_str()), (usize::MAX, pc.as_str())]);
        }
        // Many tokens with C beyond the persistent kernel's registers and ring (n * C / V / 8 >
        // 512 chunks per CTA): the one-CTA-per-tile kernel.
        for (n, c, dtype, one) in [(4, 8200, Dtype::Bf16, "mhc_head_bf16_n4"), (4, 4104, Dtype::F32, "mhc_head_f32_n4")]
        {
            assert_eq!(entries(Stage::Head, Config::new(n, c), dtype, 8192).unwrap().last().unwrap().1, one);
        }
        // n = 8: the cluster kernel up to 256 tokens (measured), then the one-CTA-per-tile kernel.
        assert_eq!(
            entries(Stage::Head, Config::new(8, 1280), Dtype::Bf16, 8192).unwrap(),
            vec![(16, "mhc_head_cld_bf16_n8"), (256, "mhc_head_cl_bf16_n8"), (usize::MAX, "mhc_head_bf16_n8")]
        );
        // n = 16, 32: 16-CTA clusters up to 16 tokens, 8-CTA clusters up to 256 (measured), then
        // one CTA per tile; a tile beyond shared memory and C below one chunk per CTA keep the
        // latter.
        for n in [16, 32] {
            let (cl16, cl, one) =
                (format!("mhc_head_cl16_bf16_n{n}"), format!("mhc_head_cl_bf16_n{n}"), format!("mhc_head_bf16_n{n}"));
            assert_eq!(
                entries(Stage::Head, Config::new(n, 1280), Dtype::Bf16, 8192).unwrap(),
                vec![(16, cl16.as_str()), (256, cl.as_str()), (usize::MAX, one.as_str())]
            );
        }
        assert_eq!(
            entries(Stage::Head, Config::new(4, 7168), Dtype::F32, 64).unwrap(),
            vec![(16, "mhc_head_cld_f32_n4"), (usize::MAX, "mhc_head_f32_n4")]
        );
        assert_eq!(entries(Stage::Head, Config::new(4, 56), Dtype::Bf16, 64).unwrap()[0].1, "mhc_head_bf16_n4");
    }

    #[test]
    fn static_takes_the_token_tile_kernel_where_it_fits() {
        // The persistent token ring (static_pr) at every T where its ring fits (measured faster
        // than one token per CTA below 1024 tokens too: (320, 1280, 4) 9.25 -> 8.29 us, H100).
        for (n, c) in [(4, 1280), (4, 2560), (8, 1280), (1, 8), (2, 64)] {
            for dtype in [Dtype::Bf16, Dtype::F32] {
                let r = entries(Stage::Static, Config::new(n, c), dtype, 4096).unwrap();
                assert_eq!(r.len(), 1, "n={n} C={c} {dtype}: {r:?}");
                assert!(r[0].1.starts_with("mhc_static_pr_"), "n={n} C={c} {dtype}: {r:?}");
            }
        }
        // C beyond the ring but within one token's tile: one token per CTA (static_cl).
        for (n, c, dtype) in [(4, 6000, Dtype::Bf16), (4, 3200, Dtype::F32), (8, 4104, Dtype::Bf16)] {
            let r = entries(Stage::Static, Config::new(n, c), dtype, 4096).unwrap();
            assert!(r.iter().all(|e| e.1.starts_with("mhc_static_cl_")), "n={n} C={c} {dtype}: {r:?}");
        }
        // bf16 n >= 16: tensor cores (static_mma) at every T where its tile fits (C <= 2832 at
        // n = 32, 5112 at n = 16 for one CTA per token): clusters of 4 CTAs per token up to 24
        // tokens, of 2 up to 66 (measured per T), where C is a multiple of 8 x the cluster.
        let mma = |n: usize, cl: &str| format!("mhc_static_mma_{cl}bf16_n{n}");
        for (n, c, want) in [
            (32, 1280, vec![(24, "cl4_"), (66, "cl2_"), (usize::MAX, "")]),
            (16, 1296, vec![(66, "cl2_"), (usize::MAX, "")]),
            (32, 2832, vec![(66, "cl2_"), (usize::MAX, "")]),
            (16, 5112, vec![(usize::MAX, "")]),
            (32, 1288, vec![(usize::MAX, "")]),
            (32, 8, vec![(usize::MAX, "")]),
        ] {
            let r = entries(Stage::Static, Config::new(n, c), Dtype::Bf16, 8192).unwrap();
            let want: Vec<(usize, String)> = want.into_iter().map(|(t, cl)| (t, mma(n, cl))).collect();
            let got: Vec<(usize, String)> = r.into_iter().map(|(t, e)| (t, e.to_string())).collect();
            assert_eq!(got, want, "n={n} C={c}");
        }
        // f32 n >= 16, or C beyond the tile: the persistent kernel.
        for (n, c, dtype) in
            [(16, 1296, Dtype::F32), (32, 1280, Dtype::F32), (32, 2840, Dtype::Bf16), (16, 5128, Dtype::Bf16)]
        {
            let r = entries(Stage::Static, Config::new(n, c), dtype, 64).unwrap();
            assert_eq!(r[0].1, format!("mhc_static_{}_n{n}", dtype.name()), "n={n} C={c} {dtype}");
        }
        let r = entries(Stage::Static, Config::new(4, 16384), Dtype::Bf16, 64).unwrap();
        assert_eq!(r[0].1, "mhc_static_bf16_n4");
    }

    fn planned_with(n: usize, c: usize, dtype: Dtype, stage: Stage, t: usize, tuning: &Tuning) -> Vec<String> {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        planned_kernels(&limits, None, &Config::new(n, c), dtype, stage.name(), t, tuning)
            .unwrap()
            .into_iter()
            .map(|k| k.entry)
            .collect()
    }

    /// The account of each kernel's launch `planned_kernels` gives, by entry.
    fn launch_lines(n: usize, c: usize, dtype: Dtype, stage: Stage, t: usize) -> Vec<(String, Option<String>)> {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let kernels = planned_kernels(&limits, None, &Config::new(n, c), dtype, stage.name(), t, &Tuning::CostModel);
        kernels
            .unwrap()
            .into_iter()
            .map(|k| {
                let launch = k.explain.split_once("\nlaunch at ").map(|(_, l)| l.to_string());
                (k.entry, launch)
            })
            .collect()
    }

    /// `mhc inspect --explain` states the grid, K splits and channel slices the launchers compute
    /// for the call (the same functions' values), and says nothing for launchers without such
    /// choices.
    #[test]
    fn the_explanation_states_each_launch_choice() {
        use Stage::{Post, PostPre, Pre};
        let sms = DeviceLimits::flagship(CudaArch::Sm90a).sm_count as usize;
        // The GEMM kernel: the cost model's K split, every count it weighed, the grid.
        for (n, t) in [(32, 2048), (16, 300), (8, 8192)] {
            let lines = launch_lines(n, 1280, Dtype::Bf16, Pre, t);
            let [(entry, Some(launch))] = &lines[..] else { panic!("{lines:?}") };
            assert_eq!(entry, &format!("mhc_pre_gemm_bf16_n{n}"));
            let (splits, per) =
                pre::gemm::split_stages(n * 1280 / pre::gemm::GEMM_STAGE_K, pre::gemm::gemm_splits(n, 1280, t, sms));
            let grid = pre::gemm::grid(n, t, splits).unwrap();
            assert!(launch.contains(&format!("split {splits} ways ({per} stages each); {grid} CTAs")), "{launch}");
            let weighed = pre::gemm::split_estimates(n, 1280, t, sms);
            assert_eq!(launch.lines().filter(|l| l.contains(" waves: ")).count(), weighed.len(), "{launch}");
            assert_eq!(launch.matches("<- chosen").count(), 1, "{launch}");
        }
        // The general kernel: CTAs a tile (launch_shape) and the K loop's variant.
        let shape = pre::general::launch_shape(&Config::new(4, 4104), 200, None, sms, true);
        let lines = launch_lines(4, 4104, Dtype::Bf16, Pre, 200);
        let [(entry, Some(launch))] = &lines[..] else { panic!("{lines:?}") };
        assert_eq!(entry, "mhc_pre_sm90_bf16");
        assert!(launch.contains(&format!("7 tiles of 32 tokens x {} CTAs = {} CTAs", shape.ctas, 7 * shape.ctas)));
        assert!(launch.contains("fast K loop, prefetch on"), "{launch}");
        // The few-token kernels: CTAs and channels a CTA; the logit clusters: clusters and CTAs.
        let (ctas, cpc) = pre::decode::mid_shape(&Config::new(4, 1000), sms, 16, None).unwrap();
        let lines = launch_lines(4, 1000, Dtype::Bf16, Pre, 16);
        assert!(lines[0].1.as_ref().unwrap().starts_with(&format!("T=16 on {sms} SMs: {ctas} co-resident CTAs")));
        assert!(lines[0].1.as_ref().unwrap().contains(&format!("of {cpc} channels")));
        let (grid, cpc, shared) = pre::lc::shape(4096, 3, Dtype::Bf16, true);
        let lines = launch_lines(4, 4096, Dtype::Bf16, PostPre, 3);
        let launch = lines[0].1.as_ref().unwrap();
        assert!(launch.contains(&format!("{grid} CTAs of {cpc} channels, {shared} bytes")), "{launch}");
        // The persistent clusters: the ring a CTA, the tiles; the count is the device's.
        let lines = launch_lines(4, 7168, Dtype::Bf16, Pre, 8192);
        let launch = lines[0].1.as_ref().unwrap();
        let ring = pre::cluster::ring_bytes_of(LaunchKind::PreClusterPair, 7168);
        assert!(launch.contains(&format!("{ring} bytes of ring a CTA, in two sets")), "{launch}");
        // post's grid follows from the row and T: no account.
        assert_eq!(launch_lines(4, 4096, Dtype::Bf16, Post, 1024)[0].1, None);
    }

    /// The catalogue's own choice (the cost model, no tuned table).
    fn planned(n: usize, c: usize, dtype: Dtype, stage: Stage, t: usize) -> Vec<String> {
        planned_with(n, c, dtype, stage, t, &Tuning::CostModel)
    }

    /// The embedded sm_90a table overrides the cost model at the keys it names, for every T of
    /// the key's bucket, and nowhere else.
    #[test]
    fn the_embedded_table_overrides_the_cost_model_at_its_keys() {
        use Stage::{Head, Pre};
        let tuned = |n, c, stage, t| planned_with(n, c, Dtype::Bf16, stage, t, &Tuning::Embedded);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Head, 1), ["mhc_head_cld_bf16_n4"]);
        assert_eq!(tuned(4, 4096, Head, 1), ["mhc_head_cl_bf16_n4"]);
        assert_eq!(tuned(4, 4096, Head, 2), ["mhc_head_cl_bf16_n4"]);
        assert_eq!(tuned(4, 4096, Head, 3), ["mhc_head_cld_bf16_n4"], "bucket 4 has no entry");
        assert_eq!(tuned(4, 4096, Head, 1000), ["mhc_head_bf16_n4"]);
        assert_eq!(tuned(4, 4096, Head, 1025), ["mhc_head_pc4_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 64), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(tuned(4, 4096, Pre, 64), ["mhc_pre_lcw_sm90_bf16"], "no entry: the cost model");
        assert_eq!(tuned(4, 4096, Pre, 65), ["mhc_pre_lcw128_sm90_bf16"]);
        assert_eq!(tuned(4, 4096, Pre, 129), ["mhc_pre_pc16t_bf16_n4"]);
        assert_eq!(tuned(4, 4096, Pre, 32), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(tuned(4, 8192, Pre, 32), ["mhc_pre_mid_sm90_bf16"]);
        // Another dtype, n or C bucket: the cost model.
        assert_eq!(planned_with(4, 4096, Dtype::F32, Head, 1, &Tuning::Embedded), ["mhc_head_cld_f32_n4"]);
        assert_eq!(tuned(4, 7168, Head, 1), ["mhc_head_cld_bf16_n4"]);
    }

    /// Where `post_pre` folds `post` into a few-token kernel (the logit clusters', the mid
    /// kernel's), its outputs are `post` then that kernel's `pre`, bit for bit: so `pre` must run
    /// the same kernel at that call, with the cost model and with the embedded table on every GPU
    /// it names (n = 4: every token bucket to 64 on both sides of each bound, C at and beside the
    /// rows' bounds; n = 1, 2, 8 at a few C; both dtypes and formulations).
    #[test]
    fn post_pre_folds_into_the_kernel_pre_runs() {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let tokens = [1, 2, 3, 4, 5, 8, 9, 12, 13, 16, 17, 24, 32, 33, 40, 48, 49, 64];
        let channels = [512, 1152, 2048, 3968, 4096, 4104, 5120, 5248, 6144, 7168, 7176, 7296, 8192];
        // n = 1, 2 and 8 (the mid kernels' folds), at fewer C.
        let others = [(1, 520), (2, 1280), (2, 4096), (8, 512), (8, 1280), (8, 1288), (8, 4224)];
        let shapes = channels.iter().map(|&c| (4, c)).chain(others);
        for tuning in [Tuning::CostModel, Tuning::Embedded] {
            for gpu in [None, Some("NVIDIA H200")] {
                for dtype in [Dtype::Bf16, Dtype::F32] {
                    for form in [Formulation::DeepSeekV4, Formulation::Paper] {
                        for ((n, c), t) in shapes.clone().flat_map(|s| tokens.iter().map(move |&t| (s, t))) {
                            let cfg = Config::new(n, c).with_formulation(form);
                            let plan = |stage| -> Vec<String> {
                                planned_kernels(&limits, gpu, &cfg, dtype, stage, t, &tuning)
                                    .unwrap()
                                    .into_iter()
                                    .map(|k| k.entry)
                                    .collect()
                            };
                            let key = format!("{tuning:?} {gpu:?} {dtype:?} {form:?} n={n} C={c} T={t}");
                            let post_pre = planned_kernels(&limits, gpu, &cfg, dtype, "post_pre", t, &tuning).unwrap();
                            // The table and the rows agree by themselves: the plan never had to
                            // set a fold aside.
                            assert!(!post_pre[0].explain.contains(FOLD_RULE), "{key}: {}", post_pre[0].explain);
                            let fused: Vec<String> = post_pre.into_iter().map(|k| k.entry).collect();
                            let Some(kernel) = fused.first().and_then(|e| e.strip_prefix("mhc_post_pre_")) else {
                                continue;
                            };
                            if fused.len() == 1 && (kernel.starts_with("lc") || kernel.starts_with("mid")) {
                                assert_eq!(plan("pre"), [format!("mhc_pre_{kernel}")], "{key}");
                            }
                        }
                    }
                }
            }
        }
    }

    /// A table whose `post_pre` entry folds into a kernel `pre` does not run there (the mid16
    /// fold where `pre` runs the logit clusters) is set aside at that call: `post`, then `pre`,
    /// with the reason in the plan's account.
    #[test]
    fn a_fold_whose_pre_runs_elsewhere_gives_way_to_post_then_pre() {
        // The row's current image, so that the entry applies (a stale one would be ignored).
        let sha = &catalogue().unwrap().get("post_pre_mid16_sm90_bf16").unwrap().image_sha256;
        let entry = r#"
[[entry]]
arch = "sm_90a"
units = 132
stage = "post_pre"
dtype = "bf16"
formulation = "paper"
device = "NVIDIA H200"
tokens = 4
n = 4
c = 8192
variant = "post_pre_mid16_sm90_bf16"
image_sha256 = "SHA"
us = 6.265
gbps = 530.8
error = 5.548e-5
samples = 500
date = "2026-11-29"
gpu = "NVIDIA H200"
driver = 13000
pct_copy = 12.66
spread_pct = 0.05107
cost_model = "post_pre_lc_sm90_bf16"
cost_model_us = 6.521
runner_up = "post_pre_lc_sm90_bf16"
runner_up_margin_pct = 4.083
"#;
        let table = mhc_loader::TunedTable::parse("test", &entry.replace("SHA", sha)).unwrap();
        let tuning = Tuning::Tables(vec![table]);
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let cfg = Config::new(4, 7168).with_formulation(Formulation::Paper);
        let plan = |stage| planned_kernels(&limits, Some("NVIDIA H200"), &cfg, Dtype::Bf16, stage, 4, &tuning).unwrap();
        assert_eq!(plan("pre")[0].entry, "mhc_pre_lc_sm90_bf16");
        let post_pre = plan("post_pre");
        let entries: Vec<&str> = post_pre.iter().map(|k| k.entry.as_str()).collect();
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(entries[0].starts_with("mhc_post_"), "{entries:?}");
        assert_eq!(entries[1], "mhc_pre_lc_sm90_bf16");
        assert!(post_pre[0].explain.contains(FOLD_RULE), "{}", post_pre[0].explain);
    }

    #[test]
    fn planned_kernels_follow_the_catalogue() {
        use Stage::{Post, PostPre, Pre};
        // pre, n = 4, C = 4096: the logit clusters up to 16 tokens (f32: 12; then mid to 64, the
        // decode kernel behind it), their wide entry to 64 (bf16; above C = 5120 from 33 tokens,
        // mid below), then the persistent clusters.
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 1), ["mhc_pre_lc_sm90_bf16"]);
        assert_eq!(planned(4, 7168, Dtype::Bf16, Pre, 16), ["mhc_pre_lc_sm90_bf16"]);
        assert_eq!(planned(4, 7168, Dtype::Bf16, Pre, 48), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(planned(4, 7168, Dtype::F32, Pre, 12), ["mhc_pre_lc_sm90_f32"]);
        assert_eq!(planned(4, 7168, Dtype::F32, Pre, 13), ["mhc_pre_mid_sm90_f32"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 17), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 32), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(planned(4, 5120, Dtype::Bf16, Pre, 17), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(planned(4, 5248, Dtype::Bf16, Pre, 17), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 7168, Dtype::Bf16, Pre, 32), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 8192, Dtype::Bf16, Pre, 17), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 8192, Dtype::Bf16, Pre, 33), ["mhc_pre_lcw_sm90_bf16"]);
        // Where the logit clusters do not run (C not a multiple of 128, past 8192, n = 3):
        // mid16 up to 8 tokens, then mid.
        assert_eq!(planned(4, 1288, Dtype::Bf16, Pre, 1), ["mhc_pre_mid16_sm90_bf16"]);
        assert_eq!(planned(4, 8320, Dtype::Bf16, Pre, 8), ["mhc_pre_mid16_sm90_bf16"]);
        assert_eq!(planned(3, 4096, Dtype::Bf16, Pre, 9), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 64), ["mhc_pre_lcw_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::F32, Pre, 64), ["mhc_pre_mid_sm90_f32"]);
        // The long wide entry to 128 tokens up to C = 6144, then the persistent clusters.
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 65), ["mhc_pre_lcw128_sm90_bf16"]);
        assert_eq!(planned(4, 6144, Dtype::Bf16, Pre, 128), ["mhc_pre_lcw128_sm90_bf16"]);
        assert_eq!(planned(4, 6144, Dtype::Bf16, Pre, 129), ["mhc_pre_pc16p_bf16_n4"]);
        assert_eq!(planned(4, 7168, Dtype::Bf16, Pre, 65), ["mhc_pre_pc16p_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 129), ["mhc_pre_pc16t_bf16_n4"]);
        // C not a multiple of 1024: the cluster kernel's cp.async entry.
        assert_eq!(planned(4, 1280, Dtype::Bf16, Pre, 129), ["mhc_pre_pc16_bf16_n4"]);
        assert_eq!(planned(4, 384, Dtype::Bf16, Pre, 65), ["mhc_pre_pc16_bf16_n4"]);
        // C < 512: no mid kernel; the decode kernel, then the cluster kernel.
        assert_eq!(planned(4, 256, Dtype::Bf16, Pre, 16), ["mhc_pre_decode_sm90_bf16"]);
        // GEMM pre from gemm_min_tokens(n) on (n = 32: 33, n = 16: 256, n = 8: 256), the general
        // kernel below (the cost model alone would name the GEMM kernel there).
        for (n, from) in [(32, 33), (16, 256), (8, 256)] {
            assert_eq!(planned(n, 1280, Dtype::Bf16, Pre, from - 1), ["mhc_pre_sm90_bf16"], "n={n}");
            assert_eq!(planned(n, 1280, Dtype::Bf16, Pre, from), [format!("mhc_pre_gemm_bf16_n{n}")], "n={n}");
        }
        assert_eq!(planned(32, 1280, Dtype::F32, Pre, 8192), ["mhc_pre_sm90_f32"]);
        // post_pre: the logit clusters' fused entries where they run: to 16 tokens (f32: 12), the
        // wide one (bf16) to 48 (from 17 up to C = 5120, from 33 up to 7168); else mid16 / mid to
        // 32; the persistent clusters' fused pass from 129 (its `m` entry to 448: to 128 pre runs
        // the long wide entry); post then pre where none runs.
        let cases: &[(usize, usize, Dtype, usize, &[&str])] = &[
            (4, 4096, Dtype::Bf16, 65, &["mhc_post_v4_bf16_n4", "mhc_pre_lcw128_sm90_bf16"]),
            (4, 4096, Dtype::Bf16, 128, &["mhc_post_v4_bf16_n4", "mhc_pre_lcw128_sm90_bf16"]),
            (4, 4096, Dtype::Bf16, 129, &["mhc_post_pre_pc16m_bf16_n4"]),
            (4, 4096, Dtype::Bf16, 448, &["mhc_post_pre_pc16m_bf16_n4"]),
            (4, 4096, Dtype::Bf16, 449, &["mhc_post_pre_pc16_bf16_n4"]),
            (4, 4096, Dtype::Bf16, 8192, &["mhc_post_pre_pc16_bf16_n4"]),
            (4, 4096, Dtype::Bf16, 1, &["mhc_post_pre_lc_sm90_bf16"]),
            (4, 7168, Dtype::Bf16, 16, &["mhc_post_pre_lc_sm90_bf16"]),
            (4, 7168, Dtype::F32, 12, &["mhc_post_pre_lc_sm90_f32"]),
            (4, 7168, Dtype::F32, 13, &["mhc_post_pre_mid_sm90_f32"]),
            (4, 4096, Dtype::Bf16, 17, &["mhc_post_pre_lcw_sm90_bf16"]),
            (4, 7168, Dtype::Bf16, 48, &["mhc_post_pre_lcw_sm90_bf16"]),
            (4, 7168, Dtype::Bf16, 32, &["mhc_post_pre_mid_sm90_bf16"]),
            (4, 5120, Dtype::Bf16, 32, &["mhc_post_pre_lcw_sm90_bf16"]),
            (4, 5248, Dtype::Bf16, 17, &["mhc_post_pre_mid_sm90_bf16"]),
            (4, 4096, Dtype::Bf16, 49, &["mhc_post_v4_bf16_n4_v2", "mhc_pre_lcw_sm90_bf16"]),
            (4, 8192, Dtype::Bf16, 33, &["mhc_post_v4_bf16_n4_v2", "mhc_pre_lcw_sm90_bf16"]),
            (4, 4104, Dtype::Bf16, 1, &["mhc_post_pre_mid16_sm90_bf16"]),
            (4, 4104, Dtype::Bf16, 8, &["mhc_post_pre_mid16_sm90_bf16"]),
            (4, 4104, Dtype::Bf16, 9, &["mhc_post_pre_mid_sm90_bf16"]),
            (4, 4096, Dtype::Bf16, 32, &["mhc_post_pre_lcw_sm90_bf16"]),
            (4, 4096, Dtype::F32, 32, &["mhc_post_pre_mid_sm90_f32"]),
            (2, 520, Dtype::F32, 32, &["mhc_post_pre_mid_sm90_f32"]),
        ];
        for &(n, c, dtype, t, want) in cases {
            assert_eq!(planned(n, c, dtype, PostPre, t), want, "n = {n}, C = {c}, {dtype:?}, T = {t}");
        }
        assert_eq!(planned_with(4, 4096, Dtype::Bf16, PostPre, 40, &Tuning::Embedded), ["mhc_post_pre_lcw_sm90_bf16"]);
        // n = 8: the mid_n8 kernel's post_pre entries to 16 tokens, the mid32_n8 ones to 32, then
        // post and pre.
        assert_eq!(planned(8, 1280, Dtype::Bf16, PostPre, 1), ["mhc_post_pre_mid_n8_sm90_bf16"]);
        assert_eq!(planned(8, 4096, Dtype::F32, PostPre, 16), ["mhc_post_pre_mid_n8_sm90_f32"]);
        assert_eq!(planned(8, 1280, Dtype::Bf16, PostPre, 17), ["mhc_post_pre_mid32_n8_sm90_bf16"]);
        assert_eq!(planned(8, 1280, Dtype::Bf16, PostPre, 32), ["mhc_post_pre_mid32_n8_sm90_bf16"]);
        assert_eq!(planned(8, 1280, Dtype::Bf16, PostPre, 33), ["mhc_post_v4_bf16_n8_v2", "mhc_pre_sm90_bf16"]);
        // pre, n = 8: the mid_n8 entries to 16 tokens, the mid32_n8 entries to 32, then the
        // general kernel.
        assert_eq!(planned(8, 1280, Dtype::Bf16, Pre, 16), ["mhc_pre_mid_n8_sm90_bf16"]);
        assert_eq!(planned(8, 1280, Dtype::Bf16, Pre, 17), ["mhc_pre_mid32_n8_sm90_bf16"]);
        assert_eq!(planned(8, 4224, Dtype::F32, Pre, 32), ["mhc_pre_mid32_n8_sm90_f32"]);
        assert_eq!(planned(8, 1280, Dtype::Bf16, Pre, 33), ["mhc_pre_sm90_bf16"]);
        let n3 = planned_kernels(
            &DeviceLimits::flagship(CudaArch::Sm90a),
            None,
            &Config::new(3, 4096),
            Dtype::Bf16,
            "post_pre",
            1,
            &Tuning::CostModel,
        );
        assert!(n3.is_err(), "n = 3 has no post kernel, so no post_pre (fused or not)");
        assert_eq!(planned(4, 504, Dtype::Bf16, PostPre, 1), ["mhc_post_v4_bf16_n4_v2", "mhc_pre_decode_sm90_bf16"]);
        // C = 5120..8192 (multiples of 1024): the fused pair entry from 256 tokens, post then the
        // pair pre entry from 65 (from 129 up to C = 6144, where the logit clusters' long wide
        // entry takes 65..128); the wide logit clusters' post_pre entry to 48 tokens up to
        // C = 7168 (from 17 at 5120, the mid kernel's fold below 33 above it); pre on the logit
        // clusters to 64.
        for c in [5120, 6144, 7168, 8192] {
            assert_eq!(planned(4, c, Dtype::Bf16, PostPre, 256), ["mhc_post_pre_pc16p_bf16_n4"], "C = {c}");
            assert_eq!(
                planned(4, c, Dtype::Bf16, PostPre, 255),
                ["mhc_post_v4_bf16_n4", "mhc_pre_pc16p_bf16_n4"],
                "C = {c}"
            );
            assert_eq!(planned(4, c, Dtype::Bf16, PostPre, 8192), ["mhc_post_pre_pc16p_bf16_n4"], "C = {c}");
            let few = if c <= 5120 { "mhc_post_pre_lcw_sm90_bf16" } else { "mhc_post_pre_mid_sm90_bf16" };
            assert_eq!(planned(4, c, Dtype::Bf16, PostPre, 32), [few], "C = {c}");
            let fold = if c <= 7168 { "mhc_post_pre_lcw_sm90_bf16" } else { "mhc_post_v4_bf16_n4_v2" };
            assert_eq!(planned(4, c, Dtype::Bf16, PostPre, 40)[0], fold, "C = {c}");
            assert_eq!(planned(4, c, Dtype::Bf16, Pre, 64), ["mhc_pre_lcw_sm90_bf16"], "C = {c}");
            // the long wide entry to 128 tokens up to C = 6144
            let long = if c <= 6144 { "mhc_pre_lcw128_sm90_bf16" } else { "mhc_pre_pc16p_bf16_n4" };
            assert_eq!(planned(4, c, Dtype::Bf16, Pre, 65), [long], "C = {c}");
            assert_eq!(planned(4, c, Dtype::Bf16, Pre, 129), ["mhc_pre_pc16p_bf16_n4"], "C = {c}");
            assert_eq!(planned(4, c, Dtype::Bf16, Pre, 8192), ["mhc_pre_pc16p_bf16_n4"], "C = {c}");
        }
        assert_eq!(planned(4, 7296, Dtype::Bf16, Pre, 8192), ["mhc_pre_sm90_bf16"], "C not a multiple of 1024");
        assert_eq!(planned(4, 9216, Dtype::Bf16, Pre, 8192), ["mhc_pre_sm90_bf16"], "C beyond two clusters");
        // Registry stages: the same ranges as the plan's buckets.
        assert_eq!(planned(4, 4096, Dtype::Bf16, Post, 64), ["mhc_post_v4_bf16_n4_v2"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Post, 65), ["mhc_post_v4_bf16_n4"]);
        // Bad input is an error, not a panic.
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        assert!(planned_kernels(&limits, None, &Config::new(4, 100), Dtype::Bf16, "pre", 1, &Tuning::Embedded).is_err());
        assert!(
            planned_kernels(&limits, None, &Config::new(4, 4096), Dtype::Bf16, "pre", 0, &Tuning::Embedded).is_err()
        );
        assert!(planned_kernels(&limits, None, &Config::new(4, 4096), Dtype::Bf16, "sinkhorn", 1, &Tuning::Embedded)
            .is_err());
    }

    #[test]
    fn every_supported_shape_selects_and_others_say_why() {
        for stage in [Stage::Post, Stage::Head, Stage::Static, Stage::Expand] {
            for n in [1, 2, 4, 8, 16, 32] {
                for dtype in [Dtype::Bf16, Dtype::F32] {
                    let r = entries(stage, Config::new(n, 1280), dtype, 4096).unwrap();
                    assert_eq!(r.last().unwrap().0, usize::MAX, "{stage} n={n} {dtype}");
                }
            }
            match entries(stage, Config::new(4, 100), Dtype::Bf16, 16) {
                Err(Error::NoVariant { rejected, .. }) => {
                    assert!(rejected.iter().any(|r| r.contains("multiple of 8")), "{stage}: {rejected:?}")
                }
                other => panic!("{stage} at C = 100: {other:?}"),
            }
        }
        // n = 3: expand runs any n; the specialised kernels say which n they have.
        assert!(entries(Stage::Expand, Config::new(3, 64), Dtype::Bf16, 4).is_ok());
        assert!(matches!(entries(Stage::Post, Config::new(3, 64), Dtype::Bf16, 4), Err(Error::NoVariant { .. })));
    }

    /// Every sm_90a catalogue row the selector may pick on its own (all but those kept for
    /// comparison) is the plan's choice for some call: no row is dead, and the plan's selection
    /// is the catalogue's (the only code that picks a kernel is `choose`, through the loader).
    #[test]
    fn every_catalogue_row_is_chosen_for_some_input() {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let reg = crate::plan::catalogue().unwrap();
        let mut missing = Vec::new();
        for v in reg.variants().iter().filter(|v| v.arch == mhc_loader::Arch::Sm90a && !v.has(Trait::OnRequest)) {
            let e = &v.entry;
            let slot = Slot::named(&e.stage).unwrap();
            let cs: Vec<usize> = [e.c.min, e.c.max.min(65536), 64, 128, 256, 512, 1024, 1280, 2048, 2560, 4096, 7168]
                .into_iter()
                .filter(|&c| c % e.c.multiple_of == 0 && e.c.min <= c && c <= e.c.max)
                .map(|c| c as usize)
                .collect();
            let prefer = e.prefer_tokens();
            let ts: Vec<usize> = [
                e.tokens.min,
                e.tokens.max.min(1 << 16),
                prefer.min,
                prefer.max.min(1 << 16),
                1,
                8,
                16,
                64,
                65,
                256,
                512,
                4096,
            ]
            .into_iter()
            .filter(|&t| e.tokens.contains(t))
            .map(|t| t as usize)
            .collect();
            let found = e.n.iter().any(|&n| {
                e.dtypes.iter().any(|dtype| {
                    e.formulations.iter().any(|f| {
                        cs.iter().any(|&c| {
                            [(false, false), (true, false), (false, true), (true, true)].into_iter().any(|(gk, gf)| {
                                let mut cfg = Config::new(n as usize, c).with_formulation(f.parse().unwrap());
                                cfg.gamma_k = gk;
                                cfg.gamma_f = gf;
                                let dtype: Dtype = dtype.parse().unwrap();
                                let max = ts.iter().copied().max().unwrap_or(1);
                                let selector = crate::plan::selector(limits.sm_count, None, &Tuning::Embedded).unwrap();
                                let ranges =
                                    choose(&selector, &limits, &cfg, dtype, slot, max, None, &|_| Ok(())).ranges;
                                ts.iter().any(|&t| {
                                    ranges
                                        .iter()
                                        .find(|(m, _)| t <= *m)
                                        .is_some_and(|(_, c)| c.as_ref().is_ok_and(|w| w.id() == v.id()))
                                })
                            })
                        })
                    })
                })
            });
            if !found {
                missing.push(v.id().to_string());
            }
        }
        assert!(missing.is_empty(), "catalogue rows no input selects: {missing:?}");
    }

    /// The plan refuses a T its kernels' 32-bit offsets cannot address (docs/kernels/
    /// address-arithmetic.md): the general pre kernel's logit rows `ws_p[t * ldp]` wrap at
    /// n = 32 from T = 3,947,582 (token 3,947,581 would read token 0's logits); the GEMM kernel's
    /// `h_res[t * n * n]` at T x n^2 > 2^32 - 1. One token fewer is served.
    #[test]
    fn token_counts_past_the_32_bit_offsets_are_refused() {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        let at = |n: usize, c: usize, dtype: Dtype, t: usize| {
            let selector = crate::plan::selector(limits.sm_count, None, &Tuning::Embedded).unwrap();
            let ranges = choose(&selector, &limits, &Config::new(n, c), dtype, Slot::Pre, t, None, &|_| Ok(())).ranges;
            Ranges(ranges).at(Slot::Pre, "sm_90a", t).map(|v| v.entry.entry.clone())
        };
        assert_eq!(at(32, 8, Dtype::F32, 3_947_581).unwrap(), "mhc_pre_sm90_f32");
        let e = at(32, 8, Dtype::F32, 3_947_582).unwrap_err().to_string();
        assert!(e.contains("32-bit offsets") && e.contains("ldp"), "{e}");
        // bf16 n = 32 prefill is the GEMM kernel: refused from T n^2 > 2^32 - 1.
        assert_eq!(at(32, 1280, Dtype::Bf16, 4_194_303).unwrap(), "mhc_pre_gemm_bf16_n32");
        assert!(at(32, 1280, Dtype::Bf16, 4_194_304).is_err());
        // n = 4 never reaches it.
        assert!(at(4, 4096, Dtype::Bf16, i32::MAX as usize).is_ok());
    }
}
