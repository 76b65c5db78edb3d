//! What every device's plan shares: the catalogue stages a plan serves ([`Slot`]), the question
//! asked of the loader's selector for a configuration ([`shape_of`]), the token ranges the
//! selector answers with ([`choose`]) and the table of those ranges a plan keeps per stage
//! ([`Ranges`]). The selector is the only place a kernel is chosen; a vendor supplies what the
//! catalogue cannot know (its device's limits, cluster occupancy), loads the chosen kernels and
//! launches them.

use crate::config::{Config, Dtype, Stage};
use crate::error::{Error, Result};
use mhc_loader::{Arch, Budget, Selector, Shape, TunedTable, Variant};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// The catalogue stages a plan serves, one table of token ranges each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Slot {
    /// [`Stage::Pre`].
    Pre,
    /// [`Stage::Post`].
    Post,
    /// [`Stage::PostPre`]: the fused kernels (the CUDA plan runs `post` then `pre` where
    /// none serves).
    PostPre,
    /// [`Stage::Head`].
    Head,
    /// [`Stage::Expand`].
    Expand,
    /// [`Stage::Static`].
    Static,
    /// Stage 2 alone, from given projections (the `coeffs` kernels); no [`Stage`] maps onto
    /// it.
    Coeffs,
}

impl Slot {
    /// Every slot, in table order ([`Slot::index`]).
    pub const ALL: [Slot; 7] =
        [Slot::Pre, Slot::Post, Slot::PostPre, Slot::Head, Slot::Expand, Slot::Static, Slot::Coeffs];

