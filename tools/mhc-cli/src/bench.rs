//! `mhc bench --device cuda`: every stage x shape x selected variant, timed on the GPU.
//!
//! Method (DESIGN.md "Tools", METHOD.md): the device-to-device copy bandwidth is measured first in
//! the same run (bytes read + written over the median copy time); each case is warmed up, then
//! timed with device events around each of >= 100 runs (median), inputs rotated over enough sets
//! that the working set exceeds twice the L2 size, and also as back-to-back launches (mean per
//! call) and, for T <= [`GRAPH_MAX_TOKENS`], as replays of a captured CUDA graph of 100 calls.
//! Bytes = what must move (inputs read once, outputs written once); floor = bytes / copy
//! bandwidth + the device-side cost of one launch (the cheapest kernel inside a graph), so the
//! ratio means something at decode sizes too. Plans launch with their default [`Overlap`] (programmatic dependent launch) unless
//! `--overlap off`. Prints a table, writes JSON and an SVG plot.

use mhc::device::cuda::{CudaDevice, DeviceBuffer, Event, Overlap, Plan, Stream};

/// Largest T also timed as graph replays: decode and the mid kernel's range, where launch
/// overhead is a large share and inference engines capture graphs (DESIGN.md's peer figures for
/// `pre` at T <= 128 are graph replays).
const GRAPH_MAX_TOKENS: usize = 64;
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
    /// Timed runs per case (median reported; at least 100).
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<String>,
    /// Write an SVG plot (GB/s against T, per stage) here.
    #[arg(long)]
    pub svg: Option<String>,
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
    /// Launch overlap with the previous kernel (programmatic dependent launch): off, or launch
    /// (the plans' default).
    #[arg(long, default_value = "launch")]
    pub overlap: String,
}

fn parse_overlap(s: &str) -> Result<Overlap, String> {
    match s {
        "off" => Ok(Overlap::Off),
        "launch" => Ok(Overlap::Launch),
        other => Err(format!("--overlap: off or launch (got {other:?})")),
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
    /// cheapest kernel inside a graph; a single launch timed between events adds a host-side
    /// launch time that varied 5-12 us from run to run, too noisy for a yardstick).
    fn floor(&self, bytes: f64, copy_bw: f64) -> f64 {
        bytes / copy_bw * 1e6 + self.graph
    }
}

#[derive(Debug, Clone)]
struct Row {
    stage: Stage,
    formulation: Formulation,
    t: usize,
    n: usize,
    c: usize,
    variant: String,
    bytes: f64,
    us: f64,
    us_b2b: f64,
    us_graph: Option<f64>,
    /// One device-to-device copy of the same bytes (half read, half written), timed as `us`.
    copy_us: f64,
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
    let copy_bw = copy_bandwidth(&dev, &stream).map_err(|e| e.to_string())?;
    let launch_us = empty_launch_us(&dev, &stream, overlap).map_err(|e| e.to_string())?;
    println!(
        "device {} ({}, {} SMs, L2 {} MiB, driver {}); launch overlap {overlap:?}; copy bandwidth {:.0} GB/s; smallest kernel back-to-back {:.2} us, in a graph {:.2} us",
        dev.name(),
        dev.arch(),
        dev.sm_count(),
        dev.l2_bytes() >> 20,
        dev.driver_version(),
        copy_bw / 1e9,
        launch_us.b2b,
        launch_us.graph
    );
    println!(
        "floor_us = bytes / copy bandwidth + the smallest kernel in a graph; x_flr = us / floor_us, x_flr_g = us_graph / floor_us; \
         copy_us = one copy of the same bytes (half read, half written) timed as us, x_cp = us / copy_us"
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
            match bench_case(&dev, &stream, stage, cfg, dtype, t, runs, overlap) {
                Ok(r) => {
                    print_row(&r, copy_bw, launch_us, rows.is_empty());
                    rows.push(r);
                }
                Err(e) => println!("{stage} T={t} n={n} C={c}: {e}"),
            }
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, json(&dev, copy_bw, launch_us, dtype, overlap, &rows))
            .map_err(|e| format!("{path}: {e}"))?;
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, svg(copy_bw, &rows)).map_err(|e| format!("{path}: {e}"))?;
    }
    Ok(())
}

