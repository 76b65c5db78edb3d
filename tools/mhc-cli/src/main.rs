//! The `mhc` command: the tool users and scripts drive.
//!
//! Each subcommand lives in its own module with its own `Args`; this file only dispatches.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod asm;
mod bench;
mod bench_diff;
mod compare;
mod devices;
mod example;
mod inspect;
mod run;
mod tune;

/// mHC runtime tools: run stages on .npy files, assemble and inspect kernels, benchmark.
#[derive(Parser)]
#[command(name = "mhc", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one stage on the .npy files of a folder and write its outputs as .npy files.
    Run(run::Args),
    /// Assemble asm/ sources into asm/bin with the pinned tools and regenerate the embedded table.
    Asm(asm::Args),
    /// List every embedded kernel with its resources, or explain a variant selection.
    Inspect(inspect::Args),
    /// Time every stage x shape x selected variant on a GPU against the measured copy bandwidth.
    Bench(bench::Args),
    /// Compare two benchmark records row by row: each column's ratio, and what bounds it.
    BenchDiff(bench_diff::Args),
    /// Write seeded random inputs of a stage as .npy files (docs/math.md's test distributions).
    Example(example::Args),
    /// Compare the .npy outputs of two folders (relative error per output).
    Compare(compare::Args),
    /// List the devices present (cpu, gcn-sim, CUDA and HIP GPUs) and whether this build serves them.
    Devices(devices::Args),
    /// Measure every kernel that can serve each tuning key on this GPU and write the tuned table.
    Tune(tune::Args),
}

/// Restores the default action of SIGPIPE, which the Rust runtime ignores: output piped into a
/// reader that stops early (`mhc inspect | head`) then ends the process quietly, as every Unix
/// tool does, instead of a panic in `println!`.
#[cfg(unix)]
fn default_sigpipe() {
    extern "C" {
        fn signal(signum: i32, handler: usize) -> usize;
    }
    const SIGPIPE: i32 = 13; // the same number on Linux and macOS
    const SIG_DFL: usize = 0;
    // SAFETY: signal(2) with SIG_DFL installs no Rust code as a handler; it runs before any
    // thread is started.
    unsafe {
        signal(SIGPIPE, SIG_DFL);
    }
}

fn main() -> ExitCode {
    #[cfg(unix)]
    default_sigpipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Asm(args) => asm::main(args),
        Command::Inspect(args) => inspect::main(args),
        Command::Bench(args) => bench::main(args),
        Command::BenchDiff(args) => bench_diff::main(args),
        Command::Example(args) => example::main(args),
        Command::Compare(args) => compare::main(args),
        Command::Devices(args) => devices::main(args),
        Command::Tune(args) => tune::main(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("mhc: {message}");
            ExitCode::FAILURE
        }
    }
}