    /// The catalogue's stage name.
    pub const fn name(self) -> &'static str {
        match self {
            Slot::Pre => "pre",
            Slot::Post => "post",
            Slot::PostPre => "post_pre",
            Slot::Head => "head",
            Slot::Expand => "expand",
            Slot::Static => "static",
            Slot::Coeffs => "coeffs",
        }
    }

    /// The table of a stage of the API (`None`: no kernel computes it).
    pub const fn of(stage: Stage) -> Option<Slot> {
        match stage {
            Stage::Pre => Some(Slot::Pre),
            Stage::Post => Some(Slot::Post),
            Stage::PostPre => Some(Slot::PostPre),
            Stage::Head => Some(Slot::Head),
            Stage::Expand => Some(Slot::Expand),
            Stage::Static => Some(Slot::Static),
            _ => None,
        }
    }

    /// The table of a catalogue stage name.
    pub fn named(name: &str) -> Option<Slot> {
        Slot::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Position in [`Slot::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// What the catalogue is asked for `slot` of `cfg` in `dtype`: the sizes, the formulation and
/// the optional inputs of `pre` / `post_pre` (T is set per question).
pub fn shape_of(cfg: &Config, dtype: Dtype, slot: Slot) -> Shape {
    let mut shape =
        Shape::new(1, cfg.n as u32, cfg.c as u64, dtype.name()).with_formulation(&cfg.formulation.to_string());
    if matches!(slot, Slot::Pre | Slot::PostPre) {
        if cfg.gamma_k {
            shape = shape.with_option("gamma_k");
        }
        if cfg.gamma_f {
            shape = shape.with_option("gamma_f");
        }
    }
    shape
}

/// The tuned tables a plan's selection follows where they have an entry for the call (the
/// cost model decides elsewhere).
#[derive(Debug, Clone, Default)]
pub enum Tuning {
    /// The tables compiled into the crate (`asm/tuning/<arch>.toml`).
    #[default]
    Embedded,
    /// These tables instead of the embedded ones: a table `mhc tune` wrote for this GPU
    /// ([`Tuning::from_file`]).
    Tables(Vec<TunedTable>),
    /// No table: the cost model alone.
    CostModel,
}

/// Largest tuned table [`Tuning::from_file`] reads (a table of every key is a few hundred KiB).
pub const MAX_TABLE_BYTES: u64 = 16 << 20;

impl Tuning {
    /// The table in the file at `path`, read leniently: an entry that does not validate is
    /// skipped and named in the plan's warnings ([`mhc_loader::TunedTable::parse_lenient`]);
    /// a file that cannot be read, or is larger than [`MAX_TABLE_BYTES`], is an error.
    pub fn from_file(path: &std::path::Path) -> Result<Tuning> {
        use std::io::Read;
        let bad = |reason: String| Error::Config { what: "tuning", reason: format!("{}: {reason}", path.display()) };
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut text = String::new();
        file.take(MAX_TABLE_BYTES + 1).read_to_string(&mut text).map_err(|e| bad(e.to_string()))?;
        if text.len() as u64 > MAX_TABLE_BYTES {
            return Err(bad(format!("larger than {MAX_TABLE_BYTES} bytes")));
        }
        Ok(Tuning::Tables(vec![TunedTable::parse_lenient(&path.display().to_string(), &text)]))
    }
}

/// The selector of the embedded catalogue with `tuning`'s tables for a device of `units` SMs /
/// CUs named `device` (the tuned tables' entries are keyed by the unit count they were measured
/// on, and some by the GPU's name; without a name those do not apply).
pub fn selector(units: u32, device: Option<&str>, tuning: &Tuning) -> Result<Selector<'static>> {
    let bad = |e: mhc_loader::Error| Error::BadCodeObject {
        image: mhc_kernels::CATALOGUE_PATH.into(),
        reason: e.to_string(),
    };
    let base = match tuning {
        Tuning::Embedded => mhc_loader::select::embedded_selector().map_err(bad)?.clone(),
        Tuning::Tables(tables) => tables.iter().fold(Selector::new(catalogue()?), |s, table| s.with_table(table)),
        Tuning::CostModel => Selector::new(catalogue()?),
    };
    let base = base.with_units(units);
    Ok(match device {
        Some(name) => base.with_device(name),
        None => base,
    })
}

/// One token range of a stage: its last count and the variant chosen for it, or why none is.
pub type Choice = (usize, std::result::Result<&'static Variant, Error>);

/// A stage's token ranges ([`choose_with`]) and the selector's warnings about tuned entries it
/// ignored (stale, measured on another part, or not admissible for this call), each once.
#[derive(Debug)]
pub struct Choices {
    /// The ranges, in token order, the last open-ended.
    pub ranges: Vec<Choice>,
    /// Tuned entries ignored, and why.
    pub warnings: Vec<String>,
}

/// The catalogue's choice for `slot` of `cfg` in `dtype` on `arch` (with `units` SMs / CUs) at
/// every token count up to `max_tokens`, with the embedded tuned tables: [`choose_with`]'s
/// ranges.
#[allow(clippy::too_many_arguments)]
pub fn choose(
    arch: Arch,
    units: u32,
    cfg: &Config,
    dtype: Dtype,
    slot: Slot,
    max_tokens: usize,
    request: Option<&str>,
    admit: &dyn Fn(&Variant) -> std::result::Result<(), String>,
) -> Result<Vec<Choice>> {
    let selector = selector(units, None, &Tuning::Embedded)?;
    Ok(choose_with(&selector, arch, cfg, dtype, slot, max_tokens, request, admit).ranges)
}

/// The choice of `selector` (its tables and SM / CU count) for `slot` of `cfg` in `dtype` on
/// `arch` at every token count up to `max_tokens`: contiguous ranges, the last open-ended.
/// `request` restricts it to one launcher (benchmarks and tests); `admit` is the device's own
/// check of a variant that passed the catalogue's filters.
#[allow(clippy::too_many_arguments)]
pub fn choose_with(
    selector: &Selector<'static>,
    arch: Arch,
    cfg: &Config,
    dtype: Dtype,
    slot: Slot,
    max_tokens: usize,
    request: Option<&str>,
    admit: &dyn Fn(&Variant) -> std::result::Result<(), String>,
) -> Choices {
    let mut shape = shape_of(cfg, dtype, slot);
    if let Some(l) = request {
        shape = shape.with_launch(l);
    }
    let buckets = selector.buckets(arch, slot.name(), &shape, &Budget::default(), max_tokens as u64, admit);
    let mut warnings: Vec<String> = selector.warnings().to_vec();
    let ranges = buckets
        .into_iter()
        .map(|b| {
            let max = usize::try_from(b.max_tokens).unwrap_or(usize::MAX);
            if let Ok(sel) = &b.selection {
                for w in &sel.warnings {
                    if !warnings.contains(w) {
                        warnings.push(w.clone());
                    }
                }
            }
            let choice = b.selection.map(|s| s.variant).map_err(|nv| Error::NoVariant {
                stage: slot.name().into(),
                arch: arch.name().into(),
                shape: nv.shape.clone(),
                rejected: nv.reasons(),
            });
            (max, choice)
        })
        .collect();
    Choices { ranges, warnings }
}

/// The selector's account of its choice for one call: the query, the winner and why, every
/// candidate's rank and cost, every rejected row of the stage with its reason.
pub fn explain(
    selector: &Selector<'static>,
    arch: Arch,
    cfg: &Config,
    dtype: Dtype,
    slot: Slot,
    tokens: usize,
    admit: &dyn Fn(&Variant) -> std::result::Result<(), String>,
) -> Result<String> {
    let shape = shape_of(cfg, dtype, slot).at(tokens as u64);
    Ok(match selector.select_with(arch, slot.name(), &shape, &Budget::default(), admit) {
        Ok(sel) => sel.explain(),
        Err(nv) => nv.to_string(),
    })
}

/// The catalogue row's position (its kernel's cache slot in a device).
pub fn row_index(v: &Variant) -> Result<usize> {
    catalogue()?.variants().iter().position(|x| std::ptr::eq(x, v)).ok_or_else(|| Error::BadCodeObject {
        image: mhc_kernels::CATALOGUE_PATH.into(),
        reason: format!("{} is not a row of the embedded catalogue", v.id()),
    })
}

/// The embedded catalogue (an error here means the build is inconsistent; tests catch it).
pub fn catalogue() -> Result<&'static mhc_loader::Registry> {
    mhc_loader::Registry::embedded()
        .map_err(|e| Error::BadCodeObject { image: mhc_kernels::CATALOGUE_PATH.into(), reason: e.to_string() })
}

/// A stage's token ranges in a plan, in order, each with its bucket (a device's loaded kernel
/// and launch data) or why no kernel serves it.
#[derive(Debug)]
pub struct Ranges<B>(pub Vec<(usize, Result<B>)>);

impl<B> Ranges<B> {
    /// The bucket serving `tokens`.
    pub fn at(&self, slot: Slot, arch: &str, tokens: usize) -> Result<&B> {
        match self.0.iter().find(|(max, _)| tokens <= *max) {
            Some((_, b)) => b.as_ref().map_err(Clone::clone),
            None => Err(Error::NoVariant {
                stage: slot.name().into(),
                arch: arch.into(),
                shape: format!("T={tokens}"),
                rejected: vec!["no bucket covers this token count".into()],
            }),
        }
    }

    /// `Ok` when every token count has a kernel, else the first range's reason.
    pub fn complete(&self) -> Result<()> {
        match self.0.iter().find_map(|(_, b)| b.as_ref().err()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Whether any token count has a kernel.
    pub fn any(&self) -> bool {
        self.0.iter().any(|(_, b)| b.is_ok())
    }

    /// The buckets, in token order.
    pub fn buckets(&self) -> impl Iterator<Item = &B> {
        self.0.iter().filter_map(|(_, b)| b.as_ref().ok())
    }
}

/// A fresh identity for a plan (its workspaces carry it).
pub(crate) fn next_plan_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What ties a workspace to its use: the plan that sized and zeroed it (another plan's kernels
/// may leave counters and tags this plan's kernels do not expect) and the one stream it serves
/// (two streams at once would race on its counters). Checked by every op that takes it, in O(1).
#[derive(Debug)]
pub(crate) struct Binding {
    plan: u64,
    /// The stream handle of its first use (0: not used yet).
    stream: Cell<usize>,
}

impl Binding {
    pub(crate) fn new(plan: u64) -> Self {
        Binding { plan, stream: Cell::new(0) }
    }

    /// `Ok` when the workspace belongs to `plan` and serves `stream` (binding it on first use).
    pub(crate) fn check(&self, plan: u64, stream: usize) -> Result<()> {
        if self.plan != plan {
            return Err(Error::Workspace(
                "made by another plan (its kernels may leave counters this plan does not expect): use this plan's new_workspace()".into(),
            ));
        }
        match self.stream.get() {
            0 => {
                self.stream.set(stream);
                Ok(())
            }
            s if s == stream => Ok(()),
            _ => Err(Error::Workspace(
                "in use on another stream: a workspace serves one stream (make one per stream)".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_serves_its_plan_and_one_stream() {
        let (a, b) = (next_plan_id(), next_plan_id());
        assert_ne!(a, b);
        let ws = Binding::new(a);
        assert!(matches!(ws.check(b, 7), Err(Error::Workspace(m)) if m.contains("another plan")));
        ws.check(a, 7).unwrap();
        ws.check(a, 7).unwrap();
        assert!(matches!(ws.check(a, 8), Err(Error::Workspace(m)) if m.contains("another stream")));
    }

    #[test]
    fn views_on_another_device_are_refused() {
        use crate::device::view::check_device;
        assert!(check_device("x", 2, 1).is_err());
        assert!(check_device("x", 1, 1).is_ok());
        // Memory the crate did not allocate (0) is the caller's to vouch for.
        assert!(check_device("x", 0, 1).is_ok());
    }
}
