//! `mhc inspect [--json]`: every embedded kernel with its resources, as the loader reads them
//! (like `cuobjdump -res-usage`, for both vendors); `mhc inspect --explain --arch A --stage S
//! --tokens T --n N --c C [...]`: what the runtime launches for that call and why (the selector's
//! account: every candidate and every rejected row with its reason).
//!
//! Figures: `registers` is REGCOUNT on NVIDIA and the VGPR count (`.vgpr_count`) on AMD;
//! `shared_bytes` is static shared memory / LDS as the vendor tools report it: on NVIDIA the size
//! of `.nv.shared.<k>`, which on sm_90+ includes the 1 KiB prefix the system reserves (exactly
//! cuobjdump's SHARED; `cuFuncGetAttribute(SHARED_SIZE_BYTES)` omits the prefix, checked on an
//! H200, and the selector budgets with that figure); on AMD the LDS bytes of the metadata and
//! descriptor. `local_bytes` is the stack frame / private segment per thread.

use mhc_loader::{Arch, Budget, Shape};
use std::fmt::Write;

/// Arguments of `mhc inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// Print `{"kernels": [...]}` instead of a table.
    #[arg(long, conflicts_with = "explain")]
    pub json: bool,
    /// Explain a selection instead of listing kernels (needs --arch --stage --tokens --n --c).
    #[arg(long, requires_all = ["arch", "stage", "tokens", "n", "c"])]
    pub explain: bool,
    /// Architecture: sm_90a, sm_100a, gfx942 (or a gcnArchName like gfx942:sramecc+:xnack-).
    #[arg(long)]
    pub arch: Option<String>,
    /// Stage name as in asm/catalogue.toml (pre, post, coeffs, ...).
    #[arg(long)]
    pub stage: Option<String>,
    /// Tokens T.
    #[arg(long)]
    pub tokens: Option<u64>,
    /// Streams n.
    #[arg(long)]
    pub n: Option<u32>,
    /// Hidden size C.
    #[arg(long)]
    pub c: Option<u64>,
    /// Activation dtype: f32 or bf16.
    #[arg(long, default_value = "bf16")]
    pub dtype: String,
    /// Formulation: v4 or paper (default: either).
    #[arg(long)]
    pub formulation: Option<String>,
    /// Register budget per thread.
    #[arg(long)]
    pub max_registers: Option<u32>,
    /// Shared-memory budget per block, bytes.
    #[arg(long)]
    pub max_shared: Option<u32>,
    /// SM / CU count of the device (default: the architecture's flagship part).
    #[arg(long)]
    pub units: Option<u32>,
    /// The GPU's name as the driver reports it (`mhc devices`), for tuned entries made for one
    /// GPU (`device` in asm/tuning/README.md); without it they do not apply.
    #[arg(long)]
    pub gpu: Option<String>,
    /// The layer applies the pre-norm weight gamma_k (`pre`, `post_pre`).
    #[arg(long)]
    pub gamma_k: bool,
    /// The layer applies the F-pre-norm gamma_f (`pre`, `post_pre`).
    #[arg(long)]
    pub gamma_f: bool,
    /// Tuned tables to select with: `embedded` (those compiled in), `none` (the cost model
    /// alone) or the path of a table `mhc tune` wrote.
    #[arg(long, default_value = "embedded")]
    pub tuning: String,
}

pub fn main(args: Args) -> Result<(), String> {
    if args.explain {
        return explain(&args);
    }
    let rows = rows()?;
    if args.json {
        print!("{}", json(&rows));
    } else {
        print!("{}", table(&rows));
    }
    Ok(())
}

/// One kernel of one embedded image.
struct Row {
    image: &'static str,
    arch: &'static str,
    stage: Option<String>,
    kernel: mhc_loader::KernelInfo,
}