fn print_row(r: &Row, copy_bw: f64, launch: Launch, header: bool) {
    if header {
        println!(
            "{:<8} {:<5} {:>5} {:>3} {:>5} {:>9} {:>9} {:>9} {:>8} {:>6} {:>8} {:>6} {:>7} {:>8} {:>5}  variant",
            "stage",
            "form",
            "T",
            "n",
            "C",
            "us",
            "us_b2b",
            "us_graph",
            "GB/s",
            "%copy",
            "floor_us",
            "x_flr",
            "x_flr_g",
            "copy_us",
            "x_cp"
        );
    }
    let gbs = r.bytes / (r.us * 1e-6) / 1e9;
    let floor = launch.floor(r.bytes, copy_bw);
    let x_graph = r.us_graph.map(|g| format!("{:.2}", g / floor));
    println!(
        "{:<8} {:<5} {:>5} {:>3} {:>5} {:>9.2} {:>9.2} {:>9} {:>8.0} {:>5.1}% {:>8.2} {:>6.2} {:>7} {:>8.2} {:>5.2}  {}",
        r.stage.name(),
        r.formulation.to_string(),
        r.t,
        r.n,
        r.c,
        r.us,
        r.us_b2b,
        r.us_graph.map(|g| format!("{g:.2}")).unwrap_or_else(|| "-".into()),
        gbs,
        100.0 * gbs * 1e9 / copy_bw,
        floor,
        r.us / floor,
        x_graph.unwrap_or_else(|| "-".into()),
        r.copy_us,
        r.us / r.copy_us,
        r.variant
    );
}

/// Median of per-copy event timings of a 1 GiB device-to-device copy, as bytes read + written
/// per second.
fn copy_bandwidth(dev: &CudaDevice, s: &Stream) -> mhc::Result<f64> {
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
    let b2b = time_b2b(dev, s, 1000, &mut call)?;
    let graph = time_graph(dev, s, 10, &mut call)?;
    Ok(Launch { b2b, graph })
}

/// Median of `runs` single launches, each between its own pair of events (all recorded in one go).
fn time_single(
    dev: &CudaDevice,
    s: &Stream,
    runs: usize,
    call: &mut impl FnMut(usize) -> mhc::Result<()>,
) -> mhc::Result<f64> {
    let evs: Vec<(Event, Event)> =
        (0..runs).map(|_| Ok((Event::new(dev)?, Event::new(dev)?))).collect::<mhc::Result<_>>()?;
    for (i, (a, b)) in evs.iter().enumerate() {
        a.record(s)?;
        call(i)?;
        b.record(s)?;
    }
    s.synchronize()?;
    let mut times: Vec<f64> =
        evs.iter().map(|(a, b)| b.elapsed_ms_since(a).map(|ms| ms as f64 * 1e3)).collect::<mhc::Result<_>>()?;
    Ok(median(&mut times))
}

/// Mean time per call of `runs` launches back-to-back between two events.
fn time_b2b(
    dev: &CudaDevice,
    s: &Stream,
    runs: usize,
    call: &mut impl FnMut(usize) -> mhc::Result<()>,
) -> mhc::Result<f64> {
    let (e0, e1) = (Event::new(dev)?, Event::new(dev)?);
    e0.record(s)?;
    for i in 0..runs {
        call(i)?;
    }
    e1.record(s)?;
    e1.synchronize()?;
    Ok(e1.elapsed_ms_since(&e0)? as f64 * 1e3 / runs as f64)
}

