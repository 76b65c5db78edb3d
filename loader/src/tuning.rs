//! Tuned tables: `asm/tuning/<arch>.toml`, written by the tuner, read here. Each `[[entry]]` says
//! which variant won for one key, with the evidence (format in asm/tuning/README.md):
//!
//! key:   arch, units (SM/CU count of the GPU it was measured on), stage, dtype, formulation
//!        (optional: absent answers either), device (optional: the GPU's name; absent answers
//!        every GPU of that arch and unit count), tokens / c bucketed up to a power of two
//!        ([`bucket`]), n exact
//! value: variant, image_sha256 (of the image it was measured with), us, gbps, error, samples,
//!        date, and optionally the tuner's further evidence (GPU, driver, % of copy, spread,
//!        the cost model's choice and time, the runner-up and its margin)
//!
//! `mhc tune` writes tables with [`TunedTable::render`]: entries sorted by key, numbers in a
//! fixed format, so the same measurements give the same file.
//!
//! Tables are validated when parsed: [`TunedTable::parse`] (the tests) refuses a table with any
//! malformed entry; [`TunedTable::parse_lenient`] (run-time selection) skips such an entry with
//! a warning naming it and keeps the rest. Entries that no longer apply (unknown variant, or an
//! image whose hash changed since it was measured) are dropped by [`TunedTable::check`]. Every
//! warning is returned as data, never printed by the library.

use crate::arch::Arch;
use crate::registry::Registry;
use crate::Error;
use serde::Deserialize;

/// The tuned tables compiled into the crate, one per architecture (may be empty).
pub const EMBEDDED_TABLES: [(&str, &str); 3] = mhc_kernels::TUNED_TABLES;

/// The variant of a `post_pre` entry that chose none of the stage's fused rows: the plan runs
/// its `post` kernel, then its `pre` kernel (two launches). Where the memory is fast against the
/// SMs' rate, two streaming kernels can beat one fused pass that moves fewer bytes, so the choice
/// is measured per GPU. Such an entry names the fused row it beat in `cost_model` and carries
/// that row's image hash, so it goes stale with that image as any entry goes stale with its own.
pub const POST_THEN_PRE: &str = "post+pre";

/// Size bucket of a tuning key: `x` rounded up to a power of two (1, 2, 4, ...).
pub fn bucket(x: u64) -> u64 {
    x.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// One measured winner.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TunedEntry {
    /// The architecture measured (a name [`Arch::parse`] accepts).
    pub arch: String,
    /// SM / CU count of the GPU measured.
    pub units: u32,
    /// The stage (`pre`, `post`, ...).
    pub stage: String,
    /// The activation dtype: `f32` or `bf16`.
    pub dtype: String,
    /// Token bucket (power of two).
    pub tokens: u64,
    /// The stream count (exact, 1..=32).
    pub n: u32,
    /// Hidden-size bucket (power of two).
    pub c: u64,
    /// The winning variant's catalogue id.
    pub variant: String,
    /// Lowercase hex SHA-256 of the image measured; the entry is dropped once the image changes.
    pub image_sha256: String,
    /// Median time, microseconds.
    pub us: f64,
    /// Achieved bandwidth, GB/s.
    pub gbps: f64,
    /// Error against the reference (max abs over the coefficients / relative for outputs).
    pub error: f64,
    /// Timed runs behind the median (at least 1).
    pub samples: u32,
    /// YYYY-MM-DD.
    pub date: String,
    /// The formulation measured (`v4` or `paper`); absent: the entry answers either.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formulation: Option<String>,
    /// The GPU the entry is for, by the name the driver reports (`NVIDIA H200`); absent: every
    /// GPU of this architecture and unit count. Parts that share both (an H100 SXM and an H200)
    /// can still want different choices: their memory bandwidths differ.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The GPU's name as the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// The driver version (cuDriverGetVersion / hipDriverGetVersion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<i64>,
    /// The achieved bandwidth as a percentage of the copy bandwidth measured in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pct_copy: Option<f64>,
    /// Spread of the timed measurements: (slowest - fastest) / median, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_pct: Option<f64>,
    /// The cost model's choice for this key, which the entry overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_model: Option<String>,
    /// The cost model's choice's median time in the same run, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_model_us: Option<f64>,
    /// The second-fastest correct candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_up: Option<String>,
    /// How much slower the runner-up was, in percent of the winner's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_up_margin_pct: Option<f64>,
}

