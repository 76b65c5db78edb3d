//! `mhc run <stage> --in DIR --out DIR ...`: runs one stage on `.npy` files through a device's
//! [`StageRunner`] and writes its outputs as `.npy` files. Every input is read and checked and
//! every output computed before the first file is written; outputs go to temporary names that
//! are renamed at the end, so a failure leaves nothing partial behind.

use crate::devices;
use mhc::npy::{self, NpyDtype};
use mhc::runner::{check_finite, resolve_config, shape_text, signature, Array, Named, Signature};
use mhc::{Config, Dtype, Error, Formulation, Stage};
use std::path::{Path, PathBuf};

const LONG_ABOUT: &str = "\
Inputs are read from DIR/<name>.npy (float32 or float64, little-endian, C order). T (tokens), n
(streams) and C (hidden size) are inferred from x (or e / logits); M = n*n + 2n. The device stores
the inputs in --dtype: bf16 rounds the activations (x, f, e and their gradients) once; parameters
and coefficients stay f32, or f64 with --dtype f64. Outputs are stored the same way (activations
in --dtype, coefficients and parameter gradients in f32/f64), then written to OUT/<name>.npy as
float64 with --dtype f64, else float32. Every input is checked and every output computed before
anything is written: a missing or misshapen input is a one-line error naming the file and the
expected shape, and the exit status is non-zero.

The cpu device is the f64 reference (mhc::reference) on every core (MHC_REFERENCE_THREADS=N limits
it); its results do not depend on the core count.";

/// Arguments of `mhc run`.
#[derive(clap::Args)]
#[command(after_long_help = stage_help())]
pub struct Args {
    /// The stage to run: pre, post, post_pre, head, expand, static, sinkhorn, pre-backward,
    /// post-backward, head-backward, static-backward.
    pub stage: String,
    /// Folder holding the inputs, one <name>.npy per input.
    #[arg(long = "in", value_name = "DIR")]
    pub input: PathBuf,
    /// Folder to write the outputs to (created if needed).
    #[arg(long = "out", value_name = "DIR")]
    pub output: PathBuf,
    /// The device that runs the stage: cpu (the f64 reference); cuda, hip, gcn-sim when built in.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Storage type of the activations: f64, f32 or bf16 [default: f64 on cpu, f32 elsewhere].
    #[arg(long)]
    pub dtype: Option<String>,
    /// v4 (DeepSeek-V4 as shipped) or paper (the mHC paper). The static layer and head ignore it.
    #[arg(long, default_value = "v4")]
    pub formulation: String,
    /// Sinkhorn iterations.
    #[arg(long, default_value_t = 20)]
    pub iters: u32,
    /// Epsilon inside the RMS of the mixing logits.
    #[arg(long, default_value_t = 1e-6)]
    pub eps_norm: f64,
    /// Epsilon of h_pre (v4), of the softmax start (v4) and of every Sinkhorn denominator; head's eps.
    #[arg(long, default_value_t = 1e-6)]
    pub eps_hc: f64,
    /// Epsilon of the RMSNorm of F (gamma_f in pre, gamma in the static layer).
    #[arg(long, default_value_t = 1e-6)]
    pub eps_f: f64,
    /// Number of streams n: required by expand (its input e has none); checked against x otherwise.
    #[arg(long = "n", value_name = "N")]
    pub streams: Option<usize>,
}

/// The long help's list of stages and file names, generated from the signatures themselves.
fn stage_help() -> String {
    let cfg = Config::new(4, 64);
    let mut s = format!("{LONG_ABOUT}\n\nStages and their files (\"?\": optional; C, n, M as above):\n");
    for stage in Stage::ALL {
        let sig = signature(stage, &cfg);
        let list = |ports: &[mhc::runner::Port]| {
            ports
                .iter()
                .map(|p| {
                    let mut dims: Vec<String> = Vec::new();
                    if p.tokens {
                        dims.push("T".into());
                    }
                    dims.extend(
                        p.dims.iter().map(|(sym, v)| if sym.is_empty() { v.to_string() } else { sym.to_string() }),
                    );
                    format!("{}[{}]{}", p.name, dims.join(","), if p.optional { "?" } else { "" })
                })
                .collect::<Vec<_>>()
                .join(" ")
        };
        s.push_str(&format!(
            "  {:<16} in:  {}\n  {:<16} out: {}\n",
            stage.name(),
            list(&sig.inputs),
            "",
            list(&sig.outputs)
        ));
    }
    s.push_str(
        "\nWith gamma_k.npy present, pre/post_pre/pre-backward use the pre-norm weight (pre-backward also\n\
         writes dgamma_k). With gamma_f.npy present, pre and post_pre also write y[T,C] (the RMSNorm\n\
         that begins F), and pre-backward takes dy[T,C] (da becomes optional) and writes dgamma_f.\n\
         Absent optional gradients (dh_pre, dinv_rms) count as zero. sinkhorn takes the residual\n\
         logits Z_res and applies the start and the normalizations of --formulation.\n\n\
         Example: mhc run pre --in inputs/ --out outputs/ --formulation paper --dtype f64\n",
    );
    s
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.npy"))
}

