//! `mhc compare A B`: for every `.npy` file of the reference folder B, the relative error
//! `||a - b|| / ||b||` of A's file of the same name and the largest absolute difference;
//! non-zero exit when one of B's outputs is missing from A, differs in shape, holds a NaN, or
//! exceeds `--tol`. Used to compare devices (cuda, gcn-sim, hip)
//! against the cpu reference on the same inputs.

use mhc::npy;
use std::path::{Path, PathBuf};

/// Arguments of `mhc compare`.
#[derive(clap::Args)]
pub struct Args {
    /// Folder of outputs to check.
    pub a: PathBuf,
    /// Folder of reference outputs.
    pub b: PathBuf,
    /// Largest relative error accepted.
    #[arg(long, default_value_t = 1e-5)]
    pub tol: f64,
}

fn load(path: &Path) -> Result<mhc::runner::Array, String> {
    npy::read_file(path).map(|(a, _)| a).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn main(args: Args) -> Result<(), String> {
    let mut names: Vec<String> = std::fs::read_dir(&args.b)
        .map_err(|e| format!("{}: {e}", args.b.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".npy"))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!("no .npy file in the reference folder {}", args.b.display()));
    }
    let mut bad = Vec::new();
    println!("{:<16} {:>14} {:>14}", "output", "rel error", "max abs diff");
    for name in &names {
        if !args.a.join(name).is_file() {
            println!("{name:<16} missing from {}", args.a.display());
            bad.push(name.clone());
            continue;
        }
        let (a, b) = (load(&args.a.join(name))?, load(&args.b.join(name))?);
        if a.shape != b.shape {
            println!("{name:<16} shape {:?} vs {:?}", a.shape, b.shape);
            bad.push(name.clone());
            continue;
        }
        let (mut num, mut den, mut max) = (0.0f64, 0.0f64, 0.0f64);
        for (x, y) in a.data.iter().zip(&b.data) {
            num += (x - y) * (x - y);
            den += y * y;
            max = if (x - y).is_nan() { f64::INFINITY } else { max.max((x - y).abs()) };
        }
        let rel = if den > 0.0 { (num / den).sqrt() } else { num.sqrt() };
        let ok = rel.is_finite() && rel <= args.tol && a.data.iter().all(|v| v.is_finite());
        println!("{name:<16} {rel:>14.3e} {max:>14.3e}{}", if ok { "" } else { "  FAIL" });
        if !ok {
            bad.push(name.clone());
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} outputs are missing or differ beyond {:e}: {}",
            bad.len(),
            names.len(),
            args.tol,
            bad.join(", ")
        ))
    }
}
