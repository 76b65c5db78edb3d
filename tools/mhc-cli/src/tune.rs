//! `mhc tune`: on the GPU present, measures every catalogue row that can serve each tuning key
//! (stage, dtype, formulation, n, C, token bucket) and writes a tuned table
//! (asm/tuning/README.md) that plans follow: `--tuning FILE` of `mhc bench` / `mhc inspect`,
//! `mhc::Tuning::from_file` with `Plan::with_tuning` in code, or compiled in once the file is
//! copied to asm/tuning/<arch>.toml.
//!
//! Per key:
//! - **Candidates**: the rows the selector admits at the bucket's largest T on this device, the
//!   cost model's choice first (`Plan::candidates`). The rows' launch parameters (split and CTA
//!   counts, the pre kernels' per-launch flags) are not candidates of their own: their
//!   launchers derive them from T and the SM count (docs/kernels/pre.md). A `post_pre` key
//!   with a fused row has one more: `post`, then `pre` (two launches, [`POST_THEN_PRE`]),
//!   which beats one fused pass where the memory is fast against the SMs' rate.
//! - **Forcing**: each candidate is timed and checked through a plan built with a one-entry
//!   table naming it, so what is measured is the runtime's own path; a plan that does not run
//!   the candidate is an error for that candidate.
//! - **Timing**: `mhc bench`'s: graph replays where T <= 64 (what a decode step pays),
//!   back-to-back calls above, each the median of 5 measurements of >= 100 calls with inputs
//!   rotated past L2; their spread is the noise estimate.
//! - **Correctness**: the outputs at the bucket's smallest T (an odd count where there is one)
//!   on fresh inputs against the float64 reference storing what the device stores (post_pre's
//!   pre reads x' as stored), within docs/math.md's tolerances; a candidate outside them is
//!   rejected.
//! - **Decision**: the fastest correct candidate is written only when it beats the cost
//!   model's choice by more than the noise (the larger spread of the two, at least
//!   [`NOISE_FLOOR_PCT`]): a table holds only choices the cost model gets wrong, so re-tuning
//!   does not churn it. Entries name the GPU measured as their `device`: they apply to that GPU
//!   alone (an H100 SXM and an H200 share the architecture and SM count, not the bandwidth).
//!
//! Progress goes to stderr with an estimate of the time left; a journal beside the table (one
//! JSON line per finished key) lets `--resume` continue an interrupted or over-budget run; the
//! table is rewritten after every key (write, then rename), so it is never half-written. The
//! loop itself ([`run`]) takes the device through the [`Bench`] trait, which the tests fake.

use crate::bench::{bench_case, copy_bandwidth, today, DeviceFacts, GRAPH_MAX_TOKENS};
use mhc::device::cuda::{CudaDevice, CudaRunner, Plan, Stream};
use mhc::reference::testing::Rng;
use mhc::runner::{signature, Class, CpuRunner, Named, StageRunner};
use mhc::{Config, Dtype, Formulation, Stage, Tuning};
use mhc_loader::tuning::bucket;
use mhc_loader::tuning::{TunedEntry, TunedTable, POST_THEN_PRE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Smallest noise allowance, percent: a winner must beat the cost model's choice by more. The
/// spread within one run understates the noise between runs: two runs on one H200 measured the
/// same key's margin at 2.9% and 0.6% (asm/tuning/README.md).
pub const NOISE_FLOOR_PCT: f64 = 3.0;

/// Arguments of `mhc tune`.
#[derive(clap::Args)]
pub struct Args {
    /// Model presets (comma-separated): deepseek-v4-flash (n = 4, C = 4096), deepseek-v4-pro
    /// (n = 4, C = 7168).
    #[arg(long)]
    pub model: Option<String>,
    /// Further (n, C) shapes, comma-separated `N:C` pairs (e.g. `4:4096,8:1280`).
    #[arg(long)]
    pub shape: Option<String>,
    /// A file of (n, C) shapes: one `N C` pair per line, `#` starts a comment.
    #[arg(long)]
    pub shapes: Option<PathBuf>,
    /// Stages to tune (comma-separated).
    #[arg(long, default_value = "pre,post,post_pre,head")]
    pub stages: String,
    /// Formulations to tune for pre, post and post_pre (head is tuned as v4).
    #[arg(long, default_value = "v4,paper")]
    pub formulations: String,
    /// Storage dtype of activations.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Token buckets (comma-separated; each is rounded up to a power of two): by default the
    /// decode buckets 1..64 and the chunked-prefill buckets 256..8192.
    #[arg(long, default_value = "1,2,4,8,16,32,64,256,512,1024,2048,4096,8192")]
    pub tokens: String,
    /// Time budget, minutes: no key is started that the average so far says would end past it
    /// (`--resume` continues).
    #[arg(long, default_value_t = 30.0)]
    pub budget: f64,
    /// The table to write, default `tuning/<arch>.toml` (entries of other keys already in it are
    /// kept; copied to asm/tuning/<arch>.toml it is compiled in).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue the run whose journal (`OUT.journal`) is beside the table.
    #[arg(long)]
    pub resume: bool,
    /// Calls per timed measurement (at least 100).
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
}

/// `embedded`, `none` or a path: the `--tuning` argument of `mhc bench` and `mhc inspect`.
pub fn tuning_arg(value: &str) -> Result<Tuning, String> {
    match value {
        "embedded" => Ok(Tuning::Embedded),
        "none" => Ok(Tuning::CostModel),
        path => Tuning::from_file(Path::new(path)).map_err(|e| e.to_string()),
    }
}

/// One tuning key as measured: the T is the bucket's largest.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Case {
    pub(crate) stage: Stage,
    pub(crate) formulation: Formulation,
    pub(crate) dtype: Dtype,
    pub(crate) n: usize,
    pub(crate) c: usize,
    pub(crate) tokens: usize,
}

impl Case {
    fn label(&self) -> String {
        format!("{} {} {} n={} C={} T={}", self.stage, self.formulation, self.dtype, self.n, self.c, self.tokens)
    }
    fn config(&self) -> Config {
        Config::new(self.n, self.c).with_formulation(self.formulation)
    }
    /// The T the outputs are checked at: the bucket's smallest (odd where the bucket has more
    /// than one count), so the check covers a different count than the timing.
    fn check_tokens(&self) -> usize {
        if self.tokens <= 2 {
            self.tokens
        } else {
            self.tokens / 2 + 1
        }
    }
}

