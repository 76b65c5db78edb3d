//! `mhc example <stage> --out DIR --tokens T --n N --c C`: writes seeded random inputs for a
//! stage as `.npy` files (float64), drawn from docs/math.md's test distributions, so `mhc run` can be
//! tried (and devices compared with `mhc compare`) without any outside tool.

use mhc::npy::NpyDtype;
use mhc::reference::testing::Rng;
use mhc::runner::{resolve_config, try_random_inputs};
use mhc::{Config, Stage};
use std::path::PathBuf;

/// Arguments of `mhc example`.
#[derive(clap::Args)]
pub struct Args {
    /// The stage whose inputs to write (see `mhc run --help`).
    pub stage: String,
    /// Folder to write the inputs to (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Tokens T.
    #[arg(long, default_value_t = 16)]
    pub tokens: usize,
    /// Streams n (1..=32).
    #[arg(long, default_value_t = 4)]
    pub n: usize,
    /// Hidden size C.
    #[arg(long, default_value_t = 4096)]
    pub c: usize,
    /// Seed of the generator (same seed, same files).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Standard deviation of phi (docs/math.md: 0.02; 0.5 pushes the Sinkhorn).
    #[arg(long, default_value_t = 0.02)]
    pub phi_std: f64,
    /// Also write the pre-norm weight gamma_k[n*C] (pre, post_pre, pre-backward).
    #[arg(long)]
    pub gamma_k: bool,
    /// Also write the F-pre-norm weight gamma_f[C] (pre, post_pre, pre-backward).
    #[arg(long)]
    pub gamma_f: bool,
}

pub fn main(args: Args) -> Result<(), String> {
    let stage: Stage = args.stage.parse().map_err(|e: mhc::Error| e.to_string())?;
    let mut cfg = Config::new(args.n, args.c);
    cfg.gamma_k = args.gamma_k;
    cfg.gamma_f = args.gamma_f;
    cfg.validate().map_err(|e| e.to_string())?;
    let cfg =
        resolve_config(stage, &cfg, |name| (name == "gamma_k" && args.gamma_k) || (name == "gamma_f" && args.gamma_f));
    if !(args.phi_std.is_finite() && args.phi_std >= 0.0) {
        return Err(format!("--phi-std must be finite and >= 0, got {}", args.phi_std));
    }
    // Every size with checked arithmetic: too many tokens is an error naming the array, before
    // anything is drawn or written.
    let mut rng = Rng::new(args.seed);
    let inputs = try_random_inputs(stage, &cfg, args.tokens, args.phi_std, &mut rng)
        .map_err(|e| format!("--tokens {}: {e}", args.tokens))?;
    crate::run::write_all(&args.out, &inputs, NpyDtype::F64)?;
    for (name, array) in &inputs {
        println!("{}  {:?}", args.out.join(format!("{name}.npy")).display(), array.shape);
    }
    Ok(())
}
