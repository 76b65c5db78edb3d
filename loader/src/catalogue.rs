//! `asm/catalogue.toml`: one `[[variant]]` table per kernel variant (format in asm/README.md).
//!
//! Parsing is strict (unknown keys are errors) and every field is validated here, once, so the
//! registry and the selector can trust the entries.

use crate::arch::Arch;
use serde::Deserialize;
use std::fmt::Write as _;

/// Where the catalogue lives, relative to the repository root.
pub const CATALOGUE_PATH: &str = mhc_kernels::CATALOGUE_PATH;

/// The catalogue text compiled into the crate.
pub const EMBEDDED_CATALOGUE: &str = mhc_kernels::CATALOGUE;

/// A catalogue problem, naming the variant (or the line) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{CATALOGUE_PATH}: {0}")]
pub struct CatalogueError(pub String);

fn err<T>(s: impl Into<String>) -> Result<T, CatalogueError> {
    Err(CatalogueError(s.into()))
}

/// An inclusive range of a size (C or T).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// The smallest size in the range.
    pub min: u64,
    /// The largest size in the range (inclusive).
    pub max: u64,
}

impl Range {
    /// Whether `min <= x <= max`.
    pub fn contains(&self, x: u64) -> bool {
        self.min <= x && x <= self.max
    }
}

/// What hidden sizes C a variant handles: `C % multiple_of == 0` and `min <= C <= max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CConstraint {
    /// C must be a multiple of this (1: any C).
    pub multiple_of: u64,
    /// The smallest C.
    pub min: u64,
    /// The largest C (inclusive).
    pub max: u64,
}

/// How a variant cuts the work: `tokens` per block; `split` blocks share one token tile's
/// reduction over K = n*C (split-K; 1 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tile {
    /// Tokens one block (CTA / workgroup) covers.
    pub tokens: u32,
    /// Blocks that share one token tile's reduction over K (1 = no split-K; the default).
    #[serde(default = "one")]
    pub split: u32,
}

fn one() -> u32 {
    1
}

/// A property of a variant's launch ([`Geometry::traits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trait {
    /// Launched cooperatively: the kernel has a grid-wide arrival, so the driver starts the grid
    /// only when all of it is resident (two such grids on two streams cannot deadlock).
    Cooperative,
    /// Persistent CTAs (whole clusters): the grid is as many as the device holds at once (sized
    /// when the plan is built), each walking the token tiles with a fixed stride.
    Persistent,
    /// Persistent CTAs streaming their tokens through a ring of shared-memory stages; the grid is
    /// as many CTAs as the SMs hold.
    TokenRing,
    /// The kernel waits for the previous kernel on the stream (`griddepcontrol.wait`) before its
    /// first global memory access, so it may be launched as a programmatic dependent launch.
    GridDependency,
    /// The CTA copies its token tile to dynamic shared memory once.
    TileInShared,
    /// The CTA also stages its slice of phi in shared memory.
    PhiInShared,
    /// The CTA also copies gamma (C f32) beside its tile.
    GammaInShared,
    /// Kept for comparison (measured slower than the alternative the runtime uses): the
    /// selector passes it over unless a call asks for its launcher.
    OnRequest,
}

/// What a launcher reads from a variant besides its tile and block size: the numbers the kernel
/// was generated with, so no launch code repeats the generator's tile math.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Geometry {
    /// Channels one thread covers in the per-channel loops.
    #[serde(default = "one")]
    pub channels_per_thread: u32,
    /// Threads that share one work item (a token x a chunk of channels).
    #[serde(default = "one")]
    pub threads_per_item: u32,
    /// CTAs per thread-block cluster (the kernel's `.reqnctapercluster`); the grid is a multiple.
    #[serde(default = "one")]
    pub cluster: u32,
    /// Most dynamic shared memory the kernel may ask for, bytes.
    #[serde(default)]
    pub dynamic_shared_max: u32,
    /// Bytes after each stream row of a tile staged in shared memory.
    #[serde(default)]
    pub row_pad: u32,
    /// Properties of the launch ([`Trait`]); none by default.
    #[serde(default)]
    pub traits: Vec<Trait>,
    /// Other variants (ids) whose kernels this variant's launch also runs (e.g. the
    /// coefficient kernel in front of a gfx942 static layer); the runtime loads them with it.
    #[serde(default)]
    pub companions: Vec<String>,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            channels_per_thread: 1,
            threads_per_item: 1,
            cluster: 1,
            dynamic_shared_max: 0,
            row_pad: 0,
            traits: Vec::new(),
            companions: Vec::new(),
        }
    }
}

impl Geometry {
    /// Whether the variant has trait `t`.
    pub fn has(&self, t: Trait) -> bool {
        self.traits.contains(&t)
    }
}

