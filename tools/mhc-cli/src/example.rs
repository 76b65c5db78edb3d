//! `mhc example <stage> --out DIR --tokens T --n N --c C`: writes seeded random inputs for a
//! stage as `.npy` files (float64), drawn from MATH.md's test distributions, so `mhc run` can be
//! tried (and devices compared with `mhc compare`) without any outside tool.

use mhc::npy::{self, NpyDtype};
use mhc::reference::testing::Rng;
use mhc::runner::{resolve_config, signature, Array};
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
    /// Standard deviation of phi (MATH.md: 0.02; 0.5 pushes the Sinkhorn).
    #[arg(long, default_value_t = 0.02)]
    pub phi_std: f64,
    /// Also write the pre-norm weight gamma_k[n*C] (pre, post_pre, pre-backward).
    #[arg(long)]
    pub gamma_k: bool,
    /// Also write the F-pre-norm weight gamma_f[C] (pre, post_pre, pre-backward).
    #[arg(long)]
    pub gamma_f: bool,
}

/// Values for the input `name` of `len` elements (rows of `row` elements).
fn values(rng: &mut Rng, name: &str, len: usize, row: usize, phi_std: f64) -> Vec<f64> {
    match name {
        "phi" => rng.normals(len, phi_std),
        "scale" => rng.uniforms(len, 0.01, 1.0),
        "base" => rng.normals(len, 0.1),
        "gamma_k" | "gamma_f" | "gamma" => rng.normals(len, 0.1).into_iter().map(|g| 1.0 + g).collect(),
        // Coefficients as `pre` makes them: h_post = 2 sigma(z) in (0, 2); h_res rows of positive
        // entries normalised to sum 1 (close to the doubly stochastic matrices of the Sinkhorn).
        "h_post" => rng.normals(len, 1.0).into_iter().map(|z| 2.0 / (1.0 + (-z).exp())).collect(),
        "h_res" => {
            let mut v = rng.uniforms(len, 0.05, 1.0);
            for r in v.chunks_mut(row.max(1)) {
                let s: f64 = r.iter().sum();
                r.iter_mut().for_each(|e| *e /= s);
            }
            v
        }
        "logits" => rng.normals(len, 0.5),
        _ => rng.normals(len, 1.0),
    }
}

pub fn main(args: Args) -> Result<(), String> {
    let stage: Stage = args.stage.parse().map_err(|e: mhc::Error| e.to_string())?;
    let mut cfg = Config::new(args.n, args.c);
    cfg.gamma_k = args.gamma_k;
    cfg.gamma_f = args.gamma_f;
    cfg.validate().map_err(|e| e.to_string())?;
    let cfg =
        resolve_config(stage, &cfg, |name| (name == "gamma_k" && args.gamma_k) || (name == "gamma_f" && args.gamma_f));
    let sig = signature(stage, &cfg);
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    let mut rng = Rng::new(args.seed);
    for port in sig.inputs.iter().filter(|p| !p.optional) {
        let shape = port.shape(args.tokens);
        let len = shape.iter().product();
        let row = port.dims.last().map(|d| d.1).unwrap_or(1);
        let array = Array::new(shape, values(&mut rng, port.name, len, row, args.phi_std));
        let path = args.out.join(format!("{}.npy", port.name));
        std::fs::write(&path, npy::write(&array, NpyDtype::F64)).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{}  {:?}", path.display(), array.shape);
    }
    Ok(())
}
