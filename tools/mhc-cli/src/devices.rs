//! Which [`StageRunner`] a `--device` name means. Each device adds one match arm here.

use mhc::runner::{CpuRunner, StageRunner};

/// Every device name `mhc` knows, built in or not.
pub const KNOWN: [&str; 4] = ["cpu", "cuda", "hip", "gcn-sim"];

/// The runner for `device`, or a one-line reason why there is none.
pub fn runner_for(device: &str) -> Result<Box<dyn StageRunner>, String> {
    match device {
        "cpu" => Ok(Box::new(CpuRunner)),
        "gcn-sim" => Ok(Box::new(gcn_sim::runner::GcnSimRunner::new())),
        "cuda" => mhc::device::cuda::CudaRunner::new(0)
            .map(|r| Box::new(r) as Box<dyn StageRunner>)
            .map_err(|e| format!("device \"cuda\": {e}")),
        "hip" => mhc::device::hip::HipRunner::new(0)
            .map(|r| Box::new(r) as Box<dyn StageRunner>)
            .map_err(|e| format!("device \"hip\": {}", mhc::device::hip::HipRunner::explain(&e))),
        d if KNOWN.contains(&d) => Err(format!("device {d:?} is not built into this mhc yet")),
        other => Err(format!("unknown device {other:?} (known: {})", KNOWN.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_built_in_and_others_say_why_not() {
        assert!(runner_for("cpu").unwrap().name().starts_with("cpu"));
        assert!(runner_for("gpu").err().unwrap().contains("unknown device"));
    }
}