/// The key an entry answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    /// [`TunedEntry::arch`].
    pub arch: String,
    /// [`TunedEntry::units`].
    pub units: u32,
    /// [`TunedEntry::stage`].
    pub stage: String,
    /// [`TunedEntry::dtype`].
    pub dtype: String,
    /// [`TunedEntry::formulation`] (`None`: either).
    pub formulation: Option<String>,
    /// [`TunedEntry::device`] (`None`: every GPU of the arch and unit count).
    pub device: Option<String>,
    /// [`TunedEntry::tokens`] (a bucket).
    pub tokens: u64,
    /// [`TunedEntry::n`].
    pub n: u32,
    /// [`TunedEntry::c`] (a bucket).
    pub c: u64,
}

impl TunedEntry {
    /// The key this entry answers.
    pub fn key(&self) -> Key {
        Key {
            arch: self.arch.clone(),
            units: self.units,
            stage: self.stage.clone(),
            dtype: self.dtype.clone(),
            formulation: self.formulation.clone(),
            device: self.device.clone(),
            tokens: self.tokens,
            n: self.n,
            c: self.c,
        }
    }
}

/// A parsed table: the entries that validated, and one warning per entry that did not.
///
/// Only [`TunedTable::parse`] and [`TunedTable::parse_lenient`] make one, so every entry it
/// holds has passed validation:
///
/// ```compile_fail
/// let table = mhc_loader::TunedTable { name: String::new(), entries: Vec::new(), ..Default::default() };
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TunedTable {
    /// The name the table was parsed under (e.g. its path), used in errors and warnings.
    pub name: String,
    entries: Vec<TunedEntry>,
    /// (which entry, why) for every entry that did not validate.
    skipped: Vec<(String, String)>,
}

/// Why one `[[entry]]` is not a valid tuned entry.
fn validate(e: &TunedEntry) -> Result<(), &'static str> {
    Arch::parse(&e.arch).map_err(|_| "arch is not an architecture mhc knows")?;
    if e.units == 0 {
        return Err("units must be >= 1");
    }
    if !crate::catalogue::DTYPES.contains(&e.dtype.as_str()) {
        return Err("dtype must be f32 or bf16");
    }
    if e.stage.is_empty() || e.variant.is_empty() {
        return Err("stage and variant must be set");
    }
    if bucket(e.tokens) != e.tokens || bucket(e.c) != e.c {
        return Err("tokens and c are buckets: powers of two");
    }
    if e.n == 0 || e.n > 32 {
        return Err("n must be in 1..=32");
    }
    let sha_ok =
        e.image_sha256.len() == 64 && e.image_sha256.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    if !sha_ok {
        return Err("image_sha256 must be 64 lowercase hex digits");
    }
    if !(e.us.is_finite() && e.us > 0.0 && e.gbps.is_finite() && e.gbps >= 0.0) {
        return Err("us must be > 0 and gbps >= 0, both finite");
    }
    if !(e.error.is_finite() && e.error >= 0.0) || e.samples == 0 {
        return Err("error must be finite and >= 0, samples >= 1");
    }
    let d = e.date.as_bytes();
    let date_ok = d.len() == 10
        && d[4] == b'-'
        && d[7] == b'-'
        && d.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !date_ok {
        return Err("date must be YYYY-MM-DD");
    }
    if e.formulation.as_deref().is_some_and(|f| f != "v4" && f != "paper") {
        return Err("formulation must be v4 or paper (or absent: either)");
    }
    if e.device.as_deref().is_some_and(|d| d.trim().is_empty() || d.trim() != d) {
        return Err("device must be the GPU's name, without surrounding spaces (or absent: every GPU)");
    }
    if e.variant == POST_THEN_PRE && (e.stage != "post_pre" || e.cost_model.is_none()) {
        return Err("variant post+pre is for stage post_pre and names the fused row it beat in cost_model");
    }
    let finite_or_absent = |v: Option<f64>| v.is_none_or(|v| v.is_finite() && v >= 0.0);
    let evidence = [e.pct_copy, e.spread_pct, e.cost_model_us, e.runner_up_margin_pct];
    if !evidence.into_iter().all(finite_or_absent) {
        return Err("pct_copy, spread_pct, cost_model_us and runner_up_margin_pct must be finite and >= 0");
    }
    Ok(())
}