fn rows() -> Result<Vec<Row>, String> {
    let catalogue =
        mhc_loader::catalogue::parse(mhc_loader::catalogue::EMBEDDED_CATALOGUE).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for img in mhc_loader::embedded::IMAGES {
        let object = mhc_loader::parse(img.bytes).map_err(|e| format!("{}: {e}", img.path))?;
        for k in object.kernels {
            let stage = catalogue.iter().find(|v| v.file == img.path && v.entry == k.name).map(|v| v.stage.clone());
            rows.push(Row { image: img.path, arch: object.arch.name(), stage, kernel: k });
        }
    }
    Ok(rows)
}

fn table(rows: &[Row]) -> String {
    let mut s = format!(
        "{:<30} {:<8} {:<8} {:<28} {:>5} {:>7} {:>6} {:>8} {:>7}   {}\n",
        "IMAGE",
        "ARCH",
        "STAGE",
        "KERNEL",
        "REGS",
        "SHARED",
        "LOCAL",
        "KERNARG",
        "MAXTHR",
        "AMD (VGPR SGPR AGPR PRIVATE)"
    );
    for r in rows {
        let k = &r.kernel;
        let _ = write!(
            s,
            "{:<30} {:<8} {:<8} {:<28} {:>5} {:>7} {:>6} {:>8} {:>7}",
            r.image,
            r.arch,
            r.stage.as_deref().unwrap_or("-"),
            k.name,
            k.registers,
            k.shared_bytes + k.reserved_shared_bytes,
            k.local_bytes,
            k.kernarg_bytes,
            k.max_threads
        );
        if let Some(a) = &k.amd {
            let _ = write!(s, "   {} {} {} {}", a.vgpr, a.sgpr, a.agpr, k.local_bytes);
        }
        s.push('\n');
    }
    s
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `{"kernels": [ {...}, ... ]}` with exactly the documented keys.
fn json(rows: &[Row]) -> String {
    let mut s = String::from("{\"kernels\": [");
    for (i, r) in rows.iter().enumerate() {
        let k = &r.kernel;
        s.push_str(if i == 0 { "\n  " } else { ",\n  " });
        let _ = write!(
            s,
            "{{\"image\": {}, \"arch\": {}, \"stage\": {}, \"kernel\": {}, \"registers\": {}, \"shared_bytes\": {}, \
             \"local_bytes\": {}, \"kernarg_bytes\": {}, \"max_threads\": {}",
            json_str(r.image),
            json_str(r.arch),
            r.stage.as_deref().map(json_str).unwrap_or_else(|| "null".into()),
            json_str(&k.name),
            k.registers,
            k.shared_bytes + k.reserved_shared_bytes,
            k.local_bytes,
            k.kernarg_bytes,
            k.max_threads
        );
        if let Some(a) = &k.amd {
            let _ = write!(
                s,
                ", \"vgpr\": {}, \"sgpr\": {}, \"agpr\": {}, \"private_bytes\": {}",
                a.vgpr, a.sgpr, a.agpr, k.local_bytes
            );
        }
        s.push('}');
    }
    s.push_str("\n]}\n");
    s
}

fn explain(args: &Args) -> Result<(), String> {
    let (Some(arch), Some(stage), Some(tokens), Some(n), Some(c)) =
        (&args.arch, &args.stage, args.tokens, args.n, args.c)
    else {
        return Err("--explain needs --arch, --stage, --tokens, --n and --c".into());
    };
    let arch = Arch::parse(arch).map_err(|e| format!("{e}; the architectures are sm_90a, sm_100a, gfx942"))?;
    let registry = mhc_loader::Registry::embedded().map_err(|e| e.to_string())?;
    let stages: std::collections::BTreeSet<&str> =
        registry.variants().iter().filter(|v| v.arch.runs_on(arch)).map(|v| v.entry.stage.as_str()).collect();
    if !stages.contains(stage.as_str()) {
        let list: Vec<&str> = stages.into_iter().collect();
        return Err(format!("no {arch} kernel computes stage {stage:?}; its stages are {}", list.join(", ")));
    }
    let dtype: mhc::Dtype = args.dtype.parse().map_err(|e: mhc::Error| e.to_string())?;
    if dtype == mhc::Dtype::F64 {
        return Err("--dtype f64: kernels store f32 or bf16".into());
    }
    let mut cfg = mhc::Config::new(n as usize, c as usize);
    if let Some(f) = &args.formulation {
        cfg = cfg.with_formulation(f.parse().map_err(|e: mhc::Error| e.to_string())?);
    }
    cfg.gamma_k = args.gamma_k;
    cfg.gamma_f = args.gamma_f;
    let tokens = usize::try_from(tokens).map_err(|_| format!("--tokens {tokens} does not fit this host"))?;
    if arch == Arch::Sm90a && args.max_registers.is_none() && args.max_shared.is_none() {
        return explain_cuda_plan(args, &cfg, dtype, stage, tokens);
    }
    // Other architectures (and budgets the runtime does not set): the catalogue selector alone.
    let mut shape = Shape::new(tokens as u64, n, c, dtype.name()).with_formulation(&cfg.formulation.to_string());
    if matches!(stage.as_str(), "pre" | "post_pre") {
        if cfg.gamma_k {
            shape = shape.with_option("gamma_k");
        }
        if cfg.gamma_f {
            shape = shape.with_option("gamma_f");
        }
    }
    let budget = Budget { max_registers_per_thread: args.max_registers, max_shared_bytes: args.max_shared };
    let tuning = crate::tune::tuning_arg(&args.tuning)?;
    let units = args.units.unwrap_or_else(|| arch.default_compute_units());
    let selector = mhc::plan::selector(units, args.gpu.as_deref(), &tuning).map_err(|e| e.to_string())?;
    match selector.select(arch, stage, &shape, &budget) {
        Ok(selection) => {
            print!("{}", selection.explain());
            Ok(())
        }
        Err(no) => Err(no.to_string()),
    }
}

/// sm_90a: the kernels the CUDA plan launches for the call (`mhc::device::cuda::planned_kernels`:
/// the plan's own selection, run without a device) and the selector's account of each choice.
/// No kernel for the call is an error (the command fails).
fn explain_cuda_plan(
    args: &Args,
    cfg: &mhc::Config,
    dtype: mhc::Dtype,
    stage: &str,
    tokens: usize,
) -> Result<(), String> {
    use mhc::device::cuda::{planned_kernels, CudaArch, DeviceLimits};
    let mut limits = DeviceLimits::flagship(CudaArch::Sm90a);
    if let Some(units) = args.units {
        limits.sm_count = units;
    }
    let tuning = crate::tune::tuning_arg(&args.tuning)?;
    let kernels =
        planned_kernels(&limits, args.gpu.as_deref(), cfg, dtype, stage, tokens, &tuning).map_err(|e| e.to_string())?;
    let names: Vec<&str> = kernels.iter().map(|k| k.entry.as_str()).collect();
    println!(
        "the CUDA plan for {stage} at T={tokens} n={} C={} {dtype} {} ({} SMs) launches: {}",
        cfg.n,
        cfg.c,
        cfg.formulation,
        limits.sm_count,
        names.join(", then ")
    );
    for k in &kernels {
        println!();
        println!("{} ({}, catalogue row {}):", k.entry, k.image, k.variant);
        print!("{}", k.explain);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_has_exactly_the_documented_keys() {
        let rows = rows().unwrap();
        assert!(!rows.is_empty());
        let text = json(&rows);
        let value: Vec<&str> = text.lines().collect();
        assert!(value[0] == "{\"kernels\": [" && value.last() == Some(&"]}"));
        for (line, r) in value[1..value.len() - 1].iter().zip(&rows) {
            let mut keys = vec![
                "image",
                "arch",
                "stage",
                "kernel",
                "registers",
                "shared_bytes",
                "local_bytes",
                "kernarg_bytes",
                "max_threads",
            ];
            if r.kernel.amd.is_some() {
                keys.extend(["vgpr", "sgpr", "agpr", "private_bytes"]);
            }
            let found: Vec<&str> = line.split("\": ").filter_map(|p| p.rsplit('"').next()).collect();
            assert_eq!(found[..found.len() - 1], keys[..], "{line}");
        }
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
