//! Tuned tables: `asm/tuning/<arch>.toml`, written by the tuner, read here. Each `[[entry]]` says
//! which variant won for one key, with the evidence (format in asm/tuning/README.md):
//!
//! key:   arch, units (SM/CU count of the GPU it was measured on), stage, dtype,
//!        tokens / c bucketed up to a power of two ([`bucket`]), n exact
//! value: variant, image_sha256 (of the image it was measured with), us, gbps, error, samples, date
//!
//! Tables are validated when parsed (a malformed table is an error). Entries that no longer
//! apply (unknown variant, or an image whose hash changed since it was measured) are dropped
//! by [`TunedTable::check`] with a warning returned as data, never printed by the library.

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    entry: Vec<TunedEntry>,
}

/// A parsed, validated table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TunedTable {
    pub name: String,
    pub entries: Vec<TunedEntry>,
}

impl TunedTable {
    /// Parses and validates `text`; `name` (e.g. the path) is used in errors.
    pub fn parse(name: &str, text: &str) -> Result<TunedTable, Error> {
        let bad = |reason: String| Error::Tuning { table: name.to_string(), reason };
        let file: File = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
        let mut keys = std::collections::BTreeSet::new();
        for (i, e) in file.entry.iter().enumerate() {
            let at = |what: &str| bad(format!("entry {} ({}): {what}", i + 1, e.variant));
            Arch::parse(&e.arch).map_err(|x| at(&x.to_string()))?;
            if e.units == 0 {
                return Err(at("units must be >= 1"));
            }
            if !crate::catalogue::DTYPES.contains(&e.dtype.as_str()) {
                return Err(at("dtype must be f32 or bf16"));
            }
            if e.stage.is_empty() || e.variant.is_empty() {
                return Err(at("stage and variant must be set"));
            }
            if bucket(e.tokens) != e.tokens || bucket(e.c) != e.c {
                return Err(at("tokens and c are buckets: powers of two"));
            }
            if e.n == 0 || e.n > 32 {
                return Err(at("n must be in 1..=32"));
            }
            let sha_ok = e.image_sha256.len() == 64
                && e.image_sha256.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
            if !sha_ok {
                return Err(at("image_sha256 must be 64 lowercase hex digits"));
            }
            if !(e.us.is_finite() && e.us > 0.0 && e.gbps.is_finite() && e.gbps >= 0.0) {
                return Err(at("us must be > 0 and gbps >= 0, both finite"));
            }
            if !(e.error.is_finite() && e.error >= 0.0) || e.samples == 0 {
                return Err(at("error must be finite and >= 0, samples >= 1"));
            }
            let d = e.date.as_bytes();
            let date_ok = d.len() == 10
                && d[4] == b'-'
                && d[7] == b'-'
                && d.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
            if !date_ok {
                return Err(at("date must be YYYY-MM-DD"));
            }
            if !keys.insert(e.key()) {
                return Err(at("a second entry for the same key"));
            }
        }
        Ok(TunedTable { name: name.to_string(), entries: file.entry })
    }

    /// The entries that still apply to `registry`, and one warning per dropped entry.
    pub fn check(&self, registry: &Registry) -> (Vec<TunedEntry>, Vec<String>) {
        let mut kept = Vec::new();
        let mut warnings = Vec::new();
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
                    &e.image_sha256[..12],
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

/// Every embedded table, parsed. A malformed embedded table is a build error caught by tests.
pub fn embedded_tables() -> Result<Vec<TunedTable>, Error> {
    EMBEDDED_TABLES.iter().map(|(name, text)| TunedTable::parse(name, text)).collect()
}
