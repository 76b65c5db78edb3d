//! `mhc bench --device cuda`: every stage x shape x selected variant, timed on the GPU.
//!
//! Each column has one method, the same for every row:
//! - `us`: back-to-back launches on one stream (the plans' default launch overlap), events around
//!   `--runs` (>= 100) calls whose inputs rotate over enough sets that the working set exceeds
//!   twice the L2 size; the mean per call, measured 5 times after a warm-up, median of the 5.
//! - `us_graph` (T <= `--graph-tokens`, by default [`GRAPH_MAX_TOKENS`]): 100 calls captured in a
//!   CUDA graph, replayed; the mean per call, measured 5 times after a warm-up replay, median of
//!   the 5 (what an inference engine's decode step pays, and how peers timed from Python, whose
//!   back-to-back calls the interpreter bounds, are compared at every T).
//! - `copy_us`: one device-to-device copy moving the same bytes, timed as `us`.
//! - `host_us`: the host's wall time to enqueue one call of the `us` measurement (median of the
//!   5): near `us`, the GPU waited for the host; well below, the host ran ahead of it.
//! - `b2b_by`: what bounds the row's `us`, `gpu` or `host` ([`b2b_limit`]): where the kernels
//!   finish faster than the host can launch them, `us` measures the host's launch rate, which
//!   differs from run to run and machine to machine; `us_graph` is then the kernel's figure.
//!
//! Bytes = what must move (inputs read once, outputs written once); the copy bandwidth is
//! measured first in the same run (a 1 GiB copy, bytes read + written over the median time);
//! floor = bytes / copy bandwidth + the device-side cost of one launch (the cheapest kernel in a
//! graph), so the ratio means something at decode sizes too. Writes the table, a JSON record
//! (docs/benchmarks/README.md's format) and an SVG plot (one panel per stage) to `--out`.

use mhc::device::cuda::{CudaDevice, DeviceBuffer, Event, Overlap, Plan, Stream};

/// Largest T also timed as graph replays unless `--graph-tokens` says otherwise: decode and the
/// mid kernel's range, where launch overhead is a large share and inference engines capture
/// graphs (the peer figures for `pre` at T <= 128 in docs/benchmarks/README.md are graph replays).
pub(crate) const GRAPH_MAX_TOKENS: usize = 64;
use mhc::reference::testing::Rng;
use mhc::{Config, Dtype, Formulation, Layout, Stage};
use std::fmt::Write as _;

/// Arguments of `mhc bench`.
#[derive(clap::Args)]
pub struct Args {
    /// Device to benchmark (only `cuda` has timed kernels).
    #[arg(long, default_value = "cuda")]
    pub device: String,
    /// Storage dtype of activations.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Comma-separated stages (pre, post, post_pre, head, static, expand).
    #[arg(long, default_value = "pre,post,post_pre,head,static,expand")]
    pub stages: String,
    /// Calls per timed back-to-back measurement (at least 100).
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
    /// Folder for the results: bench.txt (the table), bench.json (the record), bench.svg (the
    /// plot); created if needed.
    #[arg(long, default_value = "bench-results")]
    pub out: std::path::PathBuf,
    /// Only the n = 4 shapes (quicker).
    #[arg(long)]
    pub quick: bool,
    /// The wide-n shapes besides n = 4, at C = 1280 (comma-separated; not with --quick).
    #[arg(long, default_value = "8,32")]
    pub wide_n: String,
    /// Only these token counts (comma-separated; default: 1, 4, 16, 64, 256, 1024, 4096, 8192);
    /// static: each mHC.cu config's (C, n) at these counts instead of the configs' own.
    #[arg(long)]
    pub tokens: Option<String>,
    /// Launch overlap with the previous kernel (programmatic dependent launch): off, launch
    /// (the plans' default) or weights (launch, and the weights read before the dependency).
    #[arg(long, default_value = "launch")]
    pub overlap: String,
    /// Tuned tables the plans select with: `embedded` (those compiled in), `none` (the cost
    /// model alone) or the path of a table `mhc tune` wrote.
    #[arg(long, default_value = "embedded")]
    pub tuning: String,
    /// Largest token count also timed as CUDA-graph replays (`us_graph`); a peer timed in graphs
    /// at every T is compared with `--graph-tokens 1000000`.
    #[arg(long, default_value_t = GRAPH_MAX_TOKENS)]
    pub graph_tokens: usize,
}

fn parse_overlap(s: &str) -> Result<Overlap, String> {
    match s {
        "off" => Ok(Overlap::Off),
        "launch" => Ok(Overlap::Launch),
        "weights" => Ok(Overlap::Weights),
        other => Err(format!("--overlap: off, launch or weights (got {other:?})")),
    }
}

/// The launch-latency yardstick of a run: the cheapest kernel we have, back-to-back on a stream
/// and inside a CUDA graph.
#[derive(Debug, Clone, Copy)]
struct Launch {
    b2b: f64,
    graph: f64,
}

impl Launch {
    /// Floor of a row: its bytes at copy bandwidth plus the device-side cost of one launch (the
    /// cheapest kernel inside a graph).
    fn floor(&self, bytes: f64, copy_bw: f64) -> f64 {
        bytes / copy_bw * 1e6 + self.graph
    }
}

/// What bounds a back-to-back figure: the GPU's work, or the host's rate of launching it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum B2bLimit {
    Gpu,
    Host,
}

impl B2bLimit {
    pub(crate) fn name(self) -> &'static str {
        match self {
            B2bLimit::Gpu => "gpu",
            B2bLimit::Host => "host",
        }
    }
}

