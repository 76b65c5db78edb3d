//! The selector: filter -> score -> tuned override.
//!
//! 1. **Filter** (hard constraints, in this order; the first that fails is the reason recorded):
//!    stage, architecture (the variant's code object must run on the device), formulation,
//!    dtype, n, C divisibility, C range, token range, register budget (registers per thread
//!    against `Budget::max_registers_per_thread`), register file (allocated registers x threads
//!    must fit one SM/CU), shared-memory budget and the architecture's per-block limit.
//! 2. **Score**: a small cost model, in estimated microseconds (lower is better):
//!
//!    ```text
//!    blocks   = ceil(T / tile.tokens) * tile.split
//!    resident = blocks one SM/CU holds at once: min(max blocks, threads/unit / threads,
//!               register file / (allocated registers x threads), shared/unit / shared)
//!    waves    = ceil(blocks / (units x resident))
//!    bytes    = T x (x_passes x n x C x dtype size + 2 x M x 4)       M = n^2 + 2n
//!             + (split > 1 ? ceil(T / tile.tokens) x split x M x 4 x 2 : 0)   (split-K partials)
//!    active   = min(blocks, units x resident)          blocks in flight
//!    bw       = DRAM bytes per us x min(1, active / units)   (a few blocks cannot saturate DRAM:
//!               each SM/CU streams at most its share; this is what split-K buys at small T)
//!    cost     = wave_us x waves + bytes / bw + (split > 1 ? SPLIT_US : 0)
//!               (wave_us: the variant's `wave_us` from the catalogue, else WAVE_US)
//!    cost    *= OUTSIDE_PREFERRED when T is outside the variant's prefer_tokens range
//!    ```
//!    `units` is the device's SM/CU count when given, else the flagship part's
//!    ([`Arch::default_compute_units`]). Ties keep catalogue order (stable sort).
//! 3. **Override**: if a tuned table has an entry for (arch, units, stage, dtype, formulation,
//!    device, bucket(T), n, bucket(C)) whose variant passed the filters, it wins (an entry for
//!    this GPU before one for every GPU, then an entry for the call's formulation before one for
//!    either; an entry for another GPU does not answer); a tuned variant that was filtered out,
//!    or an entry for this problem measured on a part with another SM/CU count, is reported in
//!    `warnings` and the cost model's choice stands. A `post_pre` entry of
//!    [`crate::tuning::POST_THEN_PRE`] rejects every fused row
//!    ([`Reason::Tuned`]): the selection fails, and the runtime runs `post`, then `pre`.

use crate::arch::Arch;
use crate::registry::{Registry, Variant};
use crate::tuning::{bucket, TunedEntry, TunedTable, POST_THEN_PRE};
use crate::Error;
use std::fmt;

/// Minimum time of one wave of blocks (launch, memory latency), microseconds.
pub const WAVE_US: f64 = 1.0;
/// Extra time of a split-K reduction's final pass (the last block sums the partials).
pub const SPLIT_US: f64 = 1.0;
/// Cost factor for a variant used outside the token range it is meant for.
pub const OUTSIDE_PREFERRED: f64 = 1.5;

/// The problem: tokens, streams, hidden size, activation dtype and (optionally) formulation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// T, the token count.
    pub tokens: u64,
    /// n, the stream count.
    pub n: u32,
    /// C, the hidden size (channels per stream).
    pub c: u64,
    /// `f32` or `bf16`.
    pub dtype: String,
    /// `v4` or `paper`; `None` accepts either.
    pub formulation: Option<String>,
    /// Optional inputs the call has (`gamma_k`, `gamma_f`): a variant must handle each.
    pub options: Vec<String>,
    /// Only variants of this launcher, at any token count (benchmarks and tests that ask for one
    /// kernel family; the launcher checks its kernel's capacity); variants kept for comparison
    /// (`on_request`) are eligible only this way.
    pub launch: Option<String>,
}

impl Shape {
    /// T tokens of n streams of C channels stored as `dtype` (`f32` or `bf16`): either
    /// formulation, no optional inputs, any launcher.
    pub fn new(tokens: u64, n: u32, c: u64, dtype: &str) -> Shape {
        Shape { tokens, n, c, dtype: dtype.to_string(), formulation: None, options: Vec::new(), launch: None }
    }

