//! `asm/catalogue.toml`: one `[[variant]]` table per kernel variant (format in asm/README.md).
//!
//! Parsing is strict (unknown keys are errors) and every field is validated here, once, so the
//! registry and the selector can trust the entries.

use crate::arch::Arch;
use serde::Deserialize;
use std::fmt::Write as _;

/// Where the manifest lives, relative to the repository root.
pub const MANIFEST_PATH: &str = mhc_kernels::CATALOGUE_PATH;

/// The manifest text compiled into the crate.
pub const EMBEDDED_MANIFEST: &str = mhc_kernels::CATALOGUE;

/// A manifest problem, naming the variant (or the line) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{MANIFEST_PATH}: {0}")]
pub struct ManifestError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, ManifestError> {
    Err(ManifestError(s.into()))
}

/// An inclusive range of a size (C or T).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    pub min: u64,
    pub max: u64,
}

impl Range {
    pub fn contains(&self, x: u64) -> bool {
        self.min <= x && x <= self.max
    }
}

/// What hidden sizes C a variant handles: `C % multiple_of == 0` and `min <= C <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CConstraint {
    pub multiple_of: u64,
    pub min: u64,
    pub max: u64,
}

/// How a variant cuts the work: `tokens` per block; `split` blocks share one token tile's
/// reduction over K = n*C (split-K; 1 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tile {
    pub tokens: u32,
    #[serde(default = "one")]
    pub split: u32,
}

fn one() -> u32 {
    1
}

/// The resources and image hash a variant is recorded with; a test compares them with what the
/// loader reads from the embedded image (`mhc asm --update-manifest` rewrites them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub registers: u32,
    pub shared_bytes: u32,
    pub local_bytes: u32,
    pub kernarg_bytes: u32,
    pub sha256: String,
}

/// One `[[variant]]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantEntry {
    /// Unique name, `[a-z0-9_]+`.
    pub id: String,
    /// Stage name (`pre`, `post`, `coeffs`, ...); the mhc crate maps its `Stage` onto these.
    pub stage: String,
    /// `v4` and/or `paper`.
    pub formulations: Vec<String>,
    /// `sm_90a`, `sm_100a`, `gfx942` (optionally with AMD features).
    pub arch: String,
    /// The image, relative to the repository root (`asm/bin/<arch dir>/<name>.<cubin|hsaco>`).
    pub file: String,
    /// The kernel's entry symbol.
    pub entry: String,
    /// Activation storage types handled: `f32`, `bf16`.
    pub dtypes: Vec<String>,
    /// Stream counts handled.
    pub n: Vec<u32>,
    /// Hidden sizes handled.
    pub c: CConstraint,
    /// Token counts the variant can run (hard limit).
    pub tokens: Range,
    /// Token counts it is meant for (the selector prefers a variant whose range holds T);
    /// defaults to `tokens`.
    #[serde(default)]
    pub prefer_tokens: Option<Range>,
    pub tile: Tile,
    /// Threads per block.
    pub threads: u32,
    /// Register cap the kernel is written for (`.maxnreg` / VGPR budget); informative.
    #[serde(default)]
    pub register_cap: Option<u32>,
    /// Full passes over the activations x (n*C values per token) the variant makes: feeds the
    /// cost model's byte count. 0 for kernels that never touch x (e.g. `coeffs`).
    #[serde(default = "one")]
    pub x_passes: u32,
    /// Time of one wave of this variant's blocks in microseconds (the cost model's per-wave
    /// term; default [`crate::select::WAVE_US`]). Set it from a measurement for kernels whose
    /// time is latency rather than bytes (e.g. the Sinkhorn of `coeffs`).
    #[serde(default)]
    pub wave_us: Option<f64>,
    /// The kernel's parameter block, as the `#[repr(C)]` struct a launcher builds.
    #[serde(default)]
    pub params: Option<String>,
    /// One line: why this variant exists.
    pub why: String,
    /// Recorded resources and sha256 of the image.
    #[serde(default)]
    pub expect: Expect,
}

impl VariantEntry {
    /// The architecture (validated by [`parse`]).
    pub fn arch(&self) -> Arch {
        Arch::parse(&self.arch).unwrap_or(Arch::Sm90a)
    }