/// How far above the host's launch rate a call's GPU time must be for its back-to-back figure
/// to count as the GPU's. The rate the run measures is the smallest kernel's, and a stage's call
/// does more host work (argument checks, a larger argument block). Two `mhc bench` runs on two
/// H100s (records 2026-11-27-h100-ab and 2026-11-28-h100-a, launch rates 3.97 and 3.76 us,
/// compared by `mhc bench-diff`) agree within 2% on all 68 rows this margin calls `gpu`, and only
/// within 0.71x to 1.35x on the 32 it calls `host`, whose graph figures agree within 2.1%.
const HOST_MARGIN: f64 = 1.25;

/// What bounds a row's back-to-back figure `us_b2b`, from the GPU time per call (the graph
/// replay where measured, else `us_b2b` itself, which cannot be below it), the kernel launches
/// per call, and the run's back-to-back time of the smallest kernel (`launch_b2b`): `host` when
/// the GPU time is within [`HOST_MARGIN`] of what launching the call's kernels takes.
pub(crate) fn b2b_limit(us_b2b: f64, us_graph: Option<f64>, launches: usize, launch_b2b: f64) -> B2bLimit {
    let gpu_us = us_graph.unwrap_or(us_b2b);
    if gpu_us < HOST_MARGIN * launches as f64 * launch_b2b {
        B2bLimit::Host
    } else {
        B2bLimit::Gpu
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Row {
    stage: Stage,
    formulation: Formulation,
    t: usize,
    n: usize,
    c: usize,
    variant: String,
    /// Kernel launches per call: 2 for `post_pre` run as `post` then `pre`, else 1.
    launches: usize,
    pub(crate) bytes: f64,
    /// Back-to-back, mean per call (median of 5 measurements).
    pub(crate) us: f64,
    /// (slowest - fastest) / median of the 5 back-to-back measurements, percent.
    pub(crate) spread_pct: f64,
    /// CUDA-graph replay, mean per call (median of 5), for T <= `--graph-tokens`.
    pub(crate) us_graph: Option<f64>,
    /// The same spread of the 5 graph measurements.
    pub(crate) graph_spread_pct: Option<f64>,
    /// The host's time to enqueue one call back-to-back ([`Timing::host_us`]).
    host_us: f64,
    /// One device-to-device copy of the same bytes (half read, half written), timed as `us`.
    copy_us: f64,
}

impl Row {
    /// What bounds the row's back-to-back figure ([`b2b_limit`]); none for a failed measurement.
    fn b2b_by(&self, launch: Launch) -> Option<B2bLimit> {
        self.us.is_finite().then(|| b2b_limit(self.us, self.us_graph, self.launches, launch.b2b))
    }
}

pub fn main(args: Args) -> Result<(), String> {
    if args.device != "cuda" {
        return Err(format!("mhc bench times GPU kernels: --device cuda (got {:?})", args.device));
    }
    let dtype: Dtype = args.dtype.parse().map_err(|e| format!("{e}"))?;
    let dev = CudaDevice::new(0).map_err(|e| format!("no CUDA device: {e}"))?;
    let stream = Stream::new(&dev).map_err(|e| e.to_string())?;
    let runs = args.runs.max(100);
    let overlap = parse_overlap(&args.overlap)?;
    let tuning = crate::tune::tuning_arg(&args.tuning)?;
    let copy_bw = copy_bandwidth(&dev, &stream).map_err(|e| e.to_string())?;
    let launch_us = empty_launch_us(&dev, &stream, overlap).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let mut table = String::new();
    let mut emit = |line: String| {
        println!("{line}");
        table.push_str(&line);
        table.push('\n');
    };
    emit(format!(
        "device {} ({}, {} SMs, L2 {} MiB, driver {}); launch overlap {overlap:?}; copy bandwidth {:.0} GB/s; smallest kernel back-to-back {:.2} us, in a graph {:.2} us",
        dev.name(),
        dev.arch(),
        dev.sm_count(),
        dev.l2_bytes() >> 20,
        dev.driver_version(),
        copy_bw / 1e9,
        launch_us.b2b,
        launch_us.graph
    ));
    emit(
        "us = back-to-back calls, mean per call (median of 5 measurements of >= 100 calls, inputs rotated past L2); \
         us_graph = a CUDA graph of 100 calls replayed, mean per call (median of 5); floor_us = bytes / copy bandwidth \
         + the smallest kernel in a graph; x_flr = us / floor_us, x_flr_g = us_graph / floor_us; copy_us = one copy \
         moving the same bytes, timed as us; x_cp = us / copy_us; host_us = the host's time to enqueue one call \
         back-to-back (near us: the GPU waited for the host); b2b_by = what bounds us: gpu, or host where the \
         call's GPU time (us_graph where measured) is within 1.25x of launching its kernels back-to-back (us then \
         measures the host's launch rate)"
            .to_string(),
    );
    let stages: Vec<Stage> = args
        .stages
        .split(',')
        .map(|s| s.trim().parse::<Stage>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let ts: Vec<usize> = match &args.tokens {
        Some(list) => list
            .split(',')
            .map(|v| v.trim().parse::<usize>().map_err(|e| format!("--tokens {v:?}: {e}")))
            .collect::<Result<_, _>>()?,
        None => vec![1, 4, 16, 64, 256, 1024, 4096, 8192],
    };
    let wide_n: Vec<usize> = args
        .wide_n
        .split(',')
        .map(|v| v.trim().parse::<usize>().map_err(|e| format!("--wide-n {v:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let mut rows = Vec::new();
    for &stage in &stages {
        let mut shapes: Vec<(usize, usize, usize, Formulation)> = Vec::new();
        if stage == Stage::Static {
            for (t, c, n) in [
                (320, 1280, 4),
                (512, 1920, 4),
                (1280, 2560, 4),
                (2560, 1280, 4),
                (128, 1280, 8),
                (256, 1280, 8),
                (32, 1280, 32),
                (64, 1280, 32),
                (128, 1280, 32),
            ] {
                if args.quick && n != 4 {
                    continue;
                }
                // --tokens: each config's (C, n) at the given token counts instead.
                match &args.tokens {
                    None => shapes.push((t, n, c, Formulation::Paper)),
                    Some(_) => {
                        for &t in &ts {
                            if !shapes.contains(&(t, n, c, Formulation::Paper)) {
                                shapes.push((t, n, c, Formulation::Paper));
                            }
                        }
                    }
                }
            }
        } else {
            let forms: &[Formulation] = if stage == Stage::Post {
                &[Formulation::DeepSeekV4, Formulation::Paper]
            } else {
                &[Formulation::DeepSeekV4]
            };
            for &form in forms {
                for c in [4096, 7168] {
                    for &t in &ts {
                        shapes.push((t, 4, c, form));
                    }
                }
                if !args.quick && form == Formulation::DeepSeekV4 {
                    for &n in &wide_n {
                        for &t in &ts {
                            shapes.push((t, n, 1280, form));
                        }
                    }
                }
            }
        }
        for (t, n, c, form) in shapes {
            let cfg = Config::new(n, c).with_formulation(form);
            let plan = Plan::with_tuning(&dev, cfg, dtype, t, &tuning).map(|p| p.with_overlap(overlap));
            for w in plan.as_ref().map(|p| p.tuning_warnings()).unwrap_or_default() {
                eprintln!("warning: {w}");
            }
            match plan.and_then(|plan| bench_case(&dev, &stream, stage, &plan, t, runs, args.graph_tokens)) {
                Ok(r) => {
                    if rows.is_empty() {
                        emit(header());
                    }
                    emit(row_line(&r, copy_bw, launch_us));
                    rows.push(r);
                }
                Err(e) => emit(format!("{stage} T={t} n={n} C={c}: {e}")),
            }
        }
    }
    let write = |name: &str, text: String| {
        let path = args.out.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
    };
    write("bench.txt", table)?;
    write("bench.json", record(&DeviceFacts::of(&dev), copy_bw, launch_us, dtype, overlap, args.graph_tokens, &rows)?)?;
    write("bench.svg", svg(copy_bw, &rows))?;
    println!("wrote bench.txt, bench.json and bench.svg to {}", args.out.display());
    Ok(())
}

fn header() -> String {
    format!(
        "{:<8} {:<5} {:>5} {:>3} {:>5} {:>9} {:>9} {:>8} {:>6} {:>8} {:>6} {:>7} {:>8} {:>5} {:>7} {:>6}  variant",
        "stage",
        "form",
        "T",
        "n",
        "C",
        "us",
        "us_graph",
        "GB/s",
        "%copy",
        "floor_us",
        "x_flr",
        "x_flr_g",
        "copy_us",
        "x_cp",
        "host_us",
        "b2b_by"
    )
}

fn row_line(r: &Row, copy_bw: f64, launch: Launch) -> String {
    let gbs = r.bytes / (r.us * 1e-6) / 1e9;
    let floor = launch.floor(r.bytes, copy_bw);
    let x_graph = r.us_graph.map(|g| format!("{:.2}", g / floor));
    format!(
        "{:<8} {:<5} {:>5} {:>3} {:>5} {:>9.2} {:>9} {:>8.0} {:>5.1}% {:>8.2} {:>6.2} {:>7} {:>8.2} {:>5.2} {:>7.2} {:>6}  {}",
        r.stage.name(),
        r.formulation.to_string(),
        r.t,
        r.n,
        r.c,
        r.us,
        r.us_graph.map(|g| format!("{g:.2}")).unwrap_or_else(|| "-".into()),
        gbs,
        100.0 * gbs * 1e9 / copy_bw,
        floor,
        r.us / floor,
        x_graph.unwrap_or_else(|| "-".into()),
        r.copy_us,
        r.us / r.copy_us,
        r.host_us,
        r.b2b_by(launch).map_or("-", B2bLimit::name),
        r.variant
    )
}

/// Median of per-copy event timings of a 1 GiB device-to-device copy, as bytes read + written
/// per second.
pub(crate) fn copy_bandwidth(dev: &CudaDevice, s: &Stream) -> mhc::Result<f64> {
    let bytes = 1usize << 30;
    let a = DeviceBuffer::alloc(dev, bytes)?;
    let b = DeviceBuffer::alloc(dev, bytes)?;
    a.fill_u32(s, 0x3f80_0000)?;
    let (e0, e1) = (Event::new(dev)?, Event::new(dev)?);
    let mut times = Vec::new();
    for i in 0..12 {
        e0.record(s)?;
        b.copy_from(s, &a, bytes)?;
        e1.record(s)?;
        e1.synchronize()?;
        if i >= 2 {
            times.push(e1.elapsed_ms_since(&e0)? as f64 * 1e-3);
        }
    }
    Ok(2.0 * bytes as f64 / median(&mut times))
}

/// Time per call of the cheapest launch we have (expand of one token, 8 channels, one stream),
/// one launch between events (median), back-to-back and in a graph: the launch-latency
/// yardstick of the run.
fn empty_launch_us(dev: &CudaDevice, s: &Stream, overlap: Overlap) -> mhc::Result<Launch> {
    let plan = Plan::new(dev, Config::new(1, 8), Dtype::F32, 1)?.with_overlap(overlap);
    let e = DeviceBuffer::zeroed(dev, 32)?;
    let mut o = DeviceBuffer::zeroed(dev, 32)?;
    let mut call = |_: usize| {
        plan.expand(s, &e.view(Dtype::F32, Layout::dense(1, 8)), &mut o.view_mut(Dtype::F32, Layout::dense(1, 8)))
    };
    for i in 0..50 {
        call(i)?;
    }
    let b2b = time_b2b(dev, s, 200, &mut call)?.us;
    let graph = time_graph(dev, s, 5, &mut call)?.us;
    Ok(Launch { b2b, graph })
}

/// Measurements per column: each is a mean over many calls, the column reports their median.
const REPEATS: usize = 5;

/// The median of [`REPEATS`] measurements (each a mean per call) and their spread.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Median, microseconds per call.
    pub(crate) us: f64,
    /// (slowest - fastest) / median, percent.
    pub(crate) spread_pct: f64,
    /// Back-to-back only: the host's wall time to enqueue the calls, per call (median of the
    /// measurements). Near `us`, the GPU waited for the host; well below it, the host ran ahead.
    pub(crate) host_us: Option<f64>,
}

impl Timing {
    fn of(means: &mut [f64]) -> Timing {
        let us = median(means);
        let (lo, hi) = means.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &m| (lo.min(m), hi.max(m)));
        Timing { us, spread_pct: 100.0 * (hi - lo) / us, host_us: None }
    }
}

/// Mean time per call of `runs` launches back-to-back between two events, measured
/// [`REPEATS`] times (call indices continue across them, so inputs keep rotating): the median.
fn time_b2b(
    dev: &CudaDevice,
    s: &Stream,
    runs: usize,
    call: &mut impl FnMut(usize) -> mhc::Result<()>,
) -> mhc::Result<Timing> {
    let (e0, e1) = (Event::new(dev)?, Event::new(dev)?);
    let mut means = Vec::with_capacity(REPEATS);
    let mut host = Vec::with_capacity(REPEATS);
    for r in 0..REPEATS {
        let started = std::time::Instant::now();
        e0.record(s)?;
        for i in 0..runs {
            call(r * runs + i)?;
        }
        e1.record(s)?;
        host.push(started.elapsed().as_secs_f64() * 1e6 / runs as f64);
        e1.synchronize()?;
        means.push(e1.elapsed_ms_since(&e0)? as f64 * 1e3 / runs as f64);
    }
    Ok(Timing { host_us: Some(median(&mut host)), ..Timing::of(&mut means) })
}

/// Time per call of 100 calls captured in a CUDA graph: one untimed replay, then [`REPEATS`]
/// timed replays of `replays` each, the median of their means.
fn time_graph(
    dev: &CudaDevice,
    s: &Stream,
    replays: usize,
    call: &mut impl FnMut(usize) -> mhc::Result<()>,
) -> mhc::Result<Timing> {
    s.begin_capture()?;
    for i in 0..100 {
        call(i)?;
    }
    let g = s.end_capture()?;
    g.launch(s)?;
    s.synchronize()?;
    let (e0, e1) = (Event::new(dev)?, Event::new(dev)?);
    let mut means = Vec::with_capacity(REPEATS);
    for _ in 0..REPEATS {
        e0.record(s)?;
        for _ in 0..replays {
            g.launch(s)?;
        }
        e1.record(s)?;
        e1.synchronize()?;
        means.push(e1.elapsed_ms_since(&e0)? as f64 * 1e3 / (100 * replays) as f64);
    }
    Ok(Timing::of(&mut means))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A pool of `sets` copies of one tensor, each `stride` bytes apart (256-byte aligned).
struct Pool {
    buf: DeviceBuffer,
    stride: usize,
}

impl Pool {
    fn new(dev: &CudaDevice, s: &Stream, src: &DeviceBuffer, bytes: usize, sets: usize) -> mhc::Result<Pool> {
        let stride = bytes.div_ceil(256) * 256;
        let buf = DeviceBuffer::alloc(dev, stride * sets)?;
        // Fill every set from the random source (tiled), so timings never see zeros or NaN.
        let mut off = 0;
        let total = stride * sets;
        while off < total {
            let n = (total - off).min(src.bytes());
            buf.copy_from_at(s, off, src, n)?;
            off += n;
        }
        Ok(Pool { buf, stride })
    }
    fn ptr(&self, set: usize) -> u64 {
        self.buf.device_ptr() + (set * self.stride) as u64
    }
}

/// Times `stage` at `t` tokens with `plan`'s kernels (the columns of the module documentation).
pub(crate) fn bench_case(
    dev: &CudaDevice,
    s: &Stream,
    stage: Stage,
    plan: &Plan,
    t: usize,
    runs: usize,
    graph_tokens: usize,
) -> mhc::Result<Row> {
    let (cfg, dtype) = (*plan.config(), plan.dtype());
    plan.supports(stage)?;
    let entry =
        |st: Stage| -> mhc::Result<String> { Ok(plan.kernel_for(st, t).map_or("?", |b| b.entry()).to_string()) };
    // post_pre runs the fused persistent-cluster kernel where the plan has it, else the post
    // kernel, then the pre kernel (Plan::post_pre)
    let (variant, launches) = if stage == Stage::PostPre && !plan.post_pre_is_fused(t) {
        (format!("{} + {}", entry(Stage::Post)?, entry(Stage::Pre)?), 2)
    } else {
        (entry(stage)?, 1)
    };
    let (n, c, es) = (cfg.n, cfg.c, dtype.size());
    let k = n * c;
    // Tensors of the stage: (bytes, is_output). Order fixed per stage (see `call`).
    let tensors: Vec<usize> = match stage {
        Stage::Post => vec![t * k * es, t * c * es, t * n * 4, t * n * n * 4, t * k * es],
        Stage::Head => vec![t * k * es, n * k * 4, 4, n * 4, t * c * es],
        Stage::Static => vec![t * k * es, n * 4, n * 4, n * n * 4, c * 4, t * k * es],
        Stage::Expand => vec![t * c * es, t * k * es],
        // pre: x, phi, scale, base, a, h_pre, h_post, h_res, inv_rms (src/device/cuda/pre.rs)
        Stage::Pre => {
            vec![t * k * es, cfg.m() * k * 4, 12, cfg.m() * 4, t * c * es, t * n * 4, t * n * 4, t * n * n * 4, t * 4]
        }
        // post_pre: x, f, h_post, h_res, x_out, then pre's parameters and outputs
        Stage::PostPre => vec![
            t * k * es,
            t * c * es,
            t * n * 4,
            t * n * n * 4,
            t * k * es,
            cfg.m() * k * 4,
            12,
            cfg.m() * 4,
            t * c * es,
            t * n * 4,
            t * n * 4,
            t * n * n * 4,
            t * 4,
        ],
        other => return Err(mhc::Error::Config { what: "stage", reason: format!("{other} is not benchmarked") }),
    };
    let bytes = match stage {
        Stage::Post => (t * (2 * k + c) * es + t * (n + n * n) * 4) as f64,
        // phi (n x nC f32) moves at least once too: at decode sizes of n = 32 it is most of the bytes
        Stage::Head => (t * (k + c) * es + n * k * 4) as f64,
        Stage::Static => (2 * t * k * es) as f64,
        Stage::Pre => (t * (k + c) * es + cfg.m() * k * 4) as f64,
        Stage::PostPre => (t * 2 * (k + c) * es + cfg.m() * k * 4) as f64,
        _ => (t * (k + c) * es) as f64,
    };
    let per_set: usize = tensors.iter().map(|b| b.div_ceil(256) * 256).sum();
    let sets = ((2 * dev.l2_bytes() as usize).div_ceil(per_set) + 1).clamp(2, 4096);
    // Random source: normal values (bf16 or f32 as the tensor needs; coefficients reuse the f32
    // source, whose values are finite and O(1)).
    let mut rng = Rng::new(0x5eed ^ (t as u64) ^ ((n as u64) << 20) ^ ((c as u64) << 32));
    let src_len = 1 << 22;
    let vals = rng.normals(src_len, 1.0);
    let src_act = mhc::device::cuda::runner::upload(dev, dtype, &vals)?;
    let src_f32: Vec<f64> = vals.iter().map(|v| v.abs() * 0.25 + 0.01).collect();
    let src_par = mhc::device::cuda::runner::upload(dev, Dtype::F32, &src_f32)?;
    let is_act = |i: usize| match stage {
        Stage::Post => i == 0 || i == 1 || i == 4,
        Stage::Head => i == 0 || i == 4,
        Stage::Static => i == 0 || i == 5,
        Stage::Pre => i == 0 || i == 4,
        Stage::PostPre => i == 0 || i == 1 || i == 4 || i == 8,
        _ => true,
    };
    let ws = plan.new_workspace()?;
    let pools: Vec<Pool> = tensors
        .iter()
        .enumerate()
        .map(|(i, &b)| Pool::new(dev, s, if is_act(i) { &src_act } else { &src_par }, b, sets))
        .collect::<mhc::Result<_>>()?;
    s.synchronize()?;
    let call = |set: usize| -> mhc::Result<()> {
        let p = |i: usize| pools[i].ptr(set);
        let len = |i: usize, dt: Dtype| tensors[i] / dt.size();
        // SAFETY: every pointer is `set * stride` into a pool that holds `sets` copies of the
        // tensor, each `tensors[i]` bytes; the views cover exactly that range.
        unsafe {
            use mhc::device::{DeviceTensor as D, DeviceTensorMut as M};
            let f32v = |i: usize, rows: usize, row: usize| {
                D::from_raw(p(i), len(i, Dtype::F32), Dtype::F32, Layout::dense(rows, row))
            };
            match stage {
                Stage::Post => plan.post(
                    s,
                    &D::from_raw(p(0), len(0, dtype), dtype, Layout::streams(t, n, c)),
                    &D::from_raw(p(1), len(1, dtype), dtype, Layout::dense(t, c)),
                    &f32v(2, t, n),
                    &f32v(3, t, n * n),
                    &mut M::from_raw(p(4), len(4, dtype), dtype, Layout::streams(t, n, c)),
                ),
                Stage::Head => plan.head(
                    s,
                    &D::from_raw(p(0), len(0, dtype), dtype, Layout::streams(t, n, c)),
                    &f32v(1, n, k),
                    &f32v(2, 1, 1),
                    &f32v(3, 1, n),
                    &mut M::from_raw(p(4), len(4, dtype), dtype, Layout::dense(t, c)),
                ),
                Stage::Static => plan.static_layer(
                    s,
                    &D::from_raw(p(0), len(0, dtype), dtype, Layout::streams(t, n, c)),
                    &f32v(1, 1, n),
                    &f32v(2, 1, n),
                    &f32v(3, n, n),
                    &f32v(4, 1, c),
                    &mut M::from_raw(p(5), len(5, dtype), dtype, Layout::streams(t, n, c)),
                ),
                Stage::Pre | Stage::PostPre => {
                    let o = if stage == Stage::Pre { 0 } else { 4 };
                    let params = mhc::device::cuda::PreParamViews {
                        phi: f32v(o + 1, cfg.m(), k),
                        scale: f32v(o + 2, 1, 3),
                        base: f32v(o + 3, 1, cfg.m()),
                        gamma_k: None,
                        gamma_f: None,
                    };
                    let fm = |i: usize, rows: usize, row: usize| {
                        M::from_raw(p(i), len(i, Dtype::F32), Dtype::F32, Layout::dense(rows, row))
                    };
                    let mut out = mhc::device::cuda::PreOutViews {
                        a: M::from_raw(p(o + 4), len(o + 4, dtype), dtype, Layout::dense(t, c)),
                        y: None,
                        h_pre: fm(o + 5, t, n),
                        h_post: fm(o + 6, t, n),
                        h_res: fm(o + 7, t, n * n),
                        inv_rms: fm(o + 8, t, 1),
                    };
                    let x = D::from_raw(p(0), len(0, dtype), dtype, Layout::streams(t, n, c));
                    if stage == Stage::Pre {
                        plan.pre(s, &ws, &x, &params, &mut out)
                    } else {
                        let post = mhc::device::cuda::PostInViews {
                            f: D::from_raw(p(1), len(1, dtype), dtype, Layout::dense(t, c)),
                            h_post: f32v(2, t, n),
                            h_res: f32v(3, t, n * n),
                        };
                        let mut xo = M::from_raw(p(4), len(4, dtype), dtype, Layout::streams(t, n, c));
                        plan.post_pre(s, &ws, &x, &post, &mut xo, &params, &mut out)
                    }
                }
                _ => plan.expand(
                    s,
                    &D::from_raw(p(0), len(0, dtype), dtype, Layout::dense(t, c)),
                    &mut M::from_raw(p(1), len(1, dtype), dtype, Layout::streams(t, n, c)),
                ),
            }
        }
    };
    for i in 0..10 {
        call(i % sets)?;
    }
    s.synchronize()?;
    let mut call = |i: usize| call(i % sets);
    let b2b = time_b2b(dev, s, runs, &mut call)?;
    // Graph replay up to graph_tokens: 100 captured calls, replayed 5 times per measurement.
    let graph = if t <= graph_tokens { Some(time_graph(dev, s, 5, &mut call)?) } else { None };
    let copy_us = same_size_copy_us(dev, s, bytes, runs)?;
    Ok(Row {
        stage,
        formulation: cfg.formulation,
        t,
        n,
        c,
        variant,
        launches,
        bytes,
        us: b2b.us,
        spread_pct: b2b.spread_pct,
        host_us: b2b.host_us.unwrap_or(f64::NAN),
        us_graph: graph.map(|g| g.us),
        graph_spread_pct: graph.map(|g| g.spread_pct),
        copy_us,
    })
}

/// Time of one device-to-device copy that moves `bytes` in all (half read, half written), timed
/// like a case's `us` (back-to-back, median of the means) and rotated over enough buffers that its
/// reads miss L2: the yardstick of the case's own size, whose launch, ramp-up and tail the 1 GiB
/// copy's bandwidth averages away.
fn same_size_copy_us(dev: &CudaDevice, s: &Stream, bytes: f64, runs: usize) -> mhc::Result<f64> {
    let half = ((bytes / 2.0) as usize).max(1).div_ceil(256) * 256;
    let sets = ((2 * dev.l2_bytes() as usize).div_ceil(half) + 1).clamp(2, 64);
    let alloc = || (0..sets).map(|_| DeviceBuffer::alloc(dev, half)).collect::<mhc::Result<Vec<_>>>();
    let (src, dst) = (alloc()?, alloc()?);
    for b in &src {
        b.fill_u32(s, 0x3f80_0000)?;
    }
    let mut call = |i: usize| dst[i % sets].copy_from(s, &src[i % sets], half);
    for i in 0..sets {
        call(i)?;
    }
    Ok(time_b2b(dev, s, runs, &mut call)?.us)
}

/// What a record says of the GPU it ran on.
pub(crate) struct DeviceFacts {
    pub(crate) name: String,
    pub(crate) arch: &'static str,
    pub(crate) sm_count: u32,
    l2_bytes: u32,
    pub(crate) driver: i32,
}

impl DeviceFacts {
    pub(crate) fn of(dev: &CudaDevice) -> Self {
        DeviceFacts {
            name: dev.name().to_string(),
            arch: dev.arch().name(),
            sm_count: dev.sm_count(),
            l2_bytes: dev.l2_bytes(),
            driver: dev.driver_version(),
        }
    }
}

/// The run as a benchmark record (docs/benchmarks/README.md): the device, the method's
/// yardsticks and one entry per row.
fn record(
    dev: &DeviceFacts,
    copy_bw: f64,
    launch: Launch,
    dtype: Dtype,
    overlap: Overlap,
    graph_tokens: usize,
    rows: &[Row],
) -> Result<String, String> {
    use serde_json::json;
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let gbps = r.bytes / (r.us * 1e-6) / 1e9;
            json!({
                "name": format!("cuda_{}_{}_{}_T{}_n{}_C{}", dev.arch, r.stage.name(), dtype, r.t, r.n, r.c),
                "stage": r.stage.name(),
                "formulation": r.formulation.to_string(),
                "dtype": dtype.name(),
                "T": r.t,
                "n": r.n,
                "C": r.c,
                "variant": r.variant,
                "launches": r.launches,
                "bytes": r.bytes,
                "us_b2b": r.us,
                "spread_pct": r.spread_pct,
                "host_us": r.host_us,
                "us_graph": r.us_graph,
                "graph_spread_pct": r.graph_spread_pct,
                "b2b_by": r.b2b_by(launch).map(B2bLimit::name),
                "gbps": gbps,
                "pct_copy": 100.0 * gbps * 1e9 / copy_bw,
                "floor_us": launch.floor(r.bytes, copy_bw),
                "copy_us": r.copy_us,
            })
        })
        .collect();
    let value = json!({
        "date": today(),
        "gpu": dev.name,
        "arch": dev.arch,
        "sm_count": dev.sm_count,
        "l2_bytes": dev.l2_bytes,
        "driver": dev.driver,
        "commit": option_env!("MHC_COMMIT"),
        "dtype": dtype.name(),
        "overlap": format!("{overlap:?}"),
        "copy_gbps": copy_bw / 1e9,
        "launch_us_b2b": launch.b2b,
        "launch_us_graph": launch.graph,
        "graph_max_tokens": graph_tokens,
        "source": "mhc bench",
        "description": "us_b2b: back-to-back calls, mean per call, median of 5 measurements of >= 100 calls with inputs rotated past L2; us_graph (T <= graph_max_tokens): a CUDA graph of 100 calls replayed, mean per call, median of 5; spread_pct: (slowest - fastest) / median of the 5; host_us: the host's wall time to enqueue one call back-to-back (median of the 5); b2b_by: what bounds us_b2b (host: the call's GPU time is within 1.25x of launching its kernels back-to-back)",
        "rows": rows,
    });
    // Non-finite numbers (a failed measurement) become null: the record stays valid JSON.
    serde_json::to_string_pretty(&value).map(|s| s + "\n").map_err(|e| e.to_string())
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
pub(crate) fn today() -> String {
    let days =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// GB/s against T (log2 axis): one panel per stage, one series per (formulation, n, C) with its
/// own color and marker (10 colors x 4 markers: 40 series per panel stay distinct), the copy
/// bandwidth as a dashed line in every panel.
fn svg(copy_bw: f64, rows: &[Row]) -> String {
    const COLORS: [&str; 10] =
        ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
    let mut stages: Vec<Stage> = Vec::new();
    for r in rows {
        if !stages.contains(&r.stage) {
            stages.push(r.stage);
        }
    }
    let (pw, ph, legend_w) = (560.0, 300.0, 230.0);
    let cols = 2usize;
    let panel_rows = stages.len().div_ceil(cols).max(1);
    let (w, h) = ((pw + legend_w) * cols as f64, ph * panel_rows as f64 + 20.0);
    let ymax = (copy_bw / 1e9 * 1.1).max(1.0);
    let tmax = rows.iter().map(|r| r.t).max().unwrap_or(1).max(2) as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n"
    );
    let _ = writeln!(s, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    for (p, stage) in stages.iter().enumerate() {
        let (ox, oy) = ((p % cols) as f64 * (pw + legend_w), (p / cols) as f64 * ph + 20.0);
        let (l, b, top, right) = (ox + 60.0, oy + ph - 40.0, oy + 25.0, ox + pw - 10.0);
        let x = |t: usize| l + (t as f64).log2() / tmax.log2() * (right - l);
        let y = |g: f64| b - g / ymax * (b - top);
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" font-weight=\"bold\">{}</text>", l, oy + 14.0, stage.name());
        let _ = writeln!(s, "<line x1=\"{l}\" y1=\"{b}\" x2=\"{right}\" y2=\"{b}\" stroke=\"black\"/>");
        let _ = writeln!(s, "<line x1=\"{l}\" y1=\"{top}\" x2=\"{l}\" y2=\"{b}\" stroke=\"black\"/>");
        let mut t = 1usize;
        while t as f64 <= tmax {
            let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{t}</text>", x(t), b + 14.0);
            t *= 4;
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">tokens T</text>",
            (l + right) / 2.0,
            b + 28.0
        );
        for i in 0..=4 {
            let g = ymax * i as f64 / 4.0;
            let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{g:.0}</text>", l - 4.0, y(g) + 4.0);
        }
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{:.1}\">GB/s</text>", ox + 5.0, top - 5.0);
        let cy = y(copy_bw / 1e9);
        let _ = writeln!(
            s,
            "<line x1=\"{l}\" y1=\"{cy:.1}\" x2=\"{right}\" y2=\"{cy:.1}\" stroke=\"gray\" stroke-dasharray=\"4\"/><text x=\"{:.1}\" y=\"{:.1}\" fill=\"gray\">copy</text>",
            right - 30.0,
            cy - 3.0
        );
        let mut series: Vec<(String, Vec<&Row>)> = Vec::new();
        for r in rows.iter().filter(|r| r.stage == *stage) {
            let key = format!("{} n={} C={}", r.formulation, r.n, r.c);
            match series.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push(r),
                None => series.push((key, vec![r])),
            }
        }
        for (i, (key, pts)) in series.iter().enumerate() {
            let col = COLORS[i % COLORS.len()];
            let marker = i / COLORS.len() % 4;
            let xy: Vec<(f64, f64)> = pts.iter().map(|r| (x(r.t), y(r.bytes / (r.us * 1e-6) / 1e9))).collect();
            let path: Vec<String> = xy.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
            let _ = writeln!(
                s,
                "<polyline fill=\"none\" stroke=\"{col}\" stroke-width=\"1.5\" points=\"{}\"/>",
                path.join(" ")
            );
            let ly = top + 13.0 * i as f64;
            for (px, py) in xy.iter().copied().chain([(ox + pw + 8.0, ly - 4.0)]) {
                let _ = writeln!(s, "{}", marker_svg(marker, px, py, col));
            }
            let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"{col}\">{key}</text>", ox + pw + 16.0);
        }
    }
    s.push_str("</svg>\n");
    s
}

/// One of four markers (circle, square, triangle, diamond) centred on (x, y).
fn marker_svg(kind: usize, x: f64, y: f64, color: &str) -> String {
    match kind {
        0 => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{color}\"/>"),
        1 => format!("<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"6\" fill=\"{color}\"/>", x - 3.0, y - 3.0),
        2 => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\"/>",
            y - 4.0,
            x - 3.5,
            y + 3.0,
            x + 3.5,
            y + 3.0
        ),
        _ => format!(
            "<polygon points=\"{x:.1},{:.1} {:.1},{y:.1} {x:.1},{:.1} {:.1},{y:.1}\" fill=\"{color}\"/>",
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(stage: Stage, n: usize, c: usize, t: usize, us: f64) -> Row {
        Row {
            stage,
            formulation: Formulation::DeepSeekV4,
            t,
            n,
            c,
            variant: "k".into(),
            launches: 1,
            bytes: 1e6,
            us,
            spread_pct: 1.0,
            us_graph: (t <= GRAPH_MAX_TOKENS).then_some(us / 2.0),
            graph_spread_pct: (t <= GRAPH_MAX_TOKENS).then_some(1.0),
            host_us: us / 3.0,
            copy_us: us,
        }
    }

    /// A record is valid JSON with the documented keys even when a measurement failed (NaN
    /// becomes null).
    #[test]
    fn the_record_is_valid_json_even_with_a_failed_measurement() {
        let dev =
            DeviceFacts { name: "GPU \"x\"".into(), arch: "sm_90a", sm_count: 132, l2_bytes: 50 << 20, driver: 13000 };
        let rows = [row(Stage::Pre, 4, 4096, 1, 5.0), row(Stage::Post, 4, 4096, 8192, f64::NAN)];
        let text =
            record(&dev, 3e12, Launch { b2b: 3.0, graph: 0.7 }, Dtype::Bf16, Overlap::Launch, GRAPH_MAX_TOKENS, &rows)
                .unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        for key in [
            "date",
            "gpu",
            "sm_count",
            "driver",
            "commit",
            "copy_gbps",
            "launch_us_graph",
            "launch_us_b2b",
            "graph_max_tokens",
            "source",
            "description",
            "rows",
        ] {
            assert!(v.get(key).is_some(), "{key} missing: {text}");
        }
        assert_eq!(v["graph_max_tokens"], GRAPH_MAX_TOKENS);
        assert_eq!(v["rows"][0]["us_graph"], 2.5);
        assert!(v["rows"][1]["us_b2b"].is_null() && v["rows"][1]["us_graph"].is_null());
        // 2.5 us of GPU time per call is under 1.25x the 3 us launch: the host bounds us_b2b.
        assert_eq!(v["rows"][0]["b2b_by"], "host");
        assert_eq!(v["rows"][0]["launches"], 1);
        assert!(v["rows"][1]["b2b_by"].is_null(), "no bound for a failed measurement");
        assert!(v["rows"][0].get("us").is_none(), "the record format's single-call column is not measured");
        assert_eq!(today().len(), 10);
    }

    /// The table's header and rows have the same columns, `b2b_by` and `host_us` among them: a
    /// decode row whose graph time is under the launch is `host`, a large one `gpu`, a failed one `-`.
    #[test]
    fn table_rows_match_the_header() {
        let launch = Launch { b2b: 3.0, graph: 0.7 };
        let header = header();
        let head: Vec<&str> = header.split_whitespace().collect();
        assert_eq!(head[head.len() - 3..], ["host_us", "b2b_by", "variant"]);
        let cases = [
            (row(Stage::Post, 4, 4096, 1, 3.4), "host"),
            (row(Stage::Pre, 4, 4096, 8192, 128.0), "gpu"),
            (row(Stage::Pre, 4, 4096, 8192, f64::NAN), "-"),
        ];
        for (r, by) in cases {
            let line = row_line(&r, 3e12, launch);
            let cols: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(cols.len(), head.len(), "{line}");
            assert_eq!(cols[cols.len() - 2], by, "{line}");
        }
    }

    /// One panel per stage; 25 series of one stage get 25 distinct (color, marker) pairs.
    #[test]
    fn the_plot_has_a_panel_per_stage_and_distinct_series() {
        let mut rows = Vec::new();
        for n in 1..=25 {
            for t in [1, 64, 8192] {
                rows.push(row(Stage::Head, n, 1280, t, 10.0));
            }
        }
        rows.push(row(Stage::Post, 4, 4096, 16, 2.0));
        let svg = svg(3e12, &rows);
        assert!(svg.contains(">head</text>") && svg.contains(">post</text>"));
        assert_eq!(svg.matches("<polyline").count(), 26);
        let legends: Vec<&str> = svg.lines().filter(|l| l.contains("fill=\"#") && l.contains("n=")).collect();
        assert_eq!(legends.len(), 26);
        // Series past the tenth change marker: circles, then squares, then triangles.
        assert!(svg.contains("<circle") && svg.contains("<rect x=") && svg.contains("<polygon"));
    }
}