/// The device as an entry records it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Device {
    pub(crate) arch: String,
    pub(crate) units: u32,
    pub(crate) gpu: String,
    pub(crate) driver: i64,
}

/// A candidate row: its catalogue id and its image's hash. [`POST_THEN_PRE`] carries the image
/// hash of the fused row it stands against, named in `against` (the entry goes stale with it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Candidate {
    pub(crate) id: String,
    pub(crate) image_sha256: String,
    pub(crate) against: Option<String>,
}

impl Candidate {
    fn row(id: &str, image_sha256: &str) -> Candidate {
        Candidate { id: id.to_string(), image_sha256: image_sha256.to_string(), against: None }
    }
}

/// What a plan runs for `stage` at `t` tokens: a row's id, or [`POST_THEN_PRE`].
fn runs(plan: &Plan, stage: Stage, t: usize) -> Result<String, String> {
    if stage == Stage::PostPre && !plan.post_pre_is_fused(t) {
        return Ok(POST_THEN_PRE.to_string());
    }
    Ok(plan.kernel_for(stage, t).map_err(|e| e.to_string())?.variant.id().to_string())
}

/// One candidate's measurement.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Measured {
    pub(crate) variant: String,
    /// Median time per call, microseconds (graph replays where T <= 64, else back-to-back).
    pub(crate) us: f64,
    /// (slowest - fastest) / median of the measurements, percent.
    pub(crate) spread_pct: f64,
    pub(crate) gbps: f64,
    pub(crate) pct_copy: f64,
    /// Calls timed.
    pub(crate) samples: u32,
    /// The largest error over the outputs (relative L2 for activations, max abs for the
    /// coefficients).
    pub(crate) error: f64,
    /// Every output within docs/math.md's tolerance.
    pub(crate) correct: bool,
    /// The output with the largest error relative to its tolerance.
    pub(crate) worst_output: String,
}

/// What `mhc tune` needs of a device (a fake one in the tests).
pub(crate) trait Bench {
    fn device(&self) -> Device;
    /// The rows that can serve `case`, the cost model's choice first.
    fn candidates(&mut self, case: &Case) -> Result<Vec<Candidate>, String>;
    /// Times and checks `candidate` forced through a one-entry table.
    fn measure(&mut self, case: &Case, candidate: &Candidate) -> Result<Measured, String>;
}

/// One finished key: what was measured and what was decided (a journal line).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Outcome {
    pub(crate) case: String,
    pub(crate) cost_model: Option<String>,
    pub(crate) measured: Vec<Measured>,
    /// Candidates that could not be measured, with why.
    pub(crate) failed: Vec<(String, String)>,
    pub(crate) decision: String,
    pub(crate) entry: Option<TunedEntry>,
}

/// The one-entry table that makes a plan choose `candidate` for `case` on `device`.
pub(crate) fn forcing_table(case: &Case, candidate: &Candidate, device: &Device) -> Result<TunedTable, String> {
    let entry = TunedEntry {
        arch: device.arch.clone(),
        units: device.units,
        stage: case.stage.name().to_string(),
        dtype: case.dtype.name().to_string(),
        tokens: bucket(case.tokens as u64),
        n: case.n as u32,
        c: bucket(case.c as u64),
        variant: candidate.id.clone(),
        image_sha256: candidate.image_sha256.clone(),
        us: 1.0,
        gbps: 0.0,
        error: 0.0,
        samples: 1,
        date: "2000-01-01".into(),
        formulation: Some(case.formulation.to_string()),
        device: Some(device.gpu.clone()),
        gpu: None,
        driver: None,
        pct_copy: None,
        spread_pct: None,
        cost_model: candidate.against.clone(),
        cost_model_us: None,
        runner_up: None,
        runner_up_margin_pct: None,
    };
    TunedTable::from_entries("the candidate", vec![entry]).map_err(|e| e.to_string())
}

