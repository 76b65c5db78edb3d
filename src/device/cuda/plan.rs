//! Plans: a layer configuration bound to a device, with every stage's kernel selected per token
//! bucket and resolved up front. Ops (`plan.post(..)`, `plan.head(..)`, ...) are `impl Plan`
//! blocks in one file per stage; each validates its views in O(1) and launches exactly once.

use super::device::{CudaDevice, Function};
use super::ffi;
use super::kernels::{KernelDesc, PreFamily, KERNELS};
use super::memory::DeviceBuffer;
use super::stream::Stream;
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::error::{Error, Result};
use std::ffi::c_void;

/// One selected kernel for the token range `..=max_tokens`.
#[derive(Debug, Clone)]
pub struct Bucket {
    /// Largest token count this bucket serves.
    pub max_tokens: usize,
    pub desc: &'static KernelDesc,
    pub func: Function,
    /// Persistent kernels ([`KernelDesc::persistent`], [`KernelDesc::token_ring`]): the CTAs the
    /// device holds at once with this plan's shared memory (whole clusters), the most a grid
    /// launches; found when the plan is built, so the launch path does no occupancy work. 0 for
    /// the others.
    pub resident_ctas: u32,
}

/// What a plan's selection reads from a device, so that the same selection can run without
/// one (`mhc inspect --explain`, [`planned_kernels`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceLimits {
    pub arch: super::device::CudaArch,
    pub sm_count: u32,
    /// Largest dynamic shared memory a block may opt into.
    pub max_shared_per_block: u32,
}

impl DeviceLimits {
    /// The architecture's flagship part (sm_90a: H100 / H200 SXM, 132 SMs, 227 KiB per block).
    pub fn flagship(arch: super::device::CudaArch) -> Self {
        match arch {
            super::device::CudaArch::Sm90a => DeviceLimits { arch, sm_count: 132, max_shared_per_block: 227 * 1024 },
        }
    }
}

/// A configuration on a device: kernels chosen and loaded for every stage the device has for it.
/// Whether a plan's launches may overlap the kernel before them on the stream (programmatic
/// dependent launch, sm_90+). Every stage kernel begins with `griddepcontrol.wait`, which holds
/// it until the previous kernel has finished and its writes are visible, and only then lets the
/// next kernel be scheduled (`griddepcontrol.launch_dependents`); so with [`Overlap::Launch`]
/// the results are exactly those of plain stream-ordered launches, and what overlaps is the
/// launch itself: the grid is scheduled and its CTAs start while the previous kernel drains.
/// Measured on an H100 in a CUDA graph (notes/cuda-pdl.md): 0.1-1.7 us less per call at decode
/// sizes (post T=16 2.74 -> 2.11 us, pre T=1 7.37 -> 6.42 us); nothing measurable at large T.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Plain launches: the kernel starts when the previous one has completed.
    Off,
    /// Programmatic dependent launch (the default).
    #[default]
    Launch,
}