    /// The preferred token range.
    pub fn prefer_tokens(&self) -> Range {
        self.prefer_tokens.unwrap_or(self.tokens)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    variant: Vec<VariantEntry>,
}

pub const FORMULATIONS: [&str; 2] = ["v4", "paper"];
pub const DTYPES: [&str; 2] = ["f32", "bf16"];

/// Parses and validates a manifest.
pub fn parse(text: &str) -> Result<Vec<VariantEntry>, ManifestError> {
    let file: File = toml::from_str(text).map_err(|e| ManifestError(e.to_string()))?;
    let mut ids = std::collections::BTreeSet::new();
    for v in &file.variant {
        validate(v)?;
        if !ids.insert(v.id.as_str()) {
            return err(format!("variant id {:?} appears twice", v.id));
        }
    }
    Ok(file.variant)
}

fn validate(v: &VariantEntry) -> Result<(), ManifestError> {
    let id = &v.id;
    let bad = |what: &str| err(format!("variant {id:?}: {what}"));
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return bad("id must be non-empty [a-z0-9_]");
    }
    if v.stage.is_empty() || !v.stage.chars().all(|c| c.is_ascii_lowercase() || c == '_' || c == '-') {
        return bad("stage must be a lowercase stage name");
    }
    if v.formulations.is_empty() || v.formulations.iter().any(|f| !FORMULATIONS.contains(&f.as_str())) {
        return bad("formulations must be a non-empty subset of [\"v4\", \"paper\"]");
    }
    let arch = Arch::parse(&v.arch).map_err(|e| ManifestError(format!("variant {id:?}: {e}")))?;
    let prefix = format!("asm/bin/{}/", arch.dir());
    if !v.file.starts_with(&prefix) || v.file.contains("..") {
        return bad(&format!("file must be under {prefix}"));
    }
    if v.entry.is_empty() {
        return bad("entry is empty");
    }
    if v.dtypes.is_empty() || v.dtypes.iter().any(|d| !DTYPES.contains(&d.as_str())) {
        return bad("dtypes must be a non-empty subset of [\"f32\", \"bf16\"]");
    }
    if v.n.is_empty() || v.n.iter().any(|&n| n == 0 || n > 32) || v.n.windows(2).any(|w| w[0] >= w[1]) {
        return bad("n must be a non-empty increasing list within 1..=32");
    }
    if v.c.multiple_of == 0 || v.c.min == 0 || v.c.min > v.c.max {
        return bad("c needs multiple_of >= 1 and 1 <= min <= max");
    }
    for (what, r) in [("tokens", v.tokens), ("prefer_tokens", v.prefer_tokens())] {
        if r.min == 0 || r.min > r.max {
            return bad(&format!("{what} needs 1 <= min <= max"));
        }
    }
    if v.tile.tokens == 0 || v.tile.split == 0 {
        return bad("tile.tokens and tile.split must be >= 1");
    }
    if v.threads == 0 || v.threads > arch.max_threads_per_block() {
        return bad("threads must be in 1..=1024");
    }
    if v.register_cap.is_some_and(|r| r == 0 || r > arch.max_registers_per_thread()) {
        return bad("register_cap is out of the architecture's range");
    }
    if v.wave_us.is_some_and(|w| !(w.is_finite() && w > 0.0)) {
        return bad("wave_us must be finite and > 0");
    }
    if v.why.trim().is_empty() || v.why.contains('\n') {
        return bad("why must be one non-empty line");
    }
    let sha = &v.expect.sha256;
    if !sha.is_empty() && (sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())) {
        return bad("expect.sha256 must be 64 lowercase hex digits (or empty before `mhc asm --update-manifest`)");
    }
    Ok(())
}

/// The `expect = {...}` line for these figures.
pub fn expect_line(e: &Expect) -> String {
    format!(
        "expect = {{ registers = {}, shared_bytes = {}, local_bytes = {}, kernarg_bytes = {}, sha256 = \"{}\" }}",
        e.registers, e.shared_bytes, e.local_bytes, e.kernarg_bytes, e.sha256
    )
}

/// The figures the loader reads for `entry` in `image`.
pub fn measure(image: &[u8], entry: &str) -> Result<Expect, String> {
    let object = crate::parse(image).map_err(|e| e.to_string())?;
    let k = object.kernel(entry).ok_or_else(|| format!("no kernel {entry:?} in the image"))?;
    Ok(Expect {
        registers: k.registers,
        shared_bytes: k.shared_bytes,
        local_bytes: k.local_bytes,
        kernarg_bytes: k.kernarg_bytes,
        sha256: crate::sha256_hex(image),
    })
}

