//! Tuned tables: `asm/tuning/<arch>.toml`, written by the tuner, read here. Each `[[entry]]` says
//! which variant won for one key, with the evidence (format in asm/tuning/README.md):
//!
//! key:   arch, units (SM/CU count of the GPU it was measured on), stage, dtype,
//!        tokens / c bucketed up to a power of two ([`bucket`]), n exact
//! value: variant, image_sha256 (of the image it was measured with), us, gbps, error, samples, date
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

/// Size bucket of a tuning key: `x` rounded up to a power of two (1, 2, 4, ...).
pub fn bucket(x: u64) -> u64 {
    x.max(1).checked_next_power_of_two().unwrap_or(1 << 63)
}

/// One measured winner.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunedEntry {
    pub arch: String,
    /// SM / CU count of the GPU measured.
    pub units: u32,
    pub stage: String,
    pub dtype: String,
    /// Token bucket (power of two).
    pub tokens: u64,
    pub n: u32,
    /// Hidden-size bucket (power of two).
    pub c: u64,
    pub variant: String,
    pub image_sha256: String,
    /// Median time, microseconds.
    pub us: f64,
    /// Achieved bandwidth, GB/s.
    pub gbps: f64,
    /// Error against the reference (max abs over the coefficients / relative for outputs).
    pub error: f64,
    pub samples: u32,
    /// YYYY-MM-DD.
    pub date: String,
}

/// The key an entry answers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub arch: String,
    pub units: u32,
    pub stage: String,
    pub dtype: String,
    pub tokens: u64,
    pub n: u32,
    pub c: u64,
}

impl TunedEntry {
    pub fn key(&self) -> Key {
        Key {
            arch: self.arch.clone(),
            units: self.units,
            stage: self.stage.clone(),
            dtype: self.dtype.clone(),
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
            let problem = match registry.get(&e.variant) {
                None => Some(format!("variant {:?} is not in the catalogue", e.variant)),
                Some(v) if v.entry.stage != e.stage => {
                    Some(format!("variant {:?} is not a {} variant", e.variant, e.stage))
                }
                Some(v) if Arch::parse(&e.arch).map(|a| a.family()) != Ok(v.arch.family()) => {
                    Some(format!("variant {:?} is for {}, not {}", e.variant, v.arch.name(), e.arch))
                }
                Some(v) if v.image_sha256 != e.image_sha256 => Some(format!(
                    "image of {:?} changed since it was measured (sha256 {}.. now {}..)",
                    e.variant,
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