pub struct Plan {
    pub(crate) dev: CudaDevice,
    pub(crate) cfg: Config,
    pub(crate) dtype: Dtype,
    pub(crate) max_tokens: usize,
    pub(crate) overlap: Overlap,
    /// Per stage (index [`stage_index`]): the buckets in increasing `max_tokens`, or why none.
    stages: Vec<Result<Vec<Bucket>>>,
    workspace_bytes: usize,
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

/// Position of a stage in [`Stage::ALL`] (the plan's table index).
pub(crate) const fn stage_index(s: Stage) -> usize {
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

/// Stages whose variants are chosen by the loader's selector from `asm/catalogue.toml` (filter ->
/// cost model -> tuned override); the others are matched in the kernel table below.
const REGISTRY_STAGES: [Stage; 4] = [Stage::Post, Stage::Head, Stage::Static, Stage::Expand];

/// Buckets of `stage` for token counts `1..=max_tokens`: the loader's `select` is asked at every
/// token range boundary of the catalogue's variants (a variant's `tokens.max`, and the count
/// before its `tokens.min`, below `max_tokens`) and at `max_tokens`; consecutive boundaries with
/// the same winner merge. The winner's entry symbol names its launch row in the kernel table
/// (argument struct, tile).
/// `Ok(Err(NoVariant))`: no variant for this configuration (reported by the op); `Err`: the
/// build is inconsistent (catalogue, images or table disagree).
fn select_buckets(
    dev: &CudaDevice,
    cfg: &Config,
    dtype: Dtype,
    stage: Stage,
    max_tokens: usize,
) -> Result<Result<Vec<Bucket>>> {
    let ranges = match registry_ranges(dev.arch(), cfg, dtype, stage, max_tokens)? {
        Ok(r) => r,
        Err(e) => return Ok(Err(e)),
    };
    let mut buckets = Vec::with_capacity(ranges.len());
    for (max, slot) in ranges {
        // The table's hard limits must agree with the catalogue's (C granule, shared memory).
        if let Some(why) = reject(&KERNELS[slot], &dev.limits(), cfg, dtype) {
            return Ok(Err(Error::NoVariant {
                stage: stage.name().into(),
                arch: dev.arch().name().into(),
                shape: format!("n={} C={} {} {}", cfg.n, cfg.c, dtype, cfg.formulation),
                rejected: vec![why],
            }));
        }
        let (desc, func) = (&KERNELS[slot], dev.function(slot)?);
        let resident_ctas = if desc.persistent {
            let shared = super::head::persistent_shared_bytes(desc, cfg, dtype);
            match ffi::occupancy_max_active_clusters(func.raw, desc.threads, shared, desc.cluster)? {
                n if n > 0 => n as u32 * desc.cluster,
                _ => {
                    return Ok(Err(Error::NoVariant {
                        stage: stage.name().into(),
                        arch: dev.arch().name().into(),
                        shape: format!("n={} C={} {} {}", cfg.n, cfg.c, dtype, cfg.formulation),
                        rejected: vec![format!("{}: no cluster of {} CTAs fits this device", desc.entry, desc.cluster)],
                    }))
                }
            }
        } else if desc.token_ring {
            let shared = super::static_layer::token_ring_bytes(desc, cfg.c, cfg.n, dtype) as u32;
            let per_sm =
                super::static_layer::resident_ctas(func.registers, desc.threads, shared + func.static_shared_bytes);
            dev.sm_count() * per_sm
        } else {
            0
        };
        buckets.push(Bucket { max_tokens: max, desc, func, resident_ctas });
    }
    Ok(Ok(buckets))
}

/// pre: the mid kernel serves T = 1..=64 wherever it runs, ahead of the decode kernel (H100,
/// bf16, n = 4, in a CUDA graph: C = 4096 T = 1 / 16 5.5 / 6.5 us against 5.7 / 8.1;
/// notes/cuda-pre.md round 13). So the decode bucket moves right behind the mid bucket that
/// covers its whole token range (the first covering bucket is the one `bucket` picks); it
/// stays in the plan for forced CTA counts (`PreKernel::Decode`), which the mid kernel cannot
/// serve. `key` gives (family, min_tokens, max_tokens) of a bucket.
fn decode_behind_mid<B>(buckets: &mut Vec<B>, key: impl Fn(&B) -> (PreFamily, usize, usize)) {
    let Some(d) = buckets.iter().position(|b| key(b).0 == PreFamily::Decode) else { return };
    let (_, lo, hi) = key(&buckets[d]);
    let covers = |b: &B| {
        let (family, min, max) = key(b);
        family == PreFamily::Mid && min <= lo && max >= hi
    };
    if let Some(m) = buckets.iter().position(covers).filter(|&m| m > d) {
        let decode = buckets.remove(d);
        buckets.insert(m, decode);
    }
}

/// The device-free half of [`select_buckets`]: `(max_tokens, table slot)` per token range, the
/// last range open-ended (`usize::MAX`).
fn registry_ranges(
    arch: super::device::CudaArch,
    cfg: &Config,
    dtype: Dtype,
    stage: Stage,
    max_tokens: usize,
) -> Result<Result<Vec<(usize, usize)>>> {
    use mhc_loader::{Arch, Budget, Registry, Shape};
    let larch = match arch {
        super::device::CudaArch::Sm90a => Arch::Sm90a,
    };
    let registry = Registry::embedded()
        .map_err(|e| Error::BadCodeObject { image: "asm/catalogue.toml".into(), reason: e.to_string() })?;
    // Every token count where a variant's range starts or ends is a boundary: the last count
    // before a range starts (tokens.min - 1) and a range's last count (tokens.max).
    let mut bounds: Vec<u64> = registry
        .variants()
        .iter()
        .filter(|v| v.entry.stage == stage.name() && v.arch == larch)
        .flat_map(|v| [v.entry.tokens.min.saturating_sub(1), v.entry.tokens.max])
        .filter(|&t| t >= 1 && t < max_tokens as u64)
        .collect();
    bounds.push(max_tokens as u64);
    bounds.sort_unstable();
    bounds.dedup();
    let form = cfg.formulation.to_string();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &t in &bounds {
        let shape = Shape::new(t, cfg.n as u32, cfg.c as u64, dtype.name()).with_formulation(&form);
        let sel = match mhc_loader::select(larch, stage.name(), &shape, &Budget::default()) {
            Ok(sel) => sel,
            Err(mhc_loader::Error::NoVariant(nv)) => {
                return Ok(Err(Error::NoVariant {
                    stage: stage.name().into(),
                    arch: larch.to_string(),
                    shape: shape.to_string(),
                    rejected: nv.reasons(),
                }))
            }
            Err(e) => return Err(Error::BadCodeObject { image: "asm/catalogue.toml".into(), reason: e.to_string() }),
        };
        let entry = sel.variant.entry.entry.as_str();
        let slot =
            KERNELS.iter().position(|d| d.entry == entry && d.arch == arch && d.stage == stage).ok_or_else(|| {
                Error::BadCodeObject {
                    image: sel.variant.entry.file.clone(),
                    reason: format!(
                        "variant {} (entry {entry}) has no launch row in the CUDA kernel table",
                        sel.variant.id()
                    ),
                }
            })?;
        match ranges.last_mut() {
            Some(last) if last.1 == slot => last.0 = t as usize,
            _ => ranges.push((t as usize, slot)),
        }
    }
    if let Some(last) = ranges.last_mut() {
        last.0 = usize::MAX;
    }
    Ok(Ok(ranges))
}

/// One kernel a plan launches for a stage call, as [`planned_kernels`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedKernel {
    /// The stage whose bucket it is (`post_pre` without its fused kernel: `post`, then `pre`).
    pub stage: Stage,
    pub entry: &'static str,
    /// The code object it is in (repository path).
    pub image: &'static str,
    /// The rule that chose it.
    pub rule: String,
}

/// The kernels a plan for `cfg` in `dtype` launches for one `stage` call at `tokens` tokens on a
/// device with `limits`, in launch order, each with the rule that chose it: the plan's own
/// selection (`registry_ranges` for `post`, `head`, `static` and `expand`; `table_rows` and the
/// first covering bucket for the others), run without a device (`mhc inspect --explain`). It
/// assumes what only a device can say: the images load and a persistent kernel's cluster fits.
pub fn planned_kernels(
    limits: &DeviceLimits,
    cfg: &Config,
    dtype: Dtype,
    stage: Stage,
    tokens: usize,
) -> Result<Vec<PlannedKernel>> {
    cfg.validate()?;
    if tokens == 0 {
        return Err(Error::shape("tokens", ">= 1", tokens));
    }
    let no_variant = |rejected: Vec<String>| Error::NoVariant {
        stage: stage.name().into(),
        arch: limits.arch.name().into(),
        shape: format!("T={tokens} n={} C={} {dtype} {}", cfg.n, cfg.c, cfg.formulation),
        rejected,
    };
    let planned = |slot: usize, rule: String| {
        let d = &KERNELS[slot];
        PlannedKernel { stage, entry: d.entry, image: super::kernels::IMAGES[d.image].name, rule }
    };
    if REGISTRY_STAGES.contains(&stage) {
        let ranges = registry_ranges(limits.arch, cfg, dtype, stage, tokens)??;
        let Some(&(_, slot)) = ranges.last() else { return Err(no_variant(vec![])) };
        if let Some(why) = reject(&KERNELS[slot], limits, cfg, dtype) {
            return Err(no_variant(vec![why]));
        }
        return Ok(vec![planned(
            slot,
            "the loader's selector over asm/catalogue.toml (filter, cost model, tuned table)".into(),
        )]);
    }
    let (rows, rejected) = table_rows(limits, cfg, dtype, stage, |_| Ok(Ok(())))?;
    let covering = rows.iter().enumerate().find(|(_, &(s, _))| {
        let d = &KERNELS[s];
        d.min_tokens <= tokens && tokens <= d.max_tokens
    });
    if stage == Stage::PostPre && !covering.is_some_and(|(_, &(s, _))| KERNELS[s].pre_family == PreFamily::Cluster) {
        // Plan::post_pre: the fused kernel where the table has it for T, else post, then pre.
        let mut kernels = planned_kernels(limits, cfg, dtype, Stage::Post, tokens)?;
        kernels.extend(planned_kernels(limits, cfg, dtype, Stage::Pre, tokens)?);
        return Ok(kernels);
    }
    let Some((i, &(slot, _))) = covering else { return Err(no_variant(rejected)) };
    let d = &KERNELS[slot];
    let max = if d.max_tokens == usize::MAX { "any".to_string() } else { d.max_tokens.to_string() };
    let rule = format!(
        "the CUDA kernel table (src/device/cuda/kernels.rs): bucket {} of {}, the first whose range T = {}..={max} covers T",
        i + 1,
        rows.len(),
        d.min_tokens
    );
    Ok(vec![planned(slot, rule)])
}

/// [`table_rows`]' answer: the kept rows (slot, what `admit` gave) in bucket order, and why the
/// others were left out.
type TableRows<V> = (Vec<(usize, V)>, Vec<String>);

/// The kernel-table rows of a table stage (one not in [`REGISTRY_STAGES`]) that a plan keeps for
/// `cfg` in `dtype`, in the order [`Plan::bucket`] tries them (smallest token range first; of
/// equal ends, the one starting later first; then [`decode_behind_mid`]), and why the others
/// are left out. `admit(slot)` is the device's own check of a row that passed [`reject`] (it
/// loads the function and sizes persistent grids): `Ok(Ok(v))` keeps the row with `v`,
/// `Ok(Err(why))` leaves it out.
fn table_rows<V>(
    limits: &DeviceLimits,
    cfg: &Config,
    dtype: Dtype,
    stage: Stage,
    mut admit: impl FnMut(usize) -> Result<std::result::Result<V, String>>,
) -> Result<TableRows<V>> {
    let mut rejected = Vec::new();
    let mut rows: Vec<(usize, V)> = Vec::new();
    for (slot, desc) in KERNELS.iter().enumerate() {
        if desc.stage != stage {
            continue;
        }
        if let Some(why) = reject(desc, limits, cfg, dtype) {
            rejected.push(why);
            continue;
        }
        let same_kind = |&(s, _): &(usize, V)| {
            let d = &KERNELS[s];
            d.max_tokens == desc.max_tokens && d.min_tokens == desc.min_tokens && d.pre_family == desc.pre_family
        };
        if rows.iter().any(same_kind) {
            // An earlier table row of the same kind already serves this token range (ties:
            // table order).
            continue;
        }
        match admit(slot)? {
            Ok(v) => rows.push((slot, v)),
            Err(why) => rejected.push(why),
        }
    }
    rows.sort_by_key(|&(s, _)| (KERNELS[s].max_tokens, std::cmp::Reverse(KERNELS[s].min_tokens)));
    decode_behind_mid(&mut rows, |&(s, _)| (KERNELS[s].pre_family, KERNELS[s].min_tokens, KERNELS[s].max_tokens));
    Ok((rows, rejected))
}

/// Why `desc` cannot run `cfg` in `dtype`, or `None` if it can (the hard constraints).
fn reject(desc: &KernelDesc, dev: &DeviceLimits, cfg: &Config, dtype: Dtype) -> Option<String> {
    if desc.arch != dev.arch {
        return Some(format!("{}: built for {}", desc.entry, desc.arch));
    }
    if desc.dtype != dtype {
        return Some(format!("{}: stores {}", desc.entry, desc.dtype));
    }
    if let Some(f) = desc.formulation {
        if f != cfg.formulation {
            return Some(format!("{}: formulation {}", desc.entry, f));
        }
    }
    if desc.n != 0 && desc.n != cfg.n {
        return Some(format!("{}: n = {}", desc.entry, desc.n));
    }
    if cfg.c % 8 != 0 {
        return Some(format!("{}: C = {} is not a multiple of 8", desc.entry, cfg.c));
    }
    if cfg.k().saturating_mul(dtype.size()) > u32::MAX as usize / 2 {
        return Some(format!("{}: n*C*{} bytes exceed 31 bits", desc.entry, dtype.size()));
    }
    if desc.stage == Stage::Static && cfg.c > super::kernels::STATIC_MAX_C {
        return Some(format!("{}: C > {}", desc.entry, super::kernels::STATIC_MAX_C));
    }
    if desc.stage == Stage::Static && cfg.c * 4 > dev.max_shared_per_block as usize {
        return Some(format!("{}: a[C] does not fit in shared memory", desc.entry));
    }
    if matches!(desc.stage, Stage::Pre | Stage::PostPre) && desc.pre_family == PreFamily::Cluster {
        if let Some(why) = super::pre_pc::pre_pc_unsupported(cfg) {
            return Some(format!("{}: {why}", desc.entry));
        }
        if desc.entry == super::pre_pc::PC_TMA_ENTRY {
            if let Some(why) = super::pre_pc::pre_pc_tma_unsupported(cfg) {
                return Some(format!("{}: {why}", desc.entry));
            }
        }
    }
    if desc.stage == Stage::Pre && desc.pre_family == PreFamily::Gemm {
        if let Some(why) = super::pre_gemm::pre_gemm_unsupported(cfg) {
            return Some(format!("{}: {why}", desc.entry));
        }
    }
    if desc.stage == Stage::Pre && desc.pre_family == PreFamily::Decode {
        if let Some(why) = super::pre_decode::decode_unsupported(cfg, dev.sm_count as usize) {
            return Some(format!("{}: {why}", desc.entry));
        }
    }
    if desc.stage == Stage::Pre && desc.pre_family == PreFamily::Mid {
        if let Some(why) = super::pre_decode::mid_unsupported(cfg, dev.sm_count as usize) {
            return Some(format!("{}: {why}", desc.entry));
        }
    }
    None
}

impl Plan {
    /// Validates `cfg`, selects a kernel for every stage (per token bucket) and loads it. A stage
    /// without a kernel for this configuration is recorded with its [`Error::NoVariant`], which
    /// its op returns; `new` itself fails only on a bad configuration or a load failure.
    pub fn new(dev: &CudaDevice, cfg: Config, dtype: Dtype, max_tokens: usize) -> Result<Self> {
        cfg.validate()?;
        if dtype == Dtype::F64 {
            return Err(Error::Config { what: "dtype", reason: "CUDA kernels store bf16 or f32, not f64".into() });
        }
        if max_tokens == 0 || max_tokens > i32::MAX as usize {
            return Err(Error::Config { what: "max_tokens", reason: format!("must be in 1..2^31, got {max_tokens}") });
        }
        let mut stages = Vec::with_capacity(Stage::ALL.len());
        let mut workspace_bytes = 0usize;
        for stage in Stage::ALL {
            if REGISTRY_STAGES.contains(&stage) {
                let entry = select_buckets(dev, &cfg, dtype, stage, max_tokens)?;
                stages.push(entry);
                continue;
            }
            let limits = dev.limits();
            let (rows, mut rejected) = table_rows(&limits, &cfg, dtype, stage, |slot| {
                let desc = &KERNELS[slot];
                let func = dev.function(slot)?;
                let resident_ctas = if desc.persistent {
                    // Persistent clusters (pre_pc): as many as the device holds with the ring
                    // this configuration needs.
                    let shared = super::pre_pc::entry_ring_bytes(desc.entry, cfg.c) as u32;
                    match ffi::occupancy_max_active_clusters(func.raw, desc.threads, shared, desc.cluster)? {
                        n if n > 0 => n as u32 * desc.cluster,
                        _ => {
                            return Ok(Err(format!(
                                "{}: no cluster of {} CTAs fits this device",
                                desc.entry, desc.cluster
                            )))
                        }
                    }
                } else {
                    0
                };
                Ok(Ok((func, resident_ctas)))
            })?;
            let buckets: Vec<Bucket> = rows
                .into_iter()
                .map(|(slot, (func, resident_ctas))| Bucket {
                    max_tokens: KERNELS[slot].max_tokens,
                    desc: &KERNELS[slot],
                    func,
                    resident_ctas,
                })
                .collect();
            let entry = if buckets.is_empty() {
                if rejected.is_empty() {
                    rejected.push(format!("no CUDA kernel implements {stage} yet"));
                }
                Err(Error::NoVariant {
                    stage: stage.name().into(),
                    arch: dev.arch().name().into(),
                    shape: format!("n={} C={} {} {}", cfg.n, cfg.c, dtype, cfg.formulation),
                    rejected,
                })
            } else {
                // The last bucket must cover every token count.
                if buckets.last().is_some_and(|b| b.max_tokens != usize::MAX) {
                    rejected.push(format!(
                        "no {stage} variant covers more than {} tokens",
                        buckets.last().map_or(0, |b| b.max_tokens)
                    ));
                }
                workspace_bytes = workspace_bytes.max(stage_workspace(stage, &cfg, dtype, max_tokens, dev));
                Ok(buckets)
            };
            stages.push(entry);
        }
        Ok(Plan { dev: dev.clone(), cfg, dtype, max_tokens, overlap: Overlap::default(), stages, workspace_bytes })
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

    pub fn overlap(&self) -> Overlap {
        self.overlap
    }

    pub fn device(&self) -> &CudaDevice {
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

    /// Bytes of the caller-provided workspace the plan's ops need (0 if none). Allocate it once
    /// with [`Plan::new_workspace`] (or hand in a buffer with [`Workspace::from_buffer`]); the
    /// kernels leave it ready for the next call.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// A zeroed workspace of [`Plan::workspace_bytes`].
    pub fn new_workspace(&self) -> Result<Workspace> {
        Ok(Workspace { buf: DeviceBuffer::zeroed(&self.dev, self.workspace_bytes.max(256))? })
    }

    /// Whether `stage` has a kernel in this plan (else the reason).
    pub fn supports(&self, stage: Stage) -> Result<()> {
        self.stages[stage_index(stage)].as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// The kernel chosen for `stage` at `tokens` tokens (launch path: an index and a short scan).
    #[inline]
    pub(crate) fn bucket(&self, stage: Stage, tokens: usize) -> Result<&Bucket> {
        match &self.stages[stage_index(stage)] {
            Ok(buckets) => {
                if tokens > self.max_tokens {
                    return Err(Error::shape("tokens", format!("<= max_tokens = {}", self.max_tokens), tokens));
                }
                buckets.iter().find(|b| b.desc.min_tokens <= tokens && tokens <= b.max_tokens).ok_or_else(|| {
                    Error::NoVariant {
                        stage: stage.name().into(),
                        arch: self.dev.arch().name().into(),
                        shape: format!("T={tokens}"),
                        rejected: vec!["no bucket covers this token count".into()],
                    }
                })
            }
            Err(e) => Err(e.clone()),
        }
    }

    /// The `pre` bucket of kernel family `family` that covers `tokens` (`None`: whatever token
    /// range it is selected for), if the plan has one (the automatic choice, [`Plan::bucket`], is
    /// the first covering bucket).
    pub(crate) fn pre_family_bucket(&self, family: PreFamily, tokens: Option<usize>) -> Option<&Bucket> {
        self.stages[stage_index(Stage::Pre)]
            .as_ref()
            .ok()?
            .iter()
            .find(|b| b.desc.pre_family == family && tokens.is_none_or(|t| b.desc.min_tokens <= t && t <= b.max_tokens))
    }

    /// The bucket of `stage` that serves every token count (the last one).
    pub(crate) fn general_bucket(&self, stage: Stage) -> Result<&Bucket> {
        match &self.stages[stage_index(stage)] {
            Ok(buckets) => buckets.last().ok_or_else(|| Error::NoVariant {
                stage: stage.name().into(),
                arch: self.dev.arch().name().into(),
                shape: format!("n={} C={}", self.cfg.n, self.cfg.c),
                rejected: vec!["no bucket".into()],
            }),
            Err(e) => Err(e.clone()),
        }
    }

    /// The selected kernels of `stage` (for `mhc bench` and `mhc inspect`).
    pub fn buckets(&self, stage: Stage) -> Result<&[Bucket]> {
        self.stages[stage_index(stage)].as_deref().map_err(Clone::clone)
    }

    /// The error of a launch whose kernel cannot take this plan's shape (a limit the catalogue's
    /// ranges should already exclude; reported before anything is launched).
    pub(crate) fn shape_refused(&self, stage: Stage, entry: &str, why: String) -> Error {
        Error::NoVariant {
            stage: stage.name().into(),
            arch: self.dev.arch().name().into(),
            shape: format!("n={} C={} {}", self.cfg.n, self.cfg.c, self.dtype),
            rejected: vec![format!("{entry}: {why}")],
        }
    }

    /// The one launch of an op. `args` is the kernel's `#[repr(C)]` argument struct, whose size
    /// was checked against the kernel's parameter when it was loaded.
    #[inline]
    pub(crate) fn launch<A: Copy>(
        &self,
        stream: &Stream,
        bucket: &Bucket,
        grid: u32,
        block: u32,
        shared_bytes: u32,
        args: &A,
    ) -> Result<()> {
        debug_assert_eq!(std::mem::size_of::<A>(), bucket.func.param_bytes as usize);
        if !stream.same_device(&self.dev) {
            return Err(Error::NoDevice("the stream belongs to another device than the plan".into()));
        }
        stream.bind()?;
        // One pointer per kernel parameter, into the argument struct at that parameter's offset
        // (a fixed array: no allocation on the launch path).
        let base = args as *const A as *const u8;
        let mut params = [std::ptr::null_mut::<c_void>(); super::device::MAX_PARAMS];
        for (p, &off) in params.iter_mut().zip(&bucket.func.param_offsets[..bucket.func.param_count as usize]) {
            *p = base.wrapping_add(off as usize) as *mut c_void;
        }
        // SAFETY: the kernel's parameters tile size_of::<A>() bytes at these offsets (checked at
        // load against the code object and the driver), so each pointer covers its parameter
        // inside `args`; the op validated every device range in `args` (dtype, rows, stride,
        // length, alignment) against what this grid reads and writes.
        unsafe {
            ffi::launch(
                bucket.func.raw,
                (grid, 1, 1),
                (block, 1, 1),
                shared_bytes,
                stream.raw(),
                params.as_mut_ptr(),
                ffi::LaunchMode {
                    cooperative: bucket.desc.cooperative,
                    programmatic: bucket.desc.grid_dependency && self.overlap != Overlap::Off,
                },
            )
        }
    }
}

/// Workspace a stage needs; stages that keep no partials across CTAs need none. The `pre`
/// decode kernel (split-K partials and counters) adds its formula here.
fn stage_workspace(stage: Stage, cfg: &Config, dtype: Dtype, max_tokens: usize, _dev: &CudaDevice) -> usize {
    match stage {
        Stage::Post | Stage::Head | Stage::Static | Stage::Expand => 0,
        Stage::Pre | Stage::PostPre => super::pre::workspace_bytes(cfg, dtype, max_tokens),
        _ => 0,
    }
}

/// The scratch memory of a plan's ops, zeroed once at creation; kernels that use it restore
/// it (counters back to zero) before they finish, so it is reusable without a memset.
pub struct Workspace {
    pub(crate) buf: DeviceBuffer,
}

impl Workspace {
    /// Takes `buf` as the workspace of `plan` (it must hold `plan.workspace_bytes()`), zeroing it.
    pub fn from_buffer(plan: &Plan, buf: DeviceBuffer) -> Result<Self> {
        if buf.bytes() < plan.workspace_bytes() {
            return Err(Error::shape("workspace", format!(">= {} bytes", plan.workspace_bytes()), buf.bytes()));
        }
        let zero = vec![0u8; buf.bytes()];
        buf.upload(&zero)?;
        Ok(Workspace { buf })
    }
    pub fn device_ptr(&self) -> u64 {
        self.buf.device_ptr()
    }
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::CudaArch;

    #[test]
    fn the_decode_bucket_goes_behind_the_mid_bucket_covering_it() {
        use PreFamily::{Cluster, Decode, General, Mid};
        let key = |b: &(PreFamily, usize, usize)| *b;
        // As sorted by (max_tokens, Reverse(min_tokens)): mid16 (1..=8), decode (1..=16),
        // mid (1..=64), pre_pc (65..), general.
        let mut b =
            vec![(Mid, 1, 8), (Decode, 1, 16), (Mid, 1, 64), (Cluster, 65, usize::MAX), (General, 1, usize::MAX)];
        decode_behind_mid(&mut b, key);
        assert_eq!(
            b,
            [(Mid, 1, 8), (Mid, 1, 64), (Decode, 1, 16), (Cluster, 65, usize::MAX), (General, 1, usize::MAX)]
        );
        // No mid kernel for this configuration (C < 512): the decode bucket keeps its place.
        let mut b = vec![(Decode, 1, 16), (General, 1, usize::MAX)];
        decode_behind_mid(&mut b, key);
        assert_eq!(b, [(Decode, 1, 16), (General, 1, usize::MAX)]);
        // A mid bucket that does not cover the decode range (1..=8 only) does not move it.
        let mut b = vec![(Mid, 1, 8), (Decode, 1, 16), (General, 1, usize::MAX)];
        decode_behind_mid(&mut b, key);
        assert_eq!(b, [(Mid, 1, 8), (Decode, 1, 16), (General, 1, usize::MAX)]);
    }

    fn entries(stage: Stage, cfg: Config, dtype: Dtype, max: usize) -> Result<Vec<(usize, &'static str)>> {
        registry_ranges(CudaArch::Sm90a, &cfg, dtype, stage, max)
            .unwrap()
            .map(|r| r.into_iter().map(|(m, slot)| (m, KERNELS[slot].entry)).collect())
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

    fn planned(n: usize, c: usize, dtype: Dtype, stage: Stage, t: usize) -> Vec<&'static str> {
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        planned_kernels(&limits, &Config::new(n, c), dtype, stage, t).unwrap().into_iter().map(|k| k.entry).collect()
    }

    #[test]
    fn planned_kernels_follow_the_table_and_the_registry() {
        use Stage::{Post, PostPre, Pre};
        // pre, n = 4, C = 4096: mid16 up to 8 tokens, mid up to 64 (the decode kernel behind
        // it), then the persistent clusters.
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 1), ["mhc_pre_mid16_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 9), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 64), ["mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Pre, 65), ["mhc_pre_pc16t_bf16_n4"]);
        // C not a multiple of 1024: the cluster kernel's cp.async entry.
        assert_eq!(planned(4, 1280, Dtype::Bf16, Pre, 65), ["mhc_pre_pc16_bf16_n4"]);
        // C < 512: no mid kernel; the decode kernel, then the cluster kernel.
        assert_eq!(planned(4, 256, Dtype::Bf16, Pre, 16), ["mhc_pre_decode_sm90_bf16"]);
        // GEMM pre from gemm_min_tokens(n) on (n = 32: 512, n = 16: 2048), the general kernel
        // below (what `mhc inspect` used to get wrong: the cost model named the GEMM kernel).
        for (n, from) in [(32, 512), (16, 2048)] {
            assert_eq!(planned(n, 1280, Dtype::Bf16, Pre, from - 1), ["mhc_pre_sm90_bf16"], "n={n}");
            assert_eq!(planned(n, 1280, Dtype::Bf16, Pre, from), [format!("mhc_pre_gemm_bf16_n{n}")], "n={n}");
        }
        assert_eq!(planned(32, 1280, Dtype::F32, Pre, 8192), ["mhc_pre_sm90_f32"]);
        // post_pre: the fused cluster kernel from 65 tokens (its `m` entry to 448), else post
        // then pre.
        assert_eq!(planned(4, 4096, Dtype::Bf16, PostPre, 65), ["mhc_post_pre_pc16m_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, PostPre, 448), ["mhc_post_pre_pc16m_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, PostPre, 449), ["mhc_post_pre_pc16_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, PostPre, 8192), ["mhc_post_pre_pc16_bf16_n4"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, PostPre, 64), ["mhc_post_v4_bf16_n4_v2", "mhc_pre_mid_sm90_bf16"]);
        assert_eq!(planned(4, 7168, Dtype::Bf16, PostPre, 8192), ["mhc_post_v4_bf16_n4", "mhc_pre_sm90_bf16"]);
        // Registry stages: the same ranges as the plan's buckets.
        assert_eq!(planned(4, 4096, Dtype::Bf16, Post, 64), ["mhc_post_v4_bf16_n4_v2"]);
        assert_eq!(planned(4, 4096, Dtype::Bf16, Post, 65), ["mhc_post_v4_bf16_n4"]);
        // Bad input is an error, not a panic.
        let limits = DeviceLimits::flagship(CudaArch::Sm90a);
        assert!(planned_kernels(&limits, &Config::new(4, 100), Dtype::Bf16, Pre, 1).is_err());
        assert!(planned_kernels(&limits, &Config::new(4, 4096), Dtype::Bf16, Pre, 0).is_err());
    }

    #[test]
    fn every_supported_shape_selects_and_others_say_why() {
        for stage in REGISTRY_STAGES {
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
}