    /// The same shape with the optional input `option` (`gamma_k`, `gamma_f`).
    pub fn with_option(mut self, option: &str) -> Shape {
        self.options.push(option.to_string());
        self
    }

    /// The same shape, asking for the variants of launcher `launch` only.
    pub fn with_launch(mut self, launch: &str) -> Shape {
        self.launch = Some(launch.to_string());
        self
    }

    /// The same shape at `tokens` tokens.
    pub fn at(&self, tokens: u64) -> Shape {
        Shape { tokens, ..self.clone() }
    }

    /// The same shape, accepting only variants of formulation `f` (`v4` or `paper`).
    pub fn with_formulation(mut self, f: &str) -> Shape {
        self.formulation = Some(f.to_string());
        self
    }

    fn dtype_size(&self) -> u64 {
        if self.dtype == "bf16" {
            2
        } else {
            4
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "T={} n={} C={} {}", self.tokens, self.n, self.c, self.dtype)?;
        if let Some(form) = &self.formulation {
            write!(f, " {form}")?;
        }
        for o in &self.options {
            write!(f, " +{o}")?;
        }
        if let Some(l) = &self.launch {
            write!(f, " (launcher {l})")?;
        }
        Ok(())
    }
}

/// Limits the caller imposes (e.g. to leave room for a co-resident kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    /// Most registers per thread a variant may use (as reported); `None`: no limit.
    pub max_registers_per_thread: Option<u32>,
    /// Most static shared memory / LDS per block a variant may use, bytes; `None`: only the
    /// architecture's limit.
    pub max_shared_bytes: Option<u32>,
}