/// Rewrites (or adds) the `expect = ...` line of every `[[variant]]` table from the image bytes
/// `image(file)` gives, keeping every other line as it is. Returns the new text and one report
/// line per variant.
pub fn rewrite_expectations<'a>(
    text: &str,
    image: impl Fn(&str) -> Option<&'a [u8]>,
) -> Result<(String, Vec<String>), ManifestError> {
    let variants = parse(text)?;
    let lines: Vec<&str> = text.lines().collect();
    // Line ranges of the [[variant]] tables, in order (they match `variants` one to one).
    let starts: Vec<usize> =
        lines.iter().enumerate().filter(|(_, l)| l.trim() == "[[variant]]").map(|(i, _)| i).collect();
    if starts.len() != variants.len() {
        return err("write each variant as its own `[[variant]]` table on a line of its own");
    }
    let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut report = Vec::new();
    // Walk backwards so insertions do not shift the ranges still to visit.
    for (k, v) in variants.iter().enumerate().rev() {
        let start = starts[k];
        let end = starts.get(k + 1).copied().unwrap_or(lines.len());
        let bytes = image(&v.file).ok_or_else(|| ManifestError(format!("variant {:?}: no image {}", v.id, v.file)))?;
        let e = measure(bytes, &v.entry).map_err(|m| ManifestError(format!("variant {:?}: {m}", v.id)))?;
        let line = expect_line(&e);
        let mut r = String::new();
        let _ = write!(
            r,
            "{}: registers {} shared {} local {} kernarg {} sha256 {}",
            v.id,
            e.registers,
            e.shared_bytes,
            e.local_bytes,
            e.kernarg_bytes,
            &e.sha256[..12]
        );
        report.push(r);
        match (start..end).find(|&i| lines[i].trim_start().starts_with("expect")) {
            Some(i) => out[i] = line,
            None => {
                let last = (start..end).rev().find(|&i| !lines[i].trim().is_empty()).unwrap_or(start);
                out.insert(last + 1, line);
            }
        }
    }
    report.reverse();
    let mut new_text = out.join("\n");
    if text.ends_with('\n') {
        new_text.push('\n');
    }
    parse(&new_text)?;
    Ok((new_text, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const ONE: &str = r#"
# a comment that must survive
[[variant]]
id = "post_a"
stage = "post"
formulations = ["v4", "paper"]
arch = "sm_90a"
file = "asm/bin/sm90/post.cubin"
entry = "mhc_post"
dtypes = ["f32", "bf16"]
n = [1, 2, 4]
c = { multiple_of = 8, min = 8, max = 65536 }
tokens = { min = 1, max = 1000000 }
tile = { tokens = 1 }
threads = 256
why = "baseline"
"#;

    #[test]
    fn parses_defaults_and_rejects_bad_fields() {
        let v = parse(ONE).unwrap();
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].tile.split, 1);
        assert_eq!(v[0].x_passes, 1);
        assert_eq!(v[0].prefer_tokens(), v[0].tokens);
        assert_eq!(v[0].arch(), Arch::Sm90a);
        for (from, to, what) in [
            ("id = \"post_a\"", "id = \"Post A\"", "id"),
            ("\"v4\", \"paper\"", "\"v5\"", "formulations"),
            ("arch = \"sm_90a\"", "arch = \"sm_80\"", "unsupported"),
            ("asm/bin/sm90/", "asm/bin/sm100/", "file"),
            ("n = [1, 2, 4]", "n = [4, 2]", "n must"),
            ("n = [1, 2, 4]", "n = [64]", "n must"),
            ("min = 8,", "min = 0,", "c needs"),
            ("tokens = { min = 1,", "tokens = { min = 9,", "ignored"),
            ("threads = 256", "threads = 2048", "threads"),
            ("why = \"baseline\"", "why = \"\"", "why"),
            ("why = \"baseline\"", "why = \"x\"\nbogus = 1", "unknown field"),
            ("dtypes = [\"f32\", \"bf16\"]", "dtypes = [\"f16\"]", "dtypes"),
            ("threads = 256", "threads = 256\nwave_us = -1.0", "wave_us"),
        ] {
            let text = ONE.replace(from, to);
            let text = if what == "ignored" { text.replace("max = 1000000", "max = 2") } else { text };
            let e = parse(&text).unwrap_err().0;
            let what = if what == "ignored" { "tokens needs" } else { what };
            assert!(e.contains(what), "{from} -> {to}: {e}");
        }
        let twice = format!("{ONE}{ONE}");
        assert!(parse(&twice).unwrap_err().0.contains("twice"));
    }
}
