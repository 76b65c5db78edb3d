//! Prints what the simulator counted for every gfx942 stage at a given shape: wave-level
//! instructions by class and global bytes, per token (an atomic counts as a store and its
//! bytes as written). These are the measured inputs of the MI300X estimates in
//! docs/kernels/gfx942.md.
//!
//!     cargo run --release -p gcn-sim --example counts -- [T] [n] [C]

use gcn_sim::runner::GcnSimRunner;
use mhc::config::{Config, Dtype, Stage};
use mhc::reference::testing::Rng;
use mhc::runner::{random_inputs, Named, StageRunner};

fn inputs(stage: Stage, cfg: &Config, t: usize) -> Named {
    random_inputs(stage, cfg, t, 0.02, &mut Rng::new(1))
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("T n C")).collect();
    let (t, n, c) =
        (args.first().copied().unwrap_or(16), args.get(1).copied().unwrap_or(4), args.get(2).copied().unwrap_or(4096));
    let cfg = Config::new(n, c);
    println!("T={t} n={n} C={c} bf16; per token: wave instructions (VALU, SALU, VMEM load/store, LDS, SMEM, branch) and global bytes");
    for stage in [Stage::Pre, Stage::Post, Stage::PostPre, Stage::Head, Stage::Static, Stage::Expand] {
        let sim = GcnSimRunner::new();
        sim.run(stage, &cfg, Dtype::Bf16, &inputs(stage, &cfg, t)).expect("runs");
        for (kernel, s) in sim.last_stats.borrow().iter() {
            let per = |v: u64| v as f64 / t as f64;
            println!(
                "{:9} {:12} valu {:9.0} salu {:7.0} vmem {:7.0}/{:5.0} lds {:6.0} smem {:4.0} br {:5.0} | read {:10.0} B written {:8.0} B",
                stage.name(),
                kernel,
                per(s.valu),
                per(s.salu),
                per(s.vmem_load),
                per(s.vmem_store),
                per(s.lds),
                per(s.smem),
                per(s.branch),
                per(s.global_bytes_read),
                per(s.global_bytes_written)
            );
        }
    }
}