/// Why a variant was rejected.
#[derive(Debug, Clone, PartialEq)]
pub enum Reason {
    /// The variant is of another stage.
    Stage {
        /// The variant's stage.
        variant: String,
    },
    /// The variant's code object does not run on the device.
    Arch {
        /// The code object's architecture.
        variant: Arch,
        /// The device's architecture.
        device: Arch,
    },
    /// The variant lacks the formulation the call asked for.
    Formulation {
        /// The formulation asked for.
        wanted: String,
        /// The variant's formulations.
        supported: Vec<String>,
    },
    /// The variant lacks the call's activation dtype.
    Dtype {
        /// The call's dtype.
        wanted: String,
        /// The variant's dtypes.
        supported: Vec<String>,
    },
    /// The variant is not built for the call's stream count.
    N {
        /// The call's n.
        n: u32,
        /// The stream counts the variant handles.
        supported: Vec<u32>,
    },
    /// C is not a multiple of the variant's granularity.
    CMultiple {
        /// The call's C.
        c: u64,
        /// The multiple the variant needs.
        multiple_of: u64,
    },
    /// C is outside the variant's range.
    CRange {
        /// The call's C.
        c: u64,
        /// The variant's smallest C.
        min: u64,
        /// The variant's largest C (inclusive).
        max: u64,
    },
    /// The token count is outside the variant's (hard) token range.
    Tokens {
        /// The call's T.
        t: u64,
        /// The variant's smallest T.
        min: u64,
        /// The variant's largest T (inclusive).
        max: u64,
    },
    /// The call has an optional input the variant does not handle.
    Option {
        /// The optional input (`gamma_k`, `gamma_f`).
        option: String,
        /// The optional inputs the variant handles.
        supported: Vec<String>,
    },
    /// The call asked for another launcher.
    Launcher {
        /// The launcher asked for.
        wanted: String,
        /// The variant's launcher.
        has: String,
    },
    /// Kept for comparison: chosen only when asked for by launcher.
    OnRequest,
    /// The variant uses more registers per thread than the caller's [`Budget`] allows.
    RegisterBudget {
        /// Registers per thread the variant uses (as reported).
        uses: u32,
        /// [`Budget::max_registers_per_thread`].
        budget: u32,
    },
    /// One block's registers do not fit the register file of one SM/CU.
    RegisterFile {
        /// Registers per thread as allocated.
        registers: u32,
        /// Threads per block, rounded up to whole warps / wavefronts.
        threads: u32,
        /// Registers per SM/CU.
        file: u32,
    },
    /// The variant uses more shared memory than the caller's [`Budget`] allows.
    SharedBudget {
        /// Static shared memory / LDS per block, bytes.
        uses: u32,
        /// [`Budget::max_shared_bytes`].
        budget: u32,
    },
    /// The variant uses more shared memory than the architecture allows per block.
    SharedArch {
        /// Static shared memory / LDS per block, bytes.
        uses: u32,
        /// The architecture's per-block limit, bytes.
        max: u32,
    },
    /// The device's own limits for this launch (SM count, occupancy, shared memory for this C),
    /// as the runtime's launcher reports them.
    Launch {
        /// The launcher's explanation.
        why: String,
    },
    /// A tuned entry chose no row of this stage here (`post_pre`: `post`, then `pre`).
    Tuned {
        /// The entry's evidence: its choice, times, GPU and date.
        evidence: String,
    },
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Stage { variant } => write!(f, "it is a {variant} variant"),
            Reason::Arch { variant, device } => write!(f, "built for {variant}, which does not run on {device}"),
            Reason::Formulation { wanted, supported } => {
                write!(f, "formulation {wanted} not supported (has {})", supported.join(", "))
            }
            Reason::Dtype { wanted, supported } => {
                write!(f, "dtype {wanted} not supported (has {})", supported.join(", "))
            }
            Reason::N { n, supported } => write!(f, "n={n} not supported (has {supported:?})"),
            Reason::CMultiple { c, multiple_of } => write!(f, "C={c} is not a multiple of {multiple_of}"),
            Reason::CRange { c, min, max } => write!(f, "C={c} outside {min}..={max}"),
            Reason::Tokens { t, min, max } => write!(f, "T={t} outside its token range {min}..={max}"),
            Reason::Option { option, supported } => {
                if supported.is_empty() {
                    write!(f, "{option} not supported (has no optional inputs)")
                } else {
                    write!(f, "{option} not supported (has {})", supported.join(", "))
                }
            }
            Reason::Launch { why } => write!(f, "{why}"),
            Reason::Tuned { evidence } => write!(f, "{evidence}"),
            Reason::Launcher { wanted, has } => write!(f, "launcher {has}, not the requested {wanted}"),
            Reason::OnRequest => write!(f, "kept for comparison, run only when asked for by launcher"),
            Reason::RegisterBudget { uses, budget } => {
                write!(f, "uses {uses} registers per thread, over the budget of {budget}")
            }
            Reason::RegisterFile { registers, threads, file } => write!(
                f,
                "{registers} registers x {threads} threads = {} exceed the {file}-register file",
                registers * threads
            ),
            Reason::SharedBudget { uses, budget } => {
                write!(f, "uses {uses} B of shared memory, over the budget of {budget} B")
            }
            Reason::SharedArch { uses, max } => write!(f, "uses {uses} B of shared memory, over the {max} B limit"),
        }
    }
}

/// A rejected variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// The variant's catalogue id.
    pub id: String,
    /// The first filter it failed.
    pub reason: Reason,
}

/// An admissible variant with its estimated cost.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The variant's catalogue id.
    pub id: String,
    /// The variant's measured preference (higher first, then cost).
    pub rank: u32,
    /// The cost model's estimate, microseconds (lower is better).
    pub cost_us: f64,
    /// Waves of blocks over the device's SM/CUs.
    pub waves: u64,
    /// Bytes the cost model counts (activations, coefficients, split-K partials).
    pub bytes: u64,
    /// Whether T is in the variant's `prefer_tokens` range (else the cost is scaled by
    /// [`OUTSIDE_PREFERRED`]).
    pub in_preferred_range: bool,
}

/// How the winner was chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Choice {
    /// Lowest modelled cost.
    CostModel,
    /// A tuned table's entry (its evidence).
    Tuned(Box<TunedEntry>),
}

/// No variant passed the filters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no variant for stage {stage} on {arch} at {shape}:\n{}{}", none_exist(.rejected), explain_rejections(.rejected, *.other_stages, *.other_arches))]
pub struct NoVariant {
    /// The stage asked for.
    pub stage: String,
    /// The device's architecture, by name.
    pub arch: String,
    /// The shape asked for, as [`Shape`] displays it.
    pub shape: String,
    /// Every variant of this stage and architecture family, with its reason, in catalogue order.
    pub rejected: Vec<Rejection>,
    /// Variants of other stages (not listed one by one).
    pub other_stages: usize,
    /// Variants of this stage for other architectures (not listed one by one).
    pub other_arches: usize,
}