impl TunedTable {
    /// Parses and validates `text`, strictly: any malformed entry (or anything but `[[entry]]`
    /// tables) is an error. `name` (e.g. the path) is used in errors. The tests parse the
    /// embedded tables this way.
    pub fn parse(name: &str, text: &str) -> Result<TunedTable, Error> {
        let table = Self::read(name, text).map_err(|reason| Error::Tuning { table: name.to_string(), reason })?;
        match table.skipped.first() {
            Some((entry, reason)) => {
                Err(Error::Tuning { table: name.to_string(), reason: format!("{entry}: {reason}") })
            }
            None => Ok(table),
        }
    }

    /// Parses `text`, keeping every entry that validates: an entry that does not (a missing or
    /// unknown field, a value out of range, a second entry for a key) is skipped with a warning
    /// that names it, and a text that is not a table at all gives an empty table with one
    /// warning. What run-time selection uses: one bad entry never disables the others.
    pub fn parse_lenient(name: &str, text: &str) -> TunedTable {
        Self::read(name, text).unwrap_or_else(|reason| TunedTable {
            name: name.to_string(),
            entries: Vec::new(),
            skipped: vec![("the whole table".to_string(), reason)],
        })
    }

    /// The entries that validated, in file order.
    pub fn entries(&self) -> &[TunedEntry] {
        &self.entries
    }

    /// A table of `entries`, validated as [`TunedTable::parse`] validates a file: an invalid
    /// entry or a second entry for a key is an error naming it.
    pub fn from_entries(name: &str, entries: Vec<TunedEntry>) -> Result<TunedTable, Error> {
        let mut keys = std::collections::BTreeSet::new();
        for (i, e) in entries.iter().enumerate() {
            let problem = match validate(e) {
                Err(reason) => Some(reason),
                Ok(()) if !keys.insert(e.key()) => Some("a second entry for the same key"),
                Ok(()) => None,
            };
            if let Some(reason) = problem {
                return Err(Error::Tuning {
                    table: name.to_string(),
                    reason: format!("entry {} ({}): {reason}", i + 1, e.variant),
                });
            }
        }
        Ok(TunedTable { name: name.to_string(), entries, skipped: Vec::new() })
    }

    /// The table as a file: `header` (each line becomes a `#` comment), then every entry sorted
    /// by key, each field on its own line in a fixed order with numbers in a fixed format, so
    /// that the same entries always give the same text; [`TunedTable::parse`] reads it back.
    pub fn render(&self, header: &str) -> String {
        let mut out = String::new();
        for line in header.lines() {
            out.push_str(if line.is_empty() { "#" } else { "# " });
            out.push_str(line);
            out.push('\n');
        }
        let mut entries: Vec<&TunedEntry> = self.entries.iter().collect();
        entries.sort_by_key(|e| e.key());
        let num = |v: f64| {
            // Four significant digits, always with a decimal point (TOML floats).
            let digits = if v == 0.0 { 0 } else { (3 - v.abs().log10().floor() as i32).max(0) as usize };
            let s = format!("{v:.digits$}");
            if s.contains('.') || s.contains('e') {
                s
            } else {
                s + ".0"
            }
        };
        let string = |v: &str| toml::Value::String(v.to_string()).to_string();
        for e in entries {
            out.push_str("\n[[entry]]\n");
            let mut field = |k: &str, v: String| out.push_str(&format!("{k} = {v}\n"));
            field("arch", string(&e.arch));
            field("units", e.units.to_string());
            field("stage", string(&e.stage));
            field("dtype", string(&e.dtype));
            if let Some(f) = &e.formulation {
                field("formulation", string(f));
            }
            if let Some(d) = &e.device {
                field("device", string(d));
            }
            field("tokens", e.tokens.to_string());
            field("n", e.n.to_string());
            field("c", e.c.to_string());
            field("variant", string(&e.variant));
            field("image_sha256", string(&e.image_sha256));
            field("us", num(e.us));
            field("gbps", num(e.gbps));
            field("error", format!("{:.3e}", e.error));
            field("samples", e.samples.to_string());
            field("date", string(&e.date));
            if let Some(v) = &e.gpu {
                field("gpu", string(v));
            }
            if let Some(v) = e.driver {
                field("driver", v.to_string());
            }
            if let Some(v) = e.pct_copy {
                field("pct_copy", num(v));
            }
            if let Some(v) = e.spread_pct {
                field("spread_pct", num(v));
            }
            if let Some(v) = &e.cost_model {
                field("cost_model", string(v));
            }
            if let Some(v) = e.cost_model_us {
                field("cost_model_us", num(v));
            }
            if let Some(v) = &e.runner_up {
                field("runner_up", string(v));
            }
            if let Some(v) = e.runner_up_margin_pct {
                field("runner_up_margin_pct", num(v));
            }
        }
        out
    }