/// Measures every candidate of `case` and decides (module documentation).
pub(crate) fn tune_case(bench: &mut dyn Bench, case: &Case, date: &str) -> Outcome {
    let mut out = Outcome {
        case: case.label(),
        cost_model: None,
        measured: Vec::new(),
        failed: Vec::new(),
        decision: String::new(),
        entry: None,
    };
    let candidates = match bench.candidates(case) {
        Ok(c) if c.is_empty() => {
            out.decision = "no row serves this key".into();
            return out;
        }
        Ok(mut c) => {
            if case.stage == Stage::PostPre {
                let fused = &c[0];
                let against = Some(fused.id.clone());
                c.push(Candidate { id: POST_THEN_PRE.into(), image_sha256: fused.image_sha256.clone(), against });
            }
            c
        }
        Err(e) => {
            out.decision = if case.stage == Stage::PostPre {
                "no fused row serves this key: the plan runs post, then pre (their keys are tuned)".into()
            } else {
                format!("no row serves this key (`mhc inspect --explain` says why: {})", e.lines().next().unwrap_or(""))
            };
            return out;
        }
    };
    out.cost_model = Some(candidates[0].id.clone());
    if candidates.len() == 1 {
        out.decision = format!("one candidate ({}): nothing to choose", candidates[0].id);
        return out;
    }
    for c in &candidates {
        match bench.measure(case, c) {
            Ok(m) => out.measured.push(m),
            Err(e) => out.failed.push((c.id.clone(), e)),
        }
    }
    let mut correct: Vec<&Measured> = out.measured.iter().filter(|m| m.correct && m.us.is_finite()).collect();
    correct.sort_by(|a, b| a.us.total_cmp(&b.us));
    let model = out.measured.iter().find(|m| m.variant == candidates[0].id);
    let Some(&winner) = correct.first() else {
        let errors: Vec<String> =
            out.measured.iter().map(|m| format!("{} {} {:.2e}", m.variant, m.worst_output, m.error)).collect();
        out.decision = format!("NO candidate is within tolerance ({}): nothing written", errors.join(", "));
        return out;
    };
    let model_ok = model.is_some_and(|m| m.correct);
    if model_ok && winner.variant == candidates[0].id {
        out.decision = format!("the cost model's choice {} is the fastest", winner.variant);
        if let Some(next) = correct.get(1) {
            out.decision += &format!(" (next: {}, +{:.1}%)", next.variant, 100.0 * (next.us - winner.us) / winner.us);
        }
        return out;
    }
    if let Some(m) = model.filter(|m| m.correct) {
        let noise = NOISE_FLOOR_PCT.max(m.spread_pct).max(winner.spread_pct);
        let gain = 100.0 * (m.us - winner.us) / m.us;
        if gain <= noise {
            out.decision = format!(
                "{} is {gain:.1}% faster than the cost model's {}, within the noise ({noise:.1}%): nothing written",
                winner.variant, m.variant
            );
            return out;
        }
        out.decision =
            format!("{} beats the cost model's {} by {gain:.1}% (noise {noise:.1}%)", winner.variant, m.variant);
    } else {
        out.decision = format!(
            "{} is the fastest correct candidate; the cost model's {} is not ({})",
            winner.variant,
            candidates[0].id,
            model.map_or("not measured".to_string(), |m| format!("error {:.2e}", m.error))
        );
    }
    let runner_up = correct.get(1);
    let dev = bench.device();
    let sha = candidates.iter().find(|c| c.id == winner.variant).map(|c| c.image_sha256.clone()).unwrap_or_default();
    out.entry = Some(TunedEntry {
        arch: dev.arch,
        units: dev.units,
        stage: case.stage.name().to_string(),
        dtype: case.dtype.name().to_string(),
        tokens: bucket(case.tokens as u64),
        n: case.n as u32,
        c: bucket(case.c as u64),
        variant: winner.variant.clone(),
        image_sha256: sha,
        us: winner.us,
        gbps: winner.gbps,
        error: winner.error,
        samples: winner.samples,
        date: date.to_string(),
        formulation: Some(case.formulation.to_string()),
        device: Some(dev.gpu.clone()),
        gpu: Some(dev.gpu),
        driver: Some(dev.driver),
        pct_copy: Some(winner.pct_copy),
        spread_pct: Some(winner.spread_pct),
        cost_model: Some(candidates[0].id.clone()),
        cost_model_us: model.map(|m| m.us),
        runner_up: runner_up.map(|r| r.variant.clone()),
        runner_up_margin_pct: runner_up.map(|r| 100.0 * (r.us - winner.us) / winner.us),
    });
    out
}

/// The fixed header of a written table.
fn header(arch: &str) -> String {
    format!(
        "Tuned table for {arch}, written by `mhc tune` (format: asm/tuning/README.md).\n\
         Each entry is a choice that beat the cost model's by more than the noise on the GPU named\n\
         in it, with the evidence; for a key without an entry the selector uses its cost model."
    )
}

/// The journal beside `out`.
pub(crate) fn journal_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".journal");
    PathBuf::from(name)
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename.
fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("table")));
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The run's settings besides the cases.
pub(crate) struct Settings {
    pub(crate) out: PathBuf,
    pub(crate) resume: bool,
    /// Seconds.
    pub(crate) budget: f64,
    pub(crate) date: String,
}

/// What a run did: every key's outcome (from the journal too when resumed), and whether it
/// stopped at the budget with keys left.
pub(crate) struct Report {
    pub(crate) outcomes: Vec<Outcome>,
    pub(crate) left: usize,
}

/// The loop: every case not yet in the journal, within the budget, the table rewritten after
/// each. `now` is the clock in seconds (faked in the tests).
pub(crate) fn run(
    bench: &mut dyn Bench,
    cases: &[Case],
    settings: &Settings,
    now: &mut dyn FnMut() -> f64,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, String> {
    let journal = journal_path(&settings.out);
    let mut done: Vec<Outcome> = Vec::new();
    if journal.exists() {
        if !settings.resume {
            return Err(format!(
                "{} holds an unfinished run: --resume continues it, or delete it to start over",
                journal.display()
            ));
        }
        let text = std::fs::read_to_string(&journal).map_err(|e| format!("{}: {e}", journal.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            done.push(serde_json::from_str(line).map_err(|e| format!("{} line {}: {e}", journal.display(), i + 1))?);
        }
    }
    let device = bench.device();
    // The table as it was: entries of keys this run does not tune are kept.
    let mut kept: Vec<TunedEntry> = Vec::new();
    if settings.out.exists() {
        let text = std::fs::read_to_string(&settings.out).map_err(|e| format!("{}: {e}", settings.out.display()))?;
        let old = TunedTable::parse(&settings.out.display().to_string(), &text).map_err(|e| e.to_string())?;
        let tuned_here = |e: &TunedEntry| {
            e.arch == device.arch
                && e.units == device.units
                && e.device.as_ref().is_none_or(|d| *d == device.gpu)
                && cases.iter().any(|c| {
                    e.stage == c.stage.name()
                        && e.dtype == c.dtype.name()
                        && e.tokens == bucket(c.tokens as u64)
                        && e.n as usize == c.n
                        && e.c == bucket(c.c as u64)
                        && e.formulation.as_ref().is_none_or(|f| *f == c.formulation.to_string())
                })
        };
        kept = old.entries().iter().filter(|e| !tuned_here(e)).cloned().collect();
    }
    let todo: Vec<&Case> = cases.iter().filter(|c| !done.iter().any(|o| o.case == c.label())).collect();
    let start = now();
    let mut left = 0usize;
    let total = cases.len();
    for (finished, case) in todo.iter().enumerate() {
        let i = finished;
        let elapsed = now() - start;
        let average = if finished > 0 { elapsed / finished as f64 } else { 0.0 };
        if finished > 0 && elapsed + average > settings.budget {
            left = todo.len() - i;
            progress(&format!(
                "budget of {:.1} min reached with {left} of {total} keys left: --resume continues",
                settings.budget / 60.0
            ));
            break;
        }
        let eta = if finished > 0 {
            format!(", about {} left", minutes(average * (todo.len() - i) as f64))
        } else {
            String::new()
        };
        progress(&format!("[{}/{total}, {}{eta}] {}", done.len() + 1, minutes(elapsed), case.label()));
        let outcome = tune_case(bench, case, &settings.date);
        progress(&format!("    {}", outcome.decision));
        let line = serde_json::to_string(&outcome).map_err(|e| e.to_string())? + "\n";
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&journal)
                .map_err(|e| format!("{}: {e}", journal.display()))?;
            f.write_all(line.as_bytes()).map_err(|e| format!("{}: {e}", journal.display()))?;
        }
        done.push(outcome);
        write_table(&settings.out, &device.arch, &kept, &done)?;
    }
    write_table(&settings.out, &device.arch, &kept, &done)?;
    if left == 0 {
        std::fs::remove_file(&journal)
            .or_else(|e| if journal.exists() { Err(e) } else { Ok(()) })
            .map_err(|e| format!("{}: {e}", journal.display()))?;
    }
    Ok(Report { outcomes: done, left })
}