impl NoVariant {
    /// One line per rejected variant of this stage.
    pub fn reasons(&self) -> Vec<String> {
        self.rejected.iter().map(|r| format!("{}: {}", r.id, r.reason)).collect()
    }
}

/// A failed selection that rejected nothing had nothing to choose from.
fn none_exist(rejected: &[Rejection]) -> &'static str {
    if rejected.is_empty() {
        "  (no variant of this stage exists)\n"
    } else {
        ""
    }
}

fn explain_rejections(rejected: &[Rejection], other_stages: usize, other_arches: usize) -> String {
    let mut s = String::new();
    for r in rejected {
        s.push_str(&format!("  rejected {}: {}\n", r.id, r.reason));
    }
    if other_arches > 0 {
        s.push_str(&format!("  ({other_arches} variants of this stage for other architectures not considered)\n"));
    }
    if other_stages > 0 {
        s.push_str(&format!("  ({other_stages} variants of other stages not considered)\n"));
    }
    s
}

/// The outcome of a selection.
#[derive(Debug, Clone)]
pub struct Selection<'r> {
    /// The chosen variant.
    pub variant: &'r Variant,
    /// How it was chosen.
    pub choice: Choice,
    /// The device's architecture.
    pub arch: Arch,
    /// The stage asked for.
    pub stage: String,
    /// The shape asked for.
    pub shape: Shape,
    /// The caller's limits.
    pub budget: Budget,
    /// The SM/CU count the cost model used.
    pub units: u32,
    /// Admissible variants, cheapest first.
    pub candidates: Vec<Candidate>,
    /// Rejected variants of this stage, in catalogue order.
    pub rejected: Vec<Rejection>,
    /// Variants of other stages (not listed one by one).
    pub other_stages: usize,
    /// Variants of this stage for other architectures (not listed one by one).
    pub other_arches: usize,
    /// Tuned entries that were ignored, and why.
    pub warnings: Vec<String>,
}

impl Selection<'_> {
    /// Why the chosen variant won without a tuned entry: the lowest estimated time, or its rank
    /// (a measured preference ahead of the cost model) over a variant the model estimates lower.
    fn untuned_reason(&self) -> String {
        let chosen = self.candidates.iter().find(|c| c.id == self.variant.id());
        let cheapest = self.candidates.iter().min_by(|a, b| a.cost_us.total_cmp(&b.cost_us));
        match (chosen, cheapest) {
            (Some(c), Some(m)) if c.rank > m.rank && m.cost_us < c.cost_us => format!(
                "  by its rank ({}, measured ahead of the cost model, which estimates {} lowest: {:.2} us)\n",
                c.rank, m.id, m.cost_us
            ),
            _ => "  by the cost model (lowest estimated time)\n".to_string(),
        }
    }

    /// A readable account: the query, the winner and why, every candidate's cost, every
    /// rejection with its reason, and warnings.
    pub fn explain(&self) -> String {
        let mut s = format!("select stage {} on {} ({} units) for {}", self.stage, self.arch, self.units, self.shape);
        if let Some(r) = self.budget.max_registers_per_thread {
            s.push_str(&format!(", at most {r} registers/thread"));
        }
        if let Some(b) = self.budget.max_shared_bytes {
            s.push_str(&format!(", at most {b} B shared"));
        }
        s.push('\n');
        let v = self.variant;
        s.push_str(&format!("chosen: {} ({} in {})\n", v.id(), v.entry.entry, v.entry.file));
        match &self.choice {
            Choice::CostModel => s.push_str(&self.untuned_reason()),
            Choice::Tuned(e) => {
                s.push_str(&format!(
                    "  by the tuned table: {:.2} us, {:.0} GB/s, error {:.1e}, {} samples on {} units{}, {}\n",
                    e.us,
                    e.gbps,
                    e.error,
                    e.samples,
                    e.units,
                    e.gpu.as_deref().map(|g| format!(" ({g})")).unwrap_or_default(),
                    e.date
                ));
                let model = self.candidates.first().map_or("none", |c| c.id.as_str());
                let measured =
                    e.cost_model_us.map(|us| format!(", measured {us:.2} us in the same run")).unwrap_or_default();
                s.push_str(&format!("  the cost model would choose: {model}{measured}\n"));
                if let (Some(r), Some(m)) = (&e.runner_up, e.runner_up_margin_pct) {
                    s.push_str(&format!("  runner-up when tuned: {r}, {m:.1}% slower\n"));
                }
            }
        }
        s.push_str(&format!("  why it exists: {}\n", v.entry.why));
        s.push_str("candidates (estimated cost):\n");
        for c in &self.candidates {
            s.push_str(&format!(
                "  {:<32} rank {:>2} {:>9.2} us  waves {:>4}  {:>12} B{}\n",
                c.id,
                c.rank,
                c.cost_us,
                c.waves,
                c.bytes,
                if c.in_preferred_range { "" } else { "  (T outside its preferred range)" }
            ));
        }
        s.push_str(&explain_rejections(&self.rejected, self.other_stages, self.other_arches));
        for w in &self.warnings {
            s.push_str(&format!("warning: {w}\n"));
        }
        s
    }
}