/// The resources and image hash a variant is recorded with; a test compares them with what the
/// loader reads from the embedded image (`mhc asm --update-catalogue` rewrites them).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Registers per thread ([`KernelInfo::registers`](crate::KernelInfo::registers)).
    pub registers: u32,
    /// Static shared memory / LDS in bytes ([`KernelInfo::shared_bytes`](crate::KernelInfo::shared_bytes)).
    pub shared_bytes: u32,
    /// Per-thread local memory / scratch in bytes.
    pub local_bytes: u32,
    /// Bytes of kernel parameters ([`KernelInfo::kernarg_bytes`](crate::KernelInfo::kernarg_bytes)).
    pub kernarg_bytes: u32,
    /// Lowercase hex SHA-256 of the image.
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
    /// How the variant cuts the work into blocks.
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
    /// The launcher of the vendor runtime that builds this variant's arguments and grid
    /// (`[a-z0-9_]+`, e.g. `post`, `head`, `pre_mid`, `gfx942_pre`); the runtime maps it onto its
    /// own launch code, and an unknown name is a build inconsistency its tests report.
    pub launch: String,
    /// Measured preference ahead of the cost model: among the variants that pass the filters the
    /// highest rank wins, and the cost model orders variants of equal rank. For kernels whose
    /// time is set by latency (grid-wide polls, barriers, a Sinkhorn per token) rather than by the
    /// bytes the cost model counts; default 0.
    #[serde(default)]
    pub rank: u32,
    /// Optional inputs the kernel handles (`gamma_k`, `gamma_f`); a call that has one the
    /// variant lacks rejects it.
    #[serde(default)]
    pub options: Vec<String>,
    /// What the launcher reads besides the tile and the block size.
    #[serde(default)]
    pub geometry: Geometry,
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

/// The formulation names a variant may list (`formulations`): DeepSeek-V4 and the paper's.
pub const FORMULATIONS: [&str; 2] = ["v4", "paper"];
/// The activation storage types a variant may list (`dtypes`).
pub const DTYPES: [&str; 2] = ["f32", "bf16"];
/// The optional inputs a variant may handle (`options`).
pub const OPTIONS: [&str; 2] = ["gamma_k", "gamma_f"];

/// Parses and validates a catalogue.
pub fn parse(text: &str) -> Result<Vec<VariantEntry>, CatalogueError> {
    let file: File = toml::from_str(text).map_err(|e| CatalogueError(e.to_string()))?;
    let mut ids = std::collections::BTreeMap::new();
    for v in &file.variant {
        validate(v)?;
        if ids.insert(v.id.as_str(), v.arch.as_str()).is_some() {
            return err(format!("variant id {:?} appears twice", v.id));
        }
    }
    for v in &file.variant {
        for c in &v.geometry.companions {
            match ids.get(c.as_str()) {
                None => return err(format!("variant {:?}: companion {c:?} is not a variant", v.id)),
                Some(&arch) if arch != v.arch => {
                    return err(format!("variant {:?}: companion {c:?} is for {arch}, not {}", v.id, v.arch))
                }
                Some(_) => {}
            }
        }
    }
    Ok(file.variant)
}

fn validate(v: &VariantEntry) -> Result<(), CatalogueError> {
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
    let arch = Arch::parse(&v.arch).map_err(|e| CatalogueError(format!("variant {id:?}: {e}")))?;
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
    let name_ok =
        |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !name_ok(&v.launch) {
        return bad("launch must be a non-empty [a-z0-9_] launcher name");
    }
    if v.options.iter().any(|o| !OPTIONS.contains(&o.as_str())) {
        return bad("options must be a subset of [\"gamma_k\", \"gamma_f\"]");
    }
    let g = &v.geometry;
    if g.channels_per_thread == 0 || g.threads_per_item == 0 || g.cluster == 0 || g.cluster > 16 {
        return bad("geometry needs channels_per_thread, threads_per_item >= 1 and cluster in 1..=16");
    }
    if g.dynamic_shared_max > arch.max_shared_per_block() {
        return bad("geometry.dynamic_shared_max exceeds the architecture's shared memory per block");
    }
    if v.why.trim().is_empty() || v.why.contains('\n') {
        return bad("why must be one non-empty line");
    }
    let sha = &v.expect.sha256;
    if !sha.is_empty() && (sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())) {
        return bad("expect.sha256 must be 64 lowercase hex digits (or empty before `mhc asm --update-catalogue`)");
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
) -> Result<(String, Vec<String>), CatalogueError> {
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
        let bytes = image(&v.file).ok_or_else(|| CatalogueError(format!("variant {:?}: no image {}", v.id, v.file)))?;
        let e = measure(bytes, &v.entry).map_err(|m| CatalogueError(format!("variant {:?}: {m}", v.id)))?;
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
                // After the table's last key: blank and comment lines before the next table
                // belong to what follows (a section marker, the next variant's note).
                let key = |i: &usize| {
                    let l = lines[*i].trim();
                    !l.is_empty() && !l.starts_with('#')
                };
                let last = (start..end).rev().find(key).unwrap_or(start);
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
launch = "post"
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
        assert_eq!((v[0].rank, v[0].geometry.cluster, v[0].geometry.channels_per_thread), (0, 1, 1));
        assert!(v[0].options.is_empty() && v[0].geometry.traits.is_empty());
        let with = ONE.replace(
            "launch = \"post\"",
            "launch = \"post\"\nrank = 3\noptions = [\"gamma_k\"]\ngeometry = { cluster = 8, traits = [\"persistent\", \"grid_dependency\"] }",
        );
        let v = parse(&with).unwrap();
        assert_eq!((v[0].rank, v[0].geometry.cluster), (3, 8));
        assert!(v[0].geometry.has(Trait::Persistent) && !v[0].geometry.has(Trait::Cooperative));
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
            ("launch = \"post\"", "launch = \"Post\"", "launch"),
            ("launch = \"post\"", "launch = \"post\"\noptions = [\"gamma_x\"]", "options"),
            ("launch = \"post\"", "launch = \"post\"\ngeometry = { cluster = 0 }", "cluster"),
            ("launch = \"post\"", "launch = \"post\"\ngeometry = { traits = [\"fast\"] }", "unknown variant"),
            ("launch = \"post\"", "launch = \"post\"\ngeometry = { companions = [\"nope\"] }", "companion"),
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