    /// One warning per entry [`TunedTable::parse_lenient`] skipped, naming it and saying why.
    pub fn skipped(&self) -> Vec<String> {
        self.skipped.iter().map(|(what, reason)| format!("{}: ignoring {what}: {reason}", self.name)).collect()
    }

    /// The valid entries and a warning per invalid one; `Err` only when `text` is not a TOML
    /// document of `[[entry]]` tables.
    fn read(name: &str, text: &str) -> Result<TunedTable, String> {
        let doc: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        if let Some(key) = doc.keys().find(|k| k.as_str() != "entry") {
            return Err(format!("unknown top-level key {key:?} (a table holds [[entry]] tables only)"));
        }
        let list = match doc.get("entry") {
            None => Vec::new(),
            Some(toml::Value::Array(list)) => list.clone(),
            Some(_) => return Err("`entry` must be an array of [[entry]] tables".into()),
        };
        let mut table = TunedTable { name: name.to_string(), entries: Vec::new(), skipped: Vec::new() };
        let mut keys = std::collections::BTreeSet::new();
        for (i, value) in list.into_iter().enumerate() {
            let variant = value.get("variant").and_then(toml::Value::as_str).unwrap_or("?").to_string();
            let problem = match value.try_into::<TunedEntry>() {
                Err(e) => Some(e.to_string().trim().replace('\n', " ")),
                Ok(e) => match validate(&e) {
                    Err(reason) => Some(reason.to_string()),
                    Ok(()) if !keys.insert(e.key()) => Some("a second entry for the same key".to_string()),
                    Ok(()) => {
                        table.entries.push(e);
                        None
                    }
                },
            };
            if let Some(p) = problem {
                table.skipped.push((format!("entry {} ({variant})", i + 1), p));
            }
        }
        Ok(table)
    }

    /// The entries that still apply to `registry`, and one warning per entry dropped here or
    /// skipped when the table was parsed.
    pub fn check(&self, registry: &Registry) -> (Vec<TunedEntry>, Vec<String>) {
        let mut kept = Vec::new();
        let mut warnings = self.skipped();
        let short = |sha: &str| sha.get(..12).unwrap_or(sha).to_string();
        for e in &self.entries {
            // post+pre answers for the fused row it beat: that row's image is the one measured.
            let measured = if e.variant == POST_THEN_PRE { e.cost_model.as_deref().unwrap_or("") } else { &e.variant };
            let problem = match registry.get(measured) {
                None => Some(format!("variant {measured:?} is not in the catalogue")),
                Some(v) if v.entry.stage != e.stage => {
                    Some(format!("variant {measured:?} is not a {} variant", e.stage))
                }
                Some(v) if Arch::parse(&e.arch).map(|a| a.family()) != Ok(v.arch.family()) => {
                    Some(format!("variant {measured:?} is for {}, not {}", v.arch.name(), e.arch))
                }
                Some(v) if v.image_sha256 != e.image_sha256 => Some(format!(
                    "image of {measured:?} changed since it was measured (sha256 {}.. now {}..)",
                    short(&e.image_sha256),
                    v.image_sha256.get(..12).unwrap_or("none")
                )),
                Some(_) => None,
            };
            match problem {
                Some(p) => warnings.push(format!("{}: ignoring the entry for {:?}: {p}", self.name, e.key())),
                None => kept.push(e.clone()),
            }
        }
        (kept, warnings)
    }
}

/// Tables from `(name, text)` sources, leniently ([`TunedTable::parse_lenient`]): what a bad
/// entry or table costs is that entry or table, reported in the selector's warnings.
pub fn tables(sources: &[(&str, &str)]) -> Vec<TunedTable> {
    sources.iter().map(|(name, text)| TunedTable::parse_lenient(name, text)).collect()
}

/// Every embedded table, parsed leniently ([`tables`]): never an `Err` (the `Result` is kept
/// for callers); an entry that does not validate is skipped and named in the selector's
/// warnings. The tests parse the same tables strictly ([`TunedTable::parse`]), so a malformed
/// embedded table fails them.
pub fn embedded_tables() -> Result<Vec<TunedTable>, Error> {
    Ok(tables(&EMBEDDED_TABLES))
}