/// A registry plus tuned entries, the device's SM/CU count and its name.
#[derive(Debug, Clone)]
pub struct Selector<'r> {
    registry: &'r Registry,
    tuned: Vec<TunedEntry>,
    warnings: Vec<String>,
    units: Option<u32>,
    device: Option<String>,
}

impl<'r> Selector<'r> {
    /// A selector over `registry`'s variants with no tuned tables, for the flagship part's SM/CU
    /// count.
    pub fn new(registry: &'r Registry) -> Selector<'r> {
        Selector { registry, tuned: Vec::new(), warnings: Vec::new(), units: None, device: None }
    }

    /// Adds a tuned table; stale entries are dropped and reported in every selection's warnings.
    pub fn with_table(mut self, table: &TunedTable) -> Selector<'r> {
        let (kept, warnings) = table.check(self.registry);
        self.tuned.extend(kept);
        self.warnings.extend(warnings);
        self
    }

    /// The device's SM/CU count (default: the architecture's flagship part).
    pub fn with_units(mut self, units: u32) -> Selector<'r> {
        self.units = Some(units);
        self
    }

    /// The device's name as the driver reports it: tuned entries for this GPU apply, before
    /// those for every GPU. Without it (a selection made without a device) entries for one GPU
    /// do not apply.
    pub fn with_device(mut self, name: &str) -> Selector<'r> {
        self.device = Some(name.to_string());
        self
    }

    /// Warnings from loading the tuned tables.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The variant of `stage` for `shape` on a device of architecture `arch` within `budget`:
    /// filter, score, tuned override (module documentation); [`NoVariant`] lists every rejection
    /// when none passes.
    pub fn select(&self, arch: Arch, stage: &str, shape: &Shape, budget: &Budget) -> Result<Selection<'r>, NoVariant> {
        self.select_with(arch, stage, shape, budget, &|_| Ok(()))
    }

    /// [`Selector::select`] with the device's own limits: `admit(variant)` is asked for every
    /// variant that passed the catalogue's filters, last, and an `Err(why)` rejects it with
    /// [`Reason::Launch`] (the runtime's launchers know what the catalogue cannot: the SM count,
    /// cluster occupancy, the shared memory a C needs on this device).
    pub fn select_with(
        &self,
        arch: Arch,
        stage: &str,
        shape: &Shape,
        budget: &Budget,
        admit: &dyn Fn(&Variant) -> Result<(), String>,
    ) -> Result<Selection<'r>, NoVariant> {
        let units = self.units.unwrap_or_else(|| arch.default_compute_units()).max(1);
        let mut rejected = Vec::new();
        let (mut other_stages, mut other_arches) = (0, 0);
        let mut admissible: Vec<(usize, &'r Variant, Candidate)> = Vec::new();
        for (index, v) in self.registry.variants().iter().enumerate() {
            if v.entry.stage != stage {
                other_stages += 1;
                continue;
            }
            if v.arch.family() != arch.family() {
                other_arches += 1;
                continue;
            }
            match filter(v, arch, shape, budget).and_then(|()| admit(v).map_err(|why| Reason::Launch { why })) {
                Err(reason) => rejected.push(Rejection { id: v.id().to_string(), reason }),
                Ok(()) => admissible.push((index, v, score(v, arch, units, shape))),
            }
        }
        // Highest rank first, then the lowest cost; equal ones keep catalogue order.
        admissible
            .sort_by(|a, b| b.2.rank.cmp(&a.2.rank).then(a.2.cost_us.total_cmp(&b.2.cost_us)).then(a.0.cmp(&b.0)));
        let none = |rejected| NoVariant {
            stage: stage.to_string(),
            arch: arch.to_string(),
            shape: shape.to_string(),
            rejected,
            other_stages,
            other_arches,
        };
        let Some(&(_, best, _)) = admissible.first() else {
            return Err(none(rejected));
        };
        let mut warnings = self.warnings.clone();
        let mut variant = best;
        let mut choice = Choice::CostModel;
        // The entry for this key; the SM/CU count is compared last, so that an entry measured
        // on another part is named.
        let same_problem = |e: &&TunedEntry| {
            Arch::parse(&e.arch).map(Arch::family) == Ok(arch.family())
                && e.stage == stage
                && e.dtype == shape.dtype
                && e.tokens == bucket(shape.tokens)
                && e.n == shape.n
                && e.c == bucket(shape.c)
        };
        // An entry for this GPU before one for every GPU, then the call's formulation before
        // either; an entry for another GPU, or for the other formulation, does not answer.
        let answers = |e: &&TunedEntry| {
            (e.formulation.is_none() || e.formulation == shape.formulation)
                && (e.device.is_none() || e.device == self.device)
        };
        let specific = |e: &&TunedEntry| std::cmp::Reverse((e.device.is_some(), e.formulation.is_some()));
        let found = self.tuned.iter().filter(same_problem).filter(answers).min_by_key(specific);
        let entry = match found {
            Some(e) if e.units != units => {
                warnings.push(format!(
                    "tuned entry {} ({}) was measured on a part with {} units, this device has {units}: ignored",
                    e.variant, e.date, e.units
                ));
                None
            }
            other => other,
        };
        // A call that asked for one launcher gets it: two launches are not a launcher.
        if let Some(entry) = entry.filter(|e| e.variant == POST_THEN_PRE && shape.launch.is_none()) {
            let evidence = post_then_pre_evidence(entry);
            rejected.extend(admissible.iter().map(|(_, v, _)| Rejection {
                id: v.id().to_string(),
                reason: Reason::Tuned { evidence: evidence.clone() },
            }));
            return Err(none(rejected));
        }
        if let Some(entry) = entry.filter(|e| e.variant != POST_THEN_PRE) {
            match admissible.iter().find(|(_, v, _)| v.id() == entry.variant) {
                Some(&(_, v, _)) => {
                    variant = v;
                    choice = Choice::Tuned(Box::new(entry.clone()));
                }
                None => {
                    let why = rejected
                        .iter()
                        .find(|r| r.id == entry.variant)
                        .map(|r| r.reason.to_string())
                        .unwrap_or_else(|| "not a candidate".into());
                    warnings.push(format!(
                        "tuned choice {} is not admissible here ({why}); using the cost model",
                        entry.variant
                    ));
                }
            }
        }
        Ok(Selection {
            variant,
            choice,
            arch,
            stage: stage.to_string(),
            shape: shape.clone(),
            budget: *budget,
            units,
            candidates: admissible.into_iter().map(|(_, _, c)| c).collect(),
            rejected,
            other_stages,
            other_arches,
            warnings,
        })
    }
}