fn write_table(out: &Path, arch: &str, kept: &[TunedEntry], done: &[Outcome]) -> Result<(), String> {
    let entries: Vec<TunedEntry> = kept.iter().cloned().chain(done.iter().filter_map(|o| o.entry.clone())).collect();
    let table = TunedTable::from_entries(&out.display().to_string(), entries).map_err(|e| e.to_string())?;
    write_atomic(out, &table.render(&header(arch)))
}

fn minutes(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    format!("{}m{:02}s", s / 60, s % 60)
}

/// The cases of the arguments: every (n, C) x stage x formulation x token bucket, each key once.
pub(crate) fn cases(args: &Args) -> Result<Vec<Case>, String> {
    let mut shapes: Vec<(usize, usize)> = Vec::new();
    for model in args.model.iter().flat_map(|m| m.split(',')).map(str::trim).filter(|m| !m.is_empty()) {
        shapes.push(match model {
            "deepseek-v4-flash" => (4, 4096),
            "deepseek-v4-pro" => (4, 7168),
            other => return Err(format!("--model {other:?}: the presets are deepseek-v4-flash, deepseek-v4-pro")),
        });
    }
    let pair = |text: &str, sep: &[char]| -> Result<(usize, usize), String> {
        let parts: Vec<&str> = text.split(sep).map(str::trim).filter(|p| !p.is_empty()).collect();
        match parts[..] {
            [n, c] => Ok((
                n.parse().map_err(|_| format!("{text:?}: n is not a number"))?,
                c.parse().map_err(|_| format!("{text:?}: C is not a number"))?,
            )),
            _ => Err(format!("{text:?}: expected a pair n, C")),
        }
    };
    for s in args.shape.iter().flat_map(|s| s.split(',')).map(str::trim).filter(|s| !s.is_empty()) {
        shapes.push(pair(s, &[':']).map_err(|e| format!("--shape {e}"))?);
    }
    if let Some(path) = &args.shapes {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                shapes.push(pair(line, &[' ', '\t']).map_err(|e| format!("{} line {}: {e}", path.display(), i + 1))?);
            }
        }
    }
    if shapes.is_empty() {
        return Err("nothing to tune: give --model, --shape or --shapes".into());
    }
    for &(n, c) in &shapes {
        Config::new(n, c).validate().map_err(|e| format!("shape n={n} C={c}: {e}"))?;
    }
    let dtype: Dtype = args.dtype.parse().map_err(|e: mhc::Error| e.to_string())?;
    if dtype == Dtype::F64 {
        return Err("--dtype f64: kernels store f32 or bf16".into());
    }
    let stages: Vec<Stage> = args
        .stages
        .split(',')
        .map(|s| s.trim().parse::<Stage>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    if let Some(s) = stages.iter().find(|s| !matches!(s, Stage::Pre | Stage::Post | Stage::PostPre | Stage::Head)) {
        return Err(format!("--stages: {s} is not tuned (pre, post, post_pre, head)"));
    }
    let forms: Vec<Formulation> = args
        .formulations
        .split(',')
        .map(|f| f.trim().parse::<Formulation>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let mut tokens: Vec<usize> = Vec::new();
    for t in args.tokens.split(',').map(str::trim) {
        let t: usize = t.parse().map_err(|_| format!("--tokens {t:?}: not a number"))?;
        let b = usize::try_from(bucket(t as u64)).ok().filter(|&b| (1..=1 << 20).contains(&b));
        let b = b.ok_or_else(|| format!("--tokens {t}: buckets are 1..=1048576"))?;
        if !tokens.contains(&b) {
            tokens.push(b);
        }
    }
    let mut out: Vec<Case> = Vec::new();
    for &(n, c) in &shapes {
        for &stage in &stages {
            let stage_forms: &[Formulation] = if stage == Stage::Head { &[Formulation::DeepSeekV4] } else { &forms };
            for &formulation in stage_forms {
                for &t in &tokens {
                    let case = Case { stage, formulation, dtype, n, c, tokens: t };
                    // One case per key: C is bucketed too.
                    let same_key = |o: &Case| {
                        o.stage == stage
                            && o.formulation == formulation
                            && o.n == n
                            && o.tokens == t
                            && bucket(o.c as u64) == bucket(c as u64)
                    };
                    if !out.iter().any(same_key) {
                        out.push(case);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// The CUDA device behind [`Bench`].
struct Gpu {
    dev: CudaDevice,
    stream: Stream,
    runner: CudaRunner,
    copy_bw: f64,
    runs: usize,
    facts: Device,
    rng: Rng,
    /// The inputs and the float64 outputs of the case last checked (shared by its candidates).
    reference: Option<(String, Named, Named)>,
}

impl Gpu {
    fn forced(&self, case: &Case, c: &Candidate) -> Result<Tuning, String> {
        Ok(Tuning::Tables(vec![forcing_table(case, c, &self.facts)?]))
    }

    /// The error of `candidate`'s outputs at the case's check T against the float64 reference.
    fn check(&mut self, case: &Case, tuning: &Tuning, candidate: &str) -> Result<(f64, bool, String), String> {
        let cfg = case.config();
        let mut t = case.check_tokens();
        let ran = |t: usize| -> Result<String, String> {
            let plan = Plan::with_tuning(&self.dev, cfg, case.dtype, t, tuning).map_err(|e| e.to_string())?;
            runs(&plan, case.stage, t)
        };
        if ran(t).ok().as_deref() != Some(candidate) {
            t = case.tokens; // the row's token range begins inside the bucket
        }
        let label = format!("{} check T={t}", case.label());
        if self.reference.as_ref().is_none_or(|(l, _, _)| *l != label) {
            let mut ins =
                mhc::runner::try_random_inputs(case.stage, &cfg, t, 0.02, &mut self.rng).map_err(|e| e.to_string())?;
            // Activations as the device stores them, so the reference sees the same inputs.
            for p in signature(case.stage, &cfg).inputs.iter().filter(|p| p.class == Class::Activation) {
                if let Some(a) = ins.get_mut(p.name) {
                    for v in &mut a.data {
                        *v = case.dtype.round(*v);
                    }
                }
            }
            // The float64 reference storing what the device stores: post_pre's pre reads x' as
            // stored (docs/math.md), so a bf16 x' is what its coefficients are computed from.
            let want = CpuRunner.run(case.stage, &cfg, case.dtype, &ins).map_err(|e| e.to_string())?;
            self.reference = Some((label, ins, want));
        }
        let Some((_, ins, want)) = &self.reference else { unreachable!("set above") };
        self.runner.set_tuning(tuning.clone());
        let got = self.runner.run(case.stage, &cfg, case.dtype, ins).map_err(|e| e.to_string())?;
        let (act_tol, coef_tol) = if case.dtype == Dtype::F32 { (1e-5, 1e-5) } else { (1e-2, 1e-3) };
        let (mut worst, mut ok, mut worst_output, mut worst_ratio) = (0.0f64, true, String::new(), -1.0f64);
        for (name, w) in want {
            let g = got.get(name).ok_or_else(|| format!("output {name} missing"))?;
            let coefficient = matches!(name.as_str(), "h_pre" | "h_post" | "h_res" | "inv_rms");
            let e = if g.data.iter().any(|v| !v.is_finite()) {
                f64::INFINITY
            } else if coefficient {
                g.data.iter().zip(&w.data).fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
            } else {
                let (num, den) =
                    g.data.iter().zip(&w.data).fold((0.0, 0.0), |(n, d), (a, b)| (n + (a - b) * (a - b), d + b * b));
                if den > 0.0 {
                    (num / den).sqrt()
                } else {
                    num.sqrt()
                }
            };
            let tol = if coefficient { coef_tol } else { act_tol };
            worst = worst.max(e);
            ok &= e <= tol;
            if e / tol > worst_ratio || e.is_nan() {
                worst_ratio = e / tol;
                worst_output = format!("{name} (T={t})");
            }
        }
        Ok((worst, ok, worst_output))
    }
}

impl Bench for Gpu {
    fn device(&self) -> Device {
        self.facts.clone()
    }

    fn candidates(&mut self, case: &Case) -> Result<Vec<Candidate>, String> {
        let plan = Plan::with_tuning(&self.dev, case.config(), case.dtype, case.tokens, &Tuning::CostModel)
            .map_err(|e| e.to_string())?;
        let rows = plan.candidates(case.stage, case.tokens).map_err(|e| e.to_string())?;
        Ok(rows.into_iter().map(|v| Candidate::row(v.id(), &v.image_sha256)).collect())
    }

    fn measure(&mut self, case: &Case, candidate: &Candidate) -> Result<Measured, String> {
        let tuning = self.forced(case, candidate)?;
        let plan =
            Plan::with_tuning(&self.dev, case.config(), case.dtype, case.tokens, &tuning).map_err(|e| e.to_string())?;
        let ran = runs(&plan, case.stage, case.tokens)?;
        if ran != candidate.id {
            // The plan's warnings say why (a stale image; a fold set aside beside another pre).
            let why = plan.tuning_warnings().join("; ");
            return Err(format!(
                "the plan did not follow the table: it runs {ran}{}",
                if why.is_empty() { String::new() } else { format!(" ({why})") }
            ));
        }
        let row = bench_case(&self.dev, &self.stream, case.stage, &plan, case.tokens, self.runs, GRAPH_MAX_TOKENS)
            .map_err(|e| e.to_string())?;
        let (us, spread_pct) = match (row.us_graph, row.graph_spread_pct) {
            (Some(g), Some(s)) => (g, s),
            _ => (row.us, row.spread_pct),
        };
        let (error, correct, worst_output) = self.check(case, &tuning, &candidate.id)?;
        let gbps = row.bytes / (us * 1e-6) / 1e9;
        Ok(Measured {
            variant: candidate.id.clone(),
            us,
            spread_pct,
            gbps,
            pct_copy: 100.0 * gbps * 1e9 / self.copy_bw,
            samples: (5 * self.runs.max(100)) as u32,
            error,
            correct,
            worst_output,
        })
    }
}

pub fn main(args: Args) -> Result<(), String> {
    let cases = cases(&args)?;
    let dev = CudaDevice::new(0).map_err(|e| format!("mhc tune measures on a CUDA GPU: {e}"))?;
    let stream = Stream::new(&dev).map_err(|e| e.to_string())?;
    let runner = CudaRunner::new(0).map_err(|e| e.to_string())?;
    let facts = DeviceFacts::of(&dev);
    let copy_bw = copy_bandwidth(&dev, &stream).map_err(|e| e.to_string())?;
    let device = Device {
        arch: facts.arch.to_string(),
        units: facts.sm_count,
        gpu: facts.name.clone(),
        driver: facts.driver.into(),
    };
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from(format!("tuning/{}.toml", device.arch)));
    let budget = args.budget * 60.0;
    if !(budget.is_finite() && budget > 0.0) {
        return Err("--budget: a positive number of minutes".into());
    }
    eprintln!(
        "mhc tune: {} keys on {} ({} SMs, driver {}), copy bandwidth {:.0} GB/s, budget {:.1} min, writing {}",
        cases.len(),
        device.gpu,
        device.units,
        device.driver,
        copy_bw / 1e9,
        args.budget,
        out.display()
    );
    let mut gpu = Gpu {
        dev,
        stream,
        runner,
        copy_bw,
        runs: args.runs.max(100),
        facts: device,
        rng: Rng::new(Rng::fresh_seed()),
        reference: None,
    };
    let settings = Settings { out: out.clone(), resume: args.resume, budget, date: today() };
    let clock = std::time::Instant::now();
    let report =
        run(&mut gpu, &cases, &settings, &mut || clock.elapsed().as_secs_f64(), &mut |line| eprintln!("{line}"))?;
    print!("{}", summary(&report.outcomes));
    if report.left > 0 {
        println!("{} keys left at the budget; `mhc tune ... --resume` continues", report.left);
    }
    println!("wrote {}", out.display());
    Ok(())
}

/// One line per key: the cost model's choice and the winner with their times, and the decision.
pub(crate) fn summary(outcomes: &[Outcome]) -> String {
    let mut s = format!("{:<40} {:<28} {:>10} {:<28} {:>10}  decision\n", "key", "cost model", "us", "tuned", "us");
    let us = |o: &Outcome, id: Option<&str>| -> String {
        id.and_then(|id| o.measured.iter().find(|m| m.variant == id)).map_or("-".into(), |m| format!("{:.2}", m.us))
    };
    for o in outcomes {
        let tuned = o.entry.as_ref().map(|e| e.variant.as_str());
        s.push_str(&format!(
            "{:<40} {:<28} {:>10} {:<28} {:>10}  {}\n",
            o.case,
            o.cost_model.as_deref().unwrap_or("-"),
            us(o, o.cost_model.as_deref()),
            tuned.unwrap_or("-"),
            us(o, tuned),
            o.decision
        ));
    }
    let by_stage: BTreeMap<&str, usize> =
        outcomes.iter().filter(|o| o.entry.is_some()).fold(BTreeMap::new(), |mut m, o| {
            *m.entry(o.case.split(' ').next().unwrap_or("")).or_default() += 1;
            m
        });
    s.push_str(&format!(
        "{} keys, {} tuned choices differ from the cost model's{}\n",
        outcomes.len(),
        by_stage.values().sum::<usize>(),
        if by_stage.is_empty() {
            String::new()
        } else {
            format!(" ({})", by_stage.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "))
        }
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use mhc::device::cuda::{planned_kernels, CudaArch, DeviceLimits};

    /// A device of fake timings: the candidates are the catalogue's own (the device-free
    /// selection of an H100's limits), the times and errors come from `times`.
    struct Fake {
        times: BTreeMap<String, (f64, f64, bool)>,
        measures: usize,
        clock: std::rc::Rc<std::cell::Cell<f64>>,
    }

    impl Bench for Fake {
        fn device(&self) -> Device {
            Fake::device_of()
        }
        fn candidates(&mut self, case: &Case) -> Result<Vec<Candidate>, String> {
            candidates_without_a_device(case)
        }
        fn measure(&mut self, _case: &Case, c: &Candidate) -> Result<Measured, String> {
            self.measures += 1;
            self.clock.set(self.clock.get() + 10.0);
            let &(us, spread_pct, correct) = self.times.get(&c.id).unwrap_or(&(100.0, 1.0, true));
            Ok(Measured {
                variant: c.id.clone(),
                us,
                spread_pct,
                gbps: 1000.0 / us,
                pct_copy: 30.0,
                samples: 500,
                error: if correct { 1e-4 } else { 0.5 },
                correct,
                worst_output: "a".into(),
            })
        }
    }

    /// The fake device's name: the entries it writes are for it.
    const FAKE_GPU: &str = "Fake H100";

    fn limits() -> DeviceLimits {
        DeviceLimits::flagship(CudaArch::Sm90a)
    }

    /// The kernels a plan on the fake GPU would launch for `case` (`mhc inspect --explain`).
    fn planned_on_fake(case: &Case, tuning: &Tuning) -> Vec<mhc::device::cuda::PlannedKernel> {
        planned_kernels(&limits(), Some(FAKE_GPU), &case.config(), case.dtype, case.stage.name(), case.tokens, tuning)
            .unwrap()
    }

    /// The variants the plan would run, by the device-free selection (`mhc inspect --explain`).
    fn planned(case: &Case, tuning: &Tuning) -> Vec<String> {
        planned_on_fake(case, tuning).into_iter().map(|k| k.variant).collect()
    }

    fn candidates_without_a_device(case: &Case) -> Result<Vec<Candidate>, String> {
        let selector = mhc::plan::selector(132, None, &Tuning::CostModel).map_err(|e| e.to_string())?;
        let shape = mhc::plan::shape_of(&case.config(), case.dtype, mhc::plan::Slot::of(case.stage).unwrap())
            .at(case.tokens as u64);
        let arch = mhc_loader::Arch::parse("sm_90a").unwrap();
        let sel = selector
            .select(arch, case.stage.name(), &shape, &mhc_loader::Budget::default())
            .map_err(|e| e.to_string())?;
        let reg = mhc_loader::Registry::embedded().unwrap();
        // Keep the rows the plan's launch limits admit too: those a plan can be forced to.
        let mut out = Vec::new();
        for c in &sel.candidates {
            let v = reg.get(&c.id).unwrap();
            let forced =
                Tuning::Tables(vec![forcing_table(case, &Candidate::row(&c.id, &v.image_sha256), &Fake::device_of())?]);
            if planned(case, &forced) == [c.id.clone()] {
                out.push(Candidate::row(&c.id, &v.image_sha256));
            }
        }
        Ok(out)
    }

    impl Fake {
        fn device_of() -> Device {
            Device { arch: "sm_90a".into(), units: 132, gpu: FAKE_GPU.into(), driver: 13000 }
        }
        fn new(times: &[(&str, f64, f64, bool)]) -> Fake {
            Fake {
                times: times.iter().map(|&(id, us, spread, ok)| (id.to_string(), (us, spread, ok))).collect(),
                measures: 0,
                clock: Default::default(),
            }
        }
    }

    /// A key of the catalogue where a plan has at least two rows to choose from, the cost
    /// model's choice first.
    fn contested() -> (Case, Vec<Candidate>) {
        for stage in [Stage::Pre, Stage::Post, Stage::Head] {
            for tokens in [256, 512, 1024, 64, 16, 4096] {
                let case =
                    Case { stage, formulation: Formulation::DeepSeekV4, dtype: Dtype::Bf16, n: 4, c: 4096, tokens };
                let cands = candidates_without_a_device(&case).unwrap();
                if cands.len() >= 2 {
                    return (case, cands);
                }
            }
        }
        panic!("no key with two candidates in the catalogue");
    }

    fn settings(dir: &Path) -> Settings {
        Settings { out: dir.join("sm_90a.toml"), resume: false, budget: 1e9, date: "2026-11-27".into() }
    }

    fn run_fake(fake: &mut Fake, cases: &[Case], s: &Settings) -> Result<Report, String> {
        let clock = fake.clock.clone();
        run(fake, cases, s, &mut || clock.get(), &mut |_| {})
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mhc-tune-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A fake timer that makes a non-default candidate win: the table written names it, and a
    /// plan that reads the table runs it, where the embedded tables and the cost model do not.
    #[test]
    fn a_written_table_steers_the_plan() {
        let (case, cands) = contested();
        let (model, other) = (&cands[0].id, &cands[1].id);
        assert_eq!(planned(&case, &Tuning::CostModel), std::slice::from_ref(model));
        let mut fake = Fake::new(&[(model, 10.0, 1.0, true), (other, 5.0, 1.0, true)]);
        let dir = tempdir("steer");
        let s = settings(&dir);
        let report = run_fake(&mut fake, std::slice::from_ref(&case), &s).unwrap();
        assert_eq!(report.left, 0);
        let entry = report.outcomes[0].entry.clone().expect("the faster row is written");
        assert_eq!(&entry.variant, other);
        assert_eq!(entry.cost_model.as_deref(), Some(model.as_str()));
        assert_eq!(entry.cost_model_us, Some(10.0));
        let tuning = Tuning::from_file(&s.out).unwrap();
        assert_eq!(planned(&case, &tuning), std::slice::from_ref(other), "the plan follows the written table");
        // Every T of the bucket follows it; the next bucket does not.
        assert_eq!(
            planned(&Case { tokens: case.tokens / 2 + 1, ..case.clone() }, &tuning),
            std::slice::from_ref(other)
        );
        let explain = planned_on_fake(&case, &tuning).remove(0).explain;
        assert!(explain.contains("by the tuned table") && explain.contains("the cost model would choose"), "{explain}");
        assert!(!journal_path(&s.out).exists(), "a finished run leaves no journal");
    }

    /// No churn: a winner within the noise of the cost model's choice is not written; a faster
    /// candidate outside the tolerance is never chosen.
    #[test]
    fn noise_and_wrong_results_write_nothing() {
        let (case, cands) = contested();
        let (model, other) = (&cands[0].id, &cands[1].id);
        let within = tune_case(&mut Fake::new(&[(model, 10.0, 3.0, true), (other, 9.8, 1.0, true)]), &case, "d");
        assert!(within.entry.is_none() && within.decision.contains("within the noise"), "{}", within.decision);
        let wrong = tune_case(&mut Fake::new(&[(model, 10.0, 1.0, true), (other, 1.0, 1.0, false)]), &case, "d");
        assert!(wrong.entry.is_none(), "{}", wrong.decision);
        let same = tune_case(&mut Fake::new(&[(model, 1.0, 1.0, true), (other, 10.0, 1.0, true)]), &case, "d");
        assert!(same.entry.is_none() && same.decision.contains("fastest"), "{}", same.decision);
        // The cost model's choice wrong: the correct one is written whatever the margin.
        let bad_model = tune_case(&mut Fake::new(&[(model, 1.0, 1.0, false), (other, 10.0, 1.0, true)]), &case, "d");
        assert_eq!(bad_model.entry.map(|e| e.variant), Some(other.clone()), "{}", bad_model.decision);
    }

    /// Two runs with the same fake timings write the same file; entries of keys a run does not
    /// tune are kept.
    #[test]
    fn the_same_timings_write_the_same_file() {
        let (case, cands) = contested();
        let times = [(cands[0].id.as_str(), 10.0, 1.0, true), (cands[1].id.as_str(), 5.0, 1.0, true)];
        let (a, b) = (tempdir("same-a"), tempdir("same-b"));
        run_fake(&mut Fake::new(&times), std::slice::from_ref(&case), &settings(&a)).unwrap();
        run_fake(&mut Fake::new(&times), std::slice::from_ref(&case), &settings(&b)).unwrap();
        let text = std::fs::read_to_string(settings(&a).out).unwrap();
        assert_eq!(text, std::fs::read_to_string(settings(&b).out).unwrap());
        assert!(text.starts_with("# Tuned table for sm_90a, written by `mhc tune`"));
        // Another key tuned into the same table keeps the first entry.
        let other = Case { n: 8, c: 1280, ..case.clone() };
        run_fake(&mut Fake::new(&times), &[other], &settings(&a)).unwrap();
        let again = TunedTable::parse("a", &std::fs::read_to_string(settings(&a).out).unwrap()).unwrap();
        assert!(again.entries().iter().any(|e| e.n == 4), "the n = 4 entry is kept");
    }

    /// A budget stops the run between keys with a journal; without --resume a second run
    /// refuses to overwrite it; with --resume it measures only the keys left and ends with the
    /// table one uninterrupted run writes.
    #[test]
    fn an_interrupted_run_resumes() {
        let (case, cands) = contested();
        let times = [(cands[0].id.as_str(), 10.0, 1.0, true), (cands[1].id.as_str(), 5.0, 1.0, true)];
        let cases: Vec<Case> = [case.tokens, case.tokens * 2, case.tokens * 4]
            .iter()
            .map(|&tokens| Case { tokens, ..case.clone() })
            .collect();
        let full = tempdir("resume-full");
        run_fake(&mut Fake::new(&times), &cases, &settings(&full)).unwrap();
        let dir = tempdir("resume");
        // Each key costs 10 s per candidate: a budget of one key and a half stops after one.
        let per_key = 10.0 * cands.len() as f64;
        let short = Settings { budget: per_key * 1.5, ..settings(&dir) };
        let first = run_fake(&mut Fake::new(&times), &cases, &short).unwrap();
        assert_eq!((first.outcomes.len(), first.left), (1, 2));
        assert!(journal_path(&short.out).exists());
        let refused = run_fake(&mut Fake::new(&times), &cases, &settings(&dir));
        assert!(refused.is_err_and(|e| e.contains("--resume")));
        let mut fake = Fake::new(&times);
        let resumed = run_fake(&mut fake, &cases, &Settings { resume: true, ..settings(&dir) }).unwrap();
        assert_eq!((resumed.outcomes.len(), resumed.left), (3, 0));
        assert_eq!(fake.measures, 2 * cands.len(), "only the keys left are measured");
        assert_eq!(
            std::fs::read_to_string(settings(&dir).out).unwrap(),
            std::fs::read_to_string(settings(&full).out).unwrap()
        );
    }

    /// A `post_pre` key with a fused row also measures `post`, then `pre`; where the two
    /// launches win, the entry says so for this GPU, names the fused row it beat, and the plan
    /// runs post, then pre on this GPU only.
    #[test]
    fn post_then_pre_is_a_candidate_of_post_pre() {
        let case = Case {
            stage: Stage::PostPre,
            formulation: Formulation::DeepSeekV4,
            dtype: Dtype::Bf16,
            n: 4,
            c: 4096,
            tokens: 256,
        };
        let fused = candidates_without_a_device(&case).unwrap();
        let model = fused[0].id.clone();
        let mut fake = Fake::new(&[(model.as_str(), 20.0, 1.0, true), (POST_THEN_PRE, 18.0, 1.0, true)]);
        let outcome = tune_case(&mut fake, &case, "2026-11-29");
        assert_eq!(fake.measures, fused.len() + 1, "every fused row and post, then pre");
        let entry = outcome.entry.clone().expect("post, then pre beat the fused row");
        assert_eq!(entry.variant, POST_THEN_PRE);
        assert_eq!(entry.cost_model.as_deref(), Some(model.as_str()));
        assert_eq!(entry.image_sha256, fused[0].image_sha256, "tied to the fused row's image");
        assert_eq!(entry.device.as_deref(), Some(FAKE_GPU));
        let tuning = Tuning::Tables(vec![TunedTable::from_entries("t", vec![entry]).unwrap()]);
        assert_eq!(planned(&case, &tuning), ["mhc_post_v4_bf16_n4", "mhc_pre_pc16t_bf16_n4"].map(catalogue_id));
        let first = planned_on_fake(&case, &tuning).remove(0);
        assert!(
            first.explain.starts_with("post_pre runs as two launches: the tuned table chose post, then pre"),
            "{}",
            first.explain
        );
        let elsewhere =
            planned_kernels(&limits(), Some("Another GPU"), &case.config(), case.dtype, "post_pre", 256, &tuning)
                .unwrap();
        assert_eq!(elsewhere.into_iter().map(|k| k.variant).collect::<Vec<_>>(), std::slice::from_ref(&model));
        // The fused row faster: nothing written.
        let mut fake = Fake::new(&[(model.as_str(), 18.0, 1.0, true), (POST_THEN_PRE, 20.0, 1.0, true)]);
        assert!(tune_case(&mut fake, &case, "2026-11-29").entry.is_none());
    }

    /// The catalogue row of a kernel entry symbol.
    fn catalogue_id(entry: &str) -> String {
        let reg = mhc_loader::Registry::embedded().unwrap();
        reg.variants().iter().find(|v| v.entry.entry == entry && v.arch.name() == "sm_90a").unwrap().id().to_string()
    }

    /// A corrupted table and stale entries are ignored with a warning naming why; the plan
    /// falls back to the cost model.
    #[test]
    fn corrupted_or_stale_tables_are_ignored_with_a_warning() {
        let (case, cands) = contested();
        let dir = tempdir("stale");
        let s = settings(&dir);
        let times = [(cands[0].id.as_str(), 10.0, 1.0, true), (cands[1].id.as_str(), 5.0, 1.0, true)];
        run_fake(&mut Fake::new(&times), std::slice::from_ref(&case), &s).unwrap();
        let text = std::fs::read_to_string(&s.out).unwrap();
        let explain = |text: &str| {
            std::fs::write(&s.out, text).unwrap();
            let tuning = Tuning::from_file(&s.out).unwrap();
            let k = planned_on_fake(&case, &tuning).remove(0);
            (k.variant, k.explain)
        };
        let sha = &cands[1].image_sha256;
        let (v, e) = explain(&text.replace(sha.as_str(), &"0".repeat(64)));
        assert_eq!(v, cands[0].id);
        assert!(e.contains("changed since it was measured"), "{e}");
        let (v, e) = explain(&text.replace("units = 132", "units = 114"));
        assert_eq!(v, cands[0].id);
        assert!(e.contains("114 units"), "{e}");
        let (v, e) = explain(&text.replace("samples = 500", "samples = \"many\""));
        assert_eq!(v, cands[0].id);
        assert!(e.contains("ignoring entry 1"), "{e}");
        let (v, e) = explain("this is not [toml");
        assert_eq!(v, cands[0].id);
        assert!(e.contains("ignoring the whole table"), "{e}");
    }

    /// Presets, shapes and buckets: each key once, head only as v4, bad arguments refused.
    #[test]
    fn the_cases_of_the_arguments() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let parse = |argv: &[&str]| Cli::try_parse_from([&["tune"], argv].concat()).unwrap().args;
        let c = cases(&parse(&["--model", "deepseek-v4-pro", "--tokens", "1,3,4,256"])).unwrap();
        // 3 buckets (1, 4, 256) x (pre, post, post_pre in 2 formulations + head in 1)
        assert_eq!(c.len(), 3 * 7);
        assert!(c.iter().all(|k| k.n == 4 && k.c == 7168));
        assert!(c.iter().filter(|k| k.stage == Stage::Head).all(|k| k.formulation == Formulation::DeepSeekV4));
        let both = cases(&parse(&["--model", "deepseek-v4-flash,deepseek-v4-pro", "--shape", "4:5000"])).unwrap();
        assert_eq!(both.len(), 2 * 7 * 13, "C = 5000 shares C = 7168's bucket");
        assert!(cases(&parse(&["--model", "gpt"])).is_err());
        assert!(cases(&parse(&[])).is_err());
        assert!(cases(&parse(&["--shape", "4:4096", "--stages", "static"])).is_err());
        assert!(cases(&parse(&["--shape", "4:4096", "--tokens", "0x10"])).is_err());
        assert!(cases(&parse(&["--shape", "0:4096"])).is_err());
    }
}