/// Time per call of 100 calls captured in a CUDA graph, replayed `replays` times (after one
/// untimed replay).
fn time_graph(
    dev: &CudaDevice,
    s: &Stream,
    replays: usize,
    call: &mut impl FnMut(usize) -> mhc::Result<()>,
) -> mhc::Result<f64> {
    s.begin_capture()?;
    for i in 0..100 {
        call(i)?;
    }
    let g = s.end_capture()?;
    g.launch(s)?;
    s.synchronize()?;
    let (e0, e1) = (Event::new(dev)?, Event::new(dev)?);
    e0.record(s)?;
    for _ in 0..replays {
        g.launch(s)?;
    }
    e1.record(s)?;
    e1.synchronize()?;
    Ok(e1.elapsed_ms_since(&e0)? as f64 * 1e3 / (100 * replays) as f64)
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

#[allow(clippy::too_many_arguments)]
fn bench_case(
    dev: &CudaDevice,
    s: &Stream,
    stage: Stage,
    cfg: Config,
    dtype: Dtype,
    t: usize,
    runs: usize,
    overlap: Overlap,
) -> mhc::Result<Row> {
    let plan = Plan::new(dev, cfg, dtype, t)?.with_overlap(overlap);
    plan.supports(stage)?;
    let entry =
        |st: Stage| -> mhc::Result<String> { Ok(plan.kernel_for(st, t).map_or("?", |b| b.entry()).to_string()) };
    // post_pre runs the fused persistent-cluster kernel where the plan has it, else the post
    // kernel, then the pre kernel (Plan::post_pre)
    let variant = if stage == Stage::PostPre && !plan.post_pre_is_fused(t) {
        format!("{} + {}", entry(Stage::Post)?, entry(Stage::Pre)?)
    } else {
        entry(stage)?
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
    let us = time_single(dev, s, runs, &mut call)?;
    let us_b2b = time_b2b(dev, s, runs, &mut call)?;
    // Graph replay for small T: 100 captured calls, replayed 5 times.
    let us_graph = if t <= GRAPH_MAX_TOKENS { Some(time_graph(dev, s, 5, &mut call)?) } else { None };
    let copy_us = same_size_copy_us(dev, s, bytes, runs)?;
    Ok(Row { stage, formulation: cfg.formulation, t, n, c, variant, bytes, us, us_b2b, us_graph, copy_us })
}

/// Median time of one device-to-device copy that moves `bytes` in all (half read, half
/// written), timed like a case's `us` (events around each call) and rotated over enough buffers
/// that its reads miss L2: the yardstick of the case's own size, whose launch, ramp-up and tail
/// the 1 GiB copy's bandwidth averages away.
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
    time_single(dev, s, runs, &mut call)
}

fn json(dev: &CudaDevice, copy_bw: f64, launch: Launch, dtype: Dtype, overlap: Overlap, rows: &[Row]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"device\": {:?}, \"arch\": \"{}\", \"sm_count\": {}, \"l2_bytes\": {}, \"driver\": {}, \"dtype\": \"{}\", \
         \"overlap\": \"{:?}\", \"copy_gbps\": {:.1}, \"launch_us_b2b\": {:.3}, \"launch_us_graph\": {:.3}, \"rows\": [",
        dev.name(),
        dev.arch(),
        dev.sm_count(),
        dev.l2_bytes(),
        dev.driver_version(),
        dtype,
        overlap,
        copy_bw / 1e9,
        launch.b2b,
        launch.graph
    );
    for (i, r) in rows.iter().enumerate() {
        let gbs = r.bytes / (r.us * 1e-6) / 1e9;
        let floor = launch.floor(r.bytes, copy_bw);
        let _ = write!(
            s,
            "{}\n  {{\"name\": \"cuda_{}_{}_{}_T{}_n{}_C{}\", \"stage\": \"{}\", \"formulation\": \"{}\", \"T\": {}, \"n\": {}, \"C\": {}, \
             \"variant\": \"{}\", \"bytes\": {}, \"us\": {:.3}, \"us_b2b\": {:.3}, \"us_graph\": {}, \"gbps\": {:.1}, \
             \"pct_copy\": {:.1}, \"transfer_us\": {:.3}, \"floor_us\": {:.3}, \"copy_same_us\": {:.3}}}",
            if i == 0 { "" } else { "," },
            dev.arch(),
            r.stage.name(),
            dtype,
            r.t,
            r.n,
            r.c,
            r.stage.name(),
            r.formulation,
            r.t,
            r.n,
            r.c,
            r.variant,
            r.bytes,
            r.us,
            r.us_b2b,
            r.us_graph.map(|g| format!("{g:.3}")).unwrap_or_else(|| "null".into()),
            gbs,
            100.0 * gbs * 1e9 / copy_bw,
            r.bytes / copy_bw * 1e6,
            floor,
            r.copy_us
        );
    }
    s.push_str("\n]}\n");
    s
}