/// How the rejection of a fused row by a [`POST_THEN_PRE`] entry begins (what follows: the
/// entry's times, GPU and date); the runtime's account of a plan looks for it.
pub const CHOSE_POST_THEN_PRE: &str = "the tuned table chose post, then pre";

/// Why a [`POST_THEN_PRE`] entry rejects the fused rows: its times, GPU and date.
fn post_then_pre_evidence(e: &TunedEntry) -> String {
    let beaten = match (&e.cost_model, e.cost_model_us) {
        (Some(v), Some(us)) => format!(" against {us:.2} us for {v}"),
        (Some(v), None) => format!(" against {v}"),
        _ => String::new(),
    };
    format!(
        "{CHOSE_POST_THEN_PRE}: {:.2} us{beaten} ({} samples on {}, {})",
        e.us,
        e.samples,
        e.gpu.as_deref().or(e.device.as_deref()).unwrap_or("the GPU measured"),
        e.date
    )
}

/// One token range of a stage and the selection that serves it ([`Selector::buckets`]).
#[derive(Debug, Clone)]
pub struct TokenBucket<'r> {
    /// Largest token count of the range (`u64::MAX` for the last, open-ended one); the range
    /// begins after the previous bucket's `max_tokens`.
    pub max_tokens: u64,
    /// The selection at the range's last listed count (the same variant serves all of it), or
    /// why no variant serves these counts.
    pub selection: Result<Selection<'r>, NoVariant>,
}

