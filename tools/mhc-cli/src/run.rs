//! `mhc run <stage> --in DIR --out DIR ...` (issue 2). Work in progress.

/// Arguments of `mhc run`.
#[derive(clap::Args)]
pub struct Args {
    /// The stage to run.
    pub stage: String,
}

pub fn main(_args: Args) -> Result<(), String> {
    Err("not implemented yet".into())
}
