//! `mhc inspect [--json]`: every embedded kernel with its resources, as the loader reads them
//! (like `cuobjdump -res-usage`, for both vendors); `mhc inspect --explain --arch A --stage S
//! --tokens T --n N --c C [...]`: what the selector picks for that problem and why (issue 3).
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
    /// The layer applies the pre-norm weight gamma_k (CUDA plan only).
    #[arg(long)]
    pub gamma_k: bool,
    /// The layer applies the F-pre-norm gamma_f (CUDA plan only).
    #[arg(long)]
    pub gamma_f: bool,
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
    let arch = Arch::parse(arch).map_err(|e| e.to_string())?;
    if !["f32", "bf16"].contains(&args.dtype.as_str()) {
        return Err(format!("--dtype {:?} is not f32 or bf16", args.dtype));
    }
    let mut shape = Shape::new(tokens, n, c, &args.dtype);
    if let Some(f) = &args.formulation {
        if !["v4", "paper"].contains(&f.as_str()) {
            return Err(format!("--formulation {f:?} is not v4 or paper"));
        }
        shape = shape.with_formulation(f);
    }
    let budget = Budget { max_registers_per_thread: args.max_registers, max_shared_bytes: args.max_shared };
    let registry = mhc_loader::Registry::embedded().map_err(|e| e.to_string())?;
    let mut selector = mhc_loader::Selector::new(registry);
    for table in mhc_loader::tuning::embedded_tables().map_err(|e| e.to_string())? {
        selector = selector.with_table(&table);
    }
    if let Some(units) = args.units {
        selector = selector.with_units(units);
    }
    let selection = selector.select(arch, stage, &shape, &budget);
    if arch == Arch::Sm90a {
        if let Ok(stage) = stage.parse::<mhc::Stage>() {
            return explain_cuda_plan(args, stage, selection);
        }
    }
    match selection {
        Ok(selection) => {
            print!("{}", selection.explain());
            Ok(())
        }
        Err(no) => Err(no.to_string()),
    }
}

/// sm_90a: what the CUDA plan launches (`mhc::device::cuda::planned_kernels`: the plan's own
/// selection without a device), then the catalogue selector's reasoning. For `post`, `head`,
/// `static` and `expand` the plan follows that selector; the other stages' kernels are chosen by
/// the CUDA kernel table, and the cost model's pick is only advisory there.
fn explain_cuda_plan(
    args: &Args,
    stage: mhc::Stage,
    selection: Result<mhc_loader::Selection<'_>, mhc_loader::NoVariant>,
) -> Result<(), String> {
    use mhc::device::cuda::{planned_kernels, CudaArch, DeviceLimits};
    let (Some(tokens), Some(n), Some(c)) = (args.tokens, args.n, args.c) else {
        return Err("--explain needs --tokens, --n and --c".into());
    };
    let dtype: mhc::Dtype = args.dtype.parse().map_err(|e: mhc::Error| e.to_string())?;
    let mut cfg = mhc::Config::new(n as usize, c as usize);
    if let Some(f) = &args.formulation {
        cfg = cfg.with_formulation(f.parse().map_err(|e: mhc::Error| e.to_string())?);
    }
    cfg.gamma_k = args.gamma_k;
    cfg.gamma_f = args.gamma_f;
    let mut limits = DeviceLimits::flagship(CudaArch::Sm90a);
    if let Some(units) = args.units {
        limits.sm_count = units;
    }
    let tokens = usize::try_from(tokens).map_err(|_| format!("--tokens {tokens} does not fit this host"))?;
    let gammas = match (cfg.gamma_k, cfg.gamma_f) {
        (false, false) => "no gamma",
        (true, false) => "gamma_k",
        (false, true) => "gamma_f",
        (true, true) => "gamma_k + gamma_f",
    };
    println!(
        "the CUDA plan for {stage} at T={tokens} n={n} C={c} {dtype} {} ({gammas}, {} SMs) launches:",
        cfg.formulation, limits.sm_count
    );
    match planned_kernels(&limits, &cfg, dtype, stage, tokens) {
        Ok(kernels) => {
            for k in &kernels {
                println!("  {} ({}; {} bucket): {}", k.entry, k.image, k.stage, k.rule);
            }
        }
        Err(e) => println!("  nothing: {e}"),
    }
    let advisory = !matches!(stage, mhc::Stage::Post | mhc::Stage::Head | mhc::Stage::Static | mhc::Stage::Expand);
    println!();
    if advisory {
        println!("the catalogue's cost model (advisory for {stage} on CUDA: the kernel table above decides):");
    } else {
        println!("the catalogue selector the plan follows for {stage}:");
    }
    match selection {
        Ok(selection) => print!("{}", selection.explain()),
        Err(no) => println!("{no}"),
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