impl<'r> Selector<'r> {
    /// The variant of `stage` for every token count `1..=max_tokens`, as contiguous ranges.
    /// The selection is made at every count where it can change: where a variant of the stage
    /// begins or ends its token range (`tokens.min - 1`, `tokens.max`), at every power of two
    /// (the tuned tables' token buckets) and at `max_tokens`; consecutive counts with the same
    /// answer (the same winner, or none) merge, and the last range is open-ended.
    pub fn buckets(
        &self,
        arch: Arch,
        stage: &str,
        shape: &Shape,
        budget: &Budget,
        max_tokens: u64,
        admit: &dyn Fn(&Variant) -> Result<(), String>,
    ) -> Vec<TokenBucket<'r>> {
        let max_tokens = max_tokens.max(1);
        let mut bounds: Vec<u64> = self
            .registry
            .variants()
            .iter()
            .filter(|v| v.entry.stage == stage && v.arch.runs_on(arch))
            .flat_map(|v| [v.entry.tokens.min.saturating_sub(1), v.entry.tokens.max])
            .chain((0..64).map(|k| 1u64 << k))
            .filter(|&t| t >= 1 && t < max_tokens)
            .collect();
        bounds.push(max_tokens);
        bounds.sort_unstable();
        bounds.dedup();
        let id = |s: &Result<Selection<'r>, NoVariant>| s.as_ref().ok().map(|s| s.variant.id().to_string());
        let mut out: Vec<TokenBucket<'r>> = Vec::new();
        for t in bounds {
            let sel = self.select_with(arch, stage, &shape.at(t), budget, admit);
            match out.last_mut() {
                Some(last) if id(&last.selection) == id(&sel) => {
                    last.max_tokens = t;
                    last.selection = sel;
                }
                _ => out.push(TokenBucket { max_tokens: t, selection: sel }),
            }
        }
        if let Some(last) = out.last_mut() {
            last.max_tokens = u64::MAX;
        }
        out
    }
}

/// The hard constraints, in a fixed order; the first failure is the reason.
fn filter(v: &Variant, arch: Arch, shape: &Shape, budget: &Budget) -> Result<(), Reason> {
    let e = &v.entry;
    if !v.arch.runs_on(arch) {
        return Err(Reason::Arch { variant: v.arch, device: arch });
    }
    match &shape.launch {
        Some(wanted) if *wanted != e.launch => {
            return Err(Reason::Launcher { wanted: wanted.clone(), has: e.launch.clone() })
        }
        None if e.geometry.has(crate::catalogue::Trait::OnRequest) => return Err(Reason::OnRequest),
        _ => {}
    }
    if let Some(f) = &shape.formulation {
        if !e.formulations.contains(f) {
            return Err(Reason::Formulation { wanted: f.clone(), supported: e.formulations.clone() });
        }
    }
    if !e.dtypes.contains(&shape.dtype) {
        return Err(Reason::Dtype { wanted: shape.dtype.clone(), supported: e.dtypes.clone() });
    }
    if !e.n.contains(&shape.n) {
        return Err(Reason::N { n: shape.n, supported: e.n.clone() });
    }
    if shape.c % e.c.multiple_of != 0 {
        return Err(Reason::CMultiple { c: shape.c, multiple_of: e.c.multiple_of });
    }
    if shape.c < e.c.min || shape.c > e.c.max {
        return Err(Reason::CRange { c: shape.c, min: e.c.min, max: e.c.max });
    }
    if let Some(o) = shape.options.iter().find(|o| !e.options.contains(o)) {
        return Err(Reason::Option { option: o.clone(), supported: e.options.clone() });
    }
    // A call that asks for a launcher gets it wherever its kernel runs (the launcher checks its
    // capacity); the token ranges say where the selector uses it.
    if shape.launch.is_none() && !e.tokens.contains(shape.tokens) {
        return Err(Reason::Tokens { t: shape.tokens, min: e.tokens.min, max: e.tokens.max });
    }
    let r = &v.resources;
    if let Some(budget) = budget.max_registers_per_thread {
        if r.registers > budget {
            return Err(Reason::RegisterBudget { uses: r.registers, budget });
        }
    }
    let threads = e.threads.next_multiple_of(arch.warp_size());
    let file = arch.register_file_per_unit();
    if u64::from(r.registers_allocated) * u64::from(threads) > u64::from(file) {
        return Err(Reason::RegisterFile { registers: r.registers_allocated, threads, file });
    }
    if let Some(budget) = budget.max_shared_bytes {
        if r.shared_bytes > budget {
            return Err(Reason::SharedBudget { uses: r.shared_bytes, budget });
        }
    }
    if r.shared_bytes > arch.max_shared_per_block() {
        return Err(Reason::SharedArch { uses: r.shared_bytes, max: arch.max_shared_per_block() });
    }
    Ok(())
}