/// Opens a `.npy` input: a regular file whose size is what its header says (nothing else of
/// it is read yet).
fn open_npy(path: &Path) -> Result<npy::NpyFile, String> {
    npy::open(path).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_npy(file: npy::NpyFile, path: &Path) -> Result<Array, String> {
    file.read().map(|(a, _)| a).map_err(|e| format!("{}: {e}", path.display()))
}

/// Infers (n, C) from the shape of the stage's first token input (its header).
fn dims(
    stage: Stage,
    anchor: &str,
    path: &Path,
    shape: &[usize],
    streams: Option<usize>,
) -> Result<(usize, usize), String> {
    let bad = |want: &str| format!("{}: expected shape {want}, got {}", path.display(), shape_text(shape));
    let (n, c) = match stage {
        Stage::Expand => {
            if shape.len() != 2 {
                return Err(bad("[T, C]"));
            }
            let n = streams.ok_or("expand needs --n N (the number of streams to expand e into)")?;
            (n, shape[1])
        }
        Stage::Sinkhorn => {
            if shape.len() != 3 || shape[1] != shape[2] {
                return Err(bad("[T, n, n]"));
            }
            // C is not used by Sinkhorn; 1 keeps the configuration valid.
            (shape[1], 1)
        }
        _ => {
            if shape.len() != 3 {
                return Err(bad("[T, n, C]"));
            }
            (shape[1], shape[2])
        }
    };
    if let Some(s) = streams {
        if s != n {
            return Err(format!("--n {s} disagrees with {anchor}'s shape {} (n = {n})", shape_text(shape)));
        }
    }
    Ok((n, c))
}

/// A library error as one line, naming the file of the tensor it is about.
fn explain(e: &Error, dir: &Path, sig: &Signature) -> String {
    let named = |what: &str| sig.input(what).map(|_| file(dir, what).display().to_string());
    match e {
        Error::Shape { what, expected, got } => match named(what) {
            Some(f) if got == "missing" => format!("{f}: missing (expected shape {expected})"),
            Some(f) => format!("{f}: expected shape {expected}, got {got}"),
            None => e.to_string(),
        },
        Error::NonFinite { tensor, index } => match named(tensor) {
            Some(f) => format!("{f}: holds a non-finite value at flat index {index}"),
            None => e.to_string(),
        },
        _ => e.to_string(),
    }
}

pub fn main(args: Args) -> Result<(), String> {
    let stage: Stage = args.stage.parse().map_err(|_| {
        let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
        format!("unknown stage {:?} (stages: {})", args.stage, names.join(", "))
    })?;
    let runner = devices::runner_for(&args.device)?;
    let dtype: Dtype = match &args.dtype {
        Some(d) => d.parse().map_err(|e: Error| e.to_string())?,
        None if args.device == "cpu" => Dtype::F64,
        None => Dtype::F32,
    };
    let formulation: Formulation = args.formulation.parse().map_err(|e: Error| e.to_string())?;
    let dir = &args.input;
    if !dir.is_dir() {
        return Err(format!("{}: not a folder", dir.display()));
    }

    // The first token input fixes n and C; the configuration then gives every other shape.
    let anchor = match stage {
        Stage::Expand => "e",
        Stage::Sinkhorn => "logits",
        _ => "x",
    };
    let anchor_path = file(dir, anchor);
    if std::fs::symlink_metadata(&anchor_path).is_err() {
        let want = match stage {
            Stage::Expand => "[T, C]",
            Stage::Sinkhorn => "[T, n, n]",
            _ => "[T, n, C]",
        };
        return Err(format!("{}: missing (expected shape {want})", anchor_path.display()));
    }
    // Headers first: the anchor's fixes n, C and T, and every other input's shape is checked
    // against them before any data is read.
    let anchor_file = open_npy(&anchor_path)?;
    let anchor_shape = anchor_file.header().shape.clone();
    let (n, c) = dims(stage, anchor, &anchor_path, &anchor_shape, args.streams)?;
    let t = anchor_shape[0];
    let cfg = Config {
        formulation,
        sinkhorn_iters: args.iters,
        eps_norm: args.eps_norm,
        eps_hc: args.eps_hc,
        eps_f: args.eps_f,
        ..Config::new(n, c)
    };
    let cfg = resolve_config(stage, &cfg, |name| std::fs::symlink_metadata(file(dir, name)).is_ok());
    cfg.validate().map_err(|e| e.to_string())?;
    let sig = signature(stage, &cfg);

    let mut files = Vec::new();
    for p in &sig.inputs {
        let path = file(dir, p.name);
        if p.name == anchor {
            continue;
        } else if std::fs::symlink_metadata(&path).is_ok() {
            let f = open_npy(&path)?;
            let want = p.shape(t);
            if f.header().shape != want {
                let e = Error::shape(
                    p.name,
                    format!("{} = {}", p.pattern(), shape_text(&want)),
                    shape_text(&f.header().shape),
                );
                return Err(explain(&e, dir, &sig));
            }
            files.push((p.name, path, f));
        } else if !p.optional {
            return Err(format!("{}: missing (expected shape {})", path.display(), p.pattern()));
        }
    }
    let mut inputs = Named::new();
    inputs.insert(anchor.to_string(), read_npy(anchor_file, &anchor_path)?);
    for (name, path, f) in files {
        inputs.insert(name.to_string(), read_npy(f, &path)?);
    }
    sig.check(&inputs).map_err(|e| explain(&e, dir, &sig))?;
    check_finite(&sig, &inputs).map_err(|e| explain(&e, dir, &sig))?;
    let outputs = runner.run(stage, &cfg, dtype, &inputs).map_err(|e| explain(&e, dir, &sig))?;
    let out_dtype = if dtype == Dtype::F64 { NpyDtype::F64 } else { NpyDtype::F32 };
    write_all(&args.output, &outputs, out_dtype)?;
    let list: Vec<String> = outputs.iter().map(|(k, a)| format!("{k}{}", shape_text(&a.shape))).collect();
    println!(
        "{stage} on {} ({dtype}, {formulation}): wrote {} to {}",
        runner.name(),
        list.join(" "),
        args.output.display()
    );
    Ok(())
}

/// Writes every output to a temporary file in `dir`, then commits them all or none: every
/// destination must be absent or a regular file; existing ones are first moved aside, the new
/// files renamed into place, and only then are the old ones deleted. If any step fails, what
/// was renamed is put back and every temporary file is removed, so `dir` holds either all the
/// new outputs or exactly what it held before.
pub(crate) fn write_all(dir: &Path, outputs: &Named, dtype: NpyDtype) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let pid = std::process::id();
    let names: Vec<&String> = outputs.keys().collect();
    // Destinations: refuse a folder (or anything but a file or a link) before writing anything.
    for name in &names {
        let dest = file(dir, name);
        if let Ok(meta) = std::fs::symlink_metadata(&dest) {
            let kind = meta.file_type();
            if !(kind.is_file() || kind.is_symlink()) || std::fs::metadata(&dest).is_ok_and(|m| m.is_dir()) {
                return Err(format!("{}: exists and is not a regular file; nothing was written", dest.display()));
            }
        }
    }
    let tmp = |name: &str| dir.join(format!(".{name}.npy.partial-{pid}"));
    let old = |name: &str| dir.join(format!(".{name}.npy.previous-{pid}"));
    let remove = |paths: &[PathBuf]| {
        for p in paths {
            let _ = std::fs::remove_file(p);
        }
    };
    // 1. Every output to its temporary file.
    let mut written = Vec::new();
    for (name, array) in outputs {
        let path = tmp(name);
        let result =
            std::fs::OpenOptions::new().write(true).create_new(true).open(&path).and_then(|mut f| {
                std::io::Write::write_all(&mut f, &npy::write(array, dtype)).and_then(|()| f.sync_all())
            });
        if let Err(e) = result {
            if !matches!(e.kind(), std::io::ErrorKind::AlreadyExists) {
                let _ = std::fs::remove_file(&path);
            }
            remove(&written);
            return Err(format!("{}: {e}; nothing was written", path.display()));
        }
        written.push(path);
    }
    // 2. Existing destinations aside, 3. the new files into place; undo on any failure.
    let mut moved_aside: Vec<&str> = Vec::new();
    let mut placed: Vec<&str> = Vec::new();
    let undo = |moved_aside: &[&str], placed: &[&str]| {
        for name in placed {
            let _ = std::fs::remove_file(file(dir, name));
        }
        for name in moved_aside {
            let _ = std::fs::rename(old(name), file(dir, name));
        }
        remove(&written);
    };
    for name in &names {
        let dest = file(dir, name);
        if std::fs::symlink_metadata(&dest).is_ok() {
            if let Err(e) = std::fs::rename(&dest, old(name)) {
                undo(&moved_aside, &placed);
                return Err(format!("{}: {e}; nothing was written", dest.display()));
            }
            moved_aside.push(name.as_str());
        }
    }
    for name in &names {
        let dest = file(dir, name);
        if let Err(e) = std::fs::rename(tmp(name), &dest) {
            undo(&moved_aside, &placed);
            return Err(format!("{}: {e}; nothing was written", dest.display()));
        }
        placed.push(name.as_str());
    }
    // 4. Committed: the previous files go.
    for name in moved_aside {
        let _ = std::fs::remove_file(old(name));
    }
    Ok(())
}
