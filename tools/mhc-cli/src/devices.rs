//! Which [`StageRunner`] a `--device` name means (each device adds one match arm here), and
//! `mhc devices`: every device present, with its architecture, size, driver and whether this
//! build's kernels serve it.

use mhc::runner::{CpuRunner, StageRunner};

/// Arguments of `mhc devices`.
#[derive(clap::Args)]
pub struct Args {
    /// Exit 0 only if this device (cpu, gcn-sim, cuda, hip) is present and served by this
    /// build's kernels; otherwise print why and exit 1 (for scripts).
    #[arg(long, value_name = "DEVICE")]
    pub check: Option<String>,
}

/// One line per device kind: present devices with their figures, or why there are none.
pub fn main(args: Args) -> Result<(), String> {
    let found = survey();
    if let Some(want) = args.check {
        if !KNOWN.contains(&want.as_str()) {
            return Err(format!("unknown device {want:?} (known: {})", KNOWN.join(", ")));
        }
        let line = found.iter().find(|d| d.kind == want).ok_or_else(|| format!("{want}: not surveyed"))?;
        println!("{}", line.text);
        return if line.served { Ok(()) } else { Err(format!("{want} is not available: {}", line.text)) };
    }
    for d in &found {
        println!("{}", d.text);
    }
    Ok(())
}

/// A device kind and what `mhc devices` says of it.
struct Found {
    kind: &'static str,
    /// Present and served by an embedded variant.
    served: bool,
    text: String,
}

/// Catalogue rows for an architecture (how many embedded variants serve it).
fn rows_for(arch: mhc_loader::Arch) -> usize {
    mhc_loader::Registry::embedded().map_or(0, |r| r.variants().iter().filter(|v| v.arch.runs_on(arch)).count())
}

fn survey() -> Vec<Found> {
    let gib = |b: usize| b as f64 / (1u64 << 30) as f64;
    let mut out = vec![
        Found {
            kind: "cpu",
            served: true,
            text: "cpu: the float64 / float32 reference (every stage, forward and backward)".into(),
        },
        Found {
            kind: "gcn-sim",
            served: true,
            text: format!(
                "gcn-sim: the gfx942 simulator ({} embedded gfx942 variants run on it)",
                rows_for(mhc_loader::Arch::Gfx942(mhc_loader::AmdFeatures::ANY))
            ),
        },
    ];
    match mhc::device::cuda::list_devices() {
        Err(e) => out.push(Found { kind: "cuda", served: false, text: format!("cuda: none ({e})") }),
        Ok(list) if list.is_empty() => {
            out.push(Found { kind: "cuda", served: false, text: "cuda: none (libcuda reports no device)".into() })
        }
        Ok(list) => {
            let mut served = false;
            let mut text = String::new();
            for d in list {
                let (major, minor) = d.compute_capability;
                let kernels = match &d.arch {
                    Ok(a) => {
                        served |= d.ordinal == 0;
                        format!("{} embedded variants for {a}", rows_for(a.loader_arch()))
                    }
                    Err(why) => format!("no kernels: {why}"),
                };
                text.push_str(&format!(
                    "{}cuda:{} {} (compute capability {major}.{minor}, {} SMs, {:.1} GiB, driver {}.{}): {kernels}",
                    if text.is_empty() { "" } else { "\n" },
                    d.ordinal,
                    d.name,
                    d.sm_count,
                    gib(d.memory_bytes),
                    d.driver_version / 1000,
                    d.driver_version % 1000 / 10
                ));
            }
            out.push(Found { kind: "cuda", served, text });
        }
    }
    match mhc::device::hip::device_count() {
        Err(e) => out.push(Found {
            kind: "hip",
            served: false,
            text: format!("hip: none ({})", mhc::device::hip::HipRunner::explain(&e)),
        }),
        Ok(0) => {
            out.push(Found { kind: "hip", served: false, text: "hip: none (libamdhip64 reports no device)".into() })
        }
        Ok(n) => {
            let mut text = String::new();
            let mut served = false;
            for i in 0..n {
                let line = match mhc::device::hip::HipDevice::new(i) {
                    Ok(d) => {
                        served |= i == 0;
                        format!(
                            "hip:{i} {} ({}, {} CUs, runtime {}): {} embedded variants for {}",
                            d.name(),
                            d.gcn_arch_name(),
                            d.cu_count(),
                            d.runtime_version(),
                            rows_for(d.arch()),
                            d.arch()
                        )
                    }
                    Err(e) => format!("hip:{i}: no kernels ({e})"),
                };
                text.push_str(&format!("{}{line}", if text.is_empty() { "" } else { "\n" }));
            }
            out.push(Found { kind: "hip", served, text });
        }
    }
    out
}

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