/// The cost model of the module documentation.
fn score(v: &Variant, arch: Arch, units: u32, shape: &Shape) -> Candidate {
    let e = &v.entry;
    let r = &v.resources;
    let (t, n, c) = (shape.tokens, u64::from(shape.n), shape.c);
    let m = n * n + 2 * n;
    let tiles = t.div_ceil(u64::from(e.tile.tokens));
    let split = u64::from(e.tile.split);
    let blocks = tiles * split;
    let threads = u64::from(e.threads.next_multiple_of(arch.warp_size()));
    let by_threads = u64::from(arch.max_threads_per_unit()) / threads;
    let by_regs = u64::from(arch.register_file_per_unit()) / (u64::from(r.registers_allocated.max(1)) * threads);
    let by_shared = u64::from(arch.shared_per_unit()) / u64::from(r.shared_bytes.max(1));
    let resident = u64::from(arch.max_blocks_per_unit()).min(by_threads).min(by_regs).min(by_shared).max(1);
    let waves = blocks.div_ceil(u64::from(units) * resident).max(1);
    let mut bytes = t * (u64::from(e.x_passes) * n * c * shape.dtype_size() + 2 * m * 4);
    if split > 1 {
        bytes += tiles * split * m * 4 * 2;
    }
    let active = blocks.min(u64::from(units) * resident);
    let bandwidth = arch.dram_bytes_per_us() * (active as f64 / f64::from(units)).min(1.0);
    let mut cost = e.wave_us.unwrap_or(WAVE_US) * waves as f64 + bytes as f64 / bandwidth;
    if split > 1 {
        cost += SPLIT_US;
    }
    let in_preferred_range = e.prefer_tokens().contains(t);
    if !in_preferred_range {
        cost *= OUTSIDE_PREFERRED;
    }
    Candidate { id: e.id.clone(), rank: e.rank, cost_us: cost, waves, bytes, in_preferred_range }
}

static EMBEDDED_SELECTOR: std::sync::OnceLock<Result<Selector<'static>, Error>> = std::sync::OnceLock::new();

/// The selector of the embedded registry and tuned tables with the flagship parts' SM/CU
/// counts, built once.
pub fn embedded_selector() -> Result<&'static Selector<'static>, Error> {
    EMBEDDED_SELECTOR
        .get_or_init(|| {
            let mut selector = Selector::new(Registry::embedded()?);
            for table in crate::tuning::embedded_tables()? {
                selector = selector.with_table(&table);
            }
            Ok(selector)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Selects from the embedded registry with the embedded tuned tables and the flagship part's
/// SM/CU count. Warnings about stale tuned entries are in the selection.
pub fn select(arch: Arch, stage: &str, shape: &Shape, budget: &Budget) -> Result<Selection<'static>, Error> {
    Ok(embedded_selector()?.select(arch, stage, shape, budget)?)
}