/// GB/s against T (log2 axis) for each (stage, n, C) series, with the copy bandwidth as a line.
fn svg(copy_bw: f64, rows: &[Row]) -> String {
    let (w, h, l, b) = (900.0, 520.0, 70.0, 50.0);
    let ymax = (copy_bw / 1e9 * 1.1).max(1.0);
    let x = |t: usize| l + (t as f64).log2() / 13.0 * (w - l - 220.0);
    let y = |g: f64| h - b - g / ymax * (h - b - 20.0);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n");
    let _ = writeln!(s, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let _ = writeln!(s, "<line x1=\"{l}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>", h - b, w - 220.0, h - b);
    let _ = writeln!(s, "<line x1=\"{l}\" y1=\"20\" x2=\"{l}\" y2=\"{}\" stroke=\"black\"/>", h - b);
    for t in [1usize, 4, 16, 64, 256, 1024, 4096, 8192] {
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{t}</text>", x(t), h - b + 15.0);
    }
    let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">tokens T</text>", (w - 220.0) / 2.0, h - 10.0);
    for i in 0..=5 {
        let g = ymax * i as f64 / 5.0;
        let _ = writeln!(s, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{:.0}</text>", l - 5.0, y(g) + 4.0, g);
    }
    let _ = writeln!(s, "<text x=\"15\" y=\"15\">GB/s</text>");
    let cy = y(copy_bw / 1e9);
    let _ = writeln!(
        s,
        "<line x1=\"{l}\" y1=\"{cy:.1}\" x2=\"{}\" y2=\"{cy:.1}\" stroke=\"gray\" stroke-dasharray=\"4\"/>",
        w - 220.0
    );
    let _ = writeln!(s, "<text x=\"{}\" y=\"{:.1}\">copy {:.0} GB/s</text>", w - 215.0, cy + 4.0, copy_bw / 1e9);
    let colors =
        ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
    let mut series: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in rows.iter().filter(|r| r.stage != Stage::Static) {
        let key = format!("{} {} n={} C={}", r.stage.name(), r.formulation, r.n, r.c);
        match series.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(r),
            None => series.push((key, vec![r])),
        }
    }
    for (i, (key, pts)) in series.iter().enumerate() {
        let col = colors[i % colors.len()];
        let path: Vec<String> =
            pts.iter().map(|r| format!("{:.1},{:.1}", x(r.t), y(r.bytes / (r.us * 1e-6) / 1e9))).collect();
        let _ = writeln!(
            s,
            "<polyline fill=\"none\" stroke=\"{col}\" stroke-width=\"1.5\" points=\"{}\"/>",
            path.join(" ")
        );
        let _ = writeln!(s, "<text x=\"{}\" y=\"{}\" fill=\"{col}\">{key}</text>", w - 215.0, 40.0 + 14.0 * i as f64);
    }
    s.push_str("</svg>\n");
    s
}
