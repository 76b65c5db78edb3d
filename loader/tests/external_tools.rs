//! What the loader reads agrees with the vendors' own tools, for every embedded image and
//! fixture: `llvm-readelf-19 --notes` (installed by tools/install-asm-tools.sh, so this runs in
//! CI) for AMD code objects, and `cuobjdump -res-usage` for cubins when it is available
//! (`$MHC_CUOBJDUMP`, or `.tools/cu13/nvidia/cu13/bin/cuobjdump` from
//! `pip install --target .tools/cu13 nvidia-cuda-cuobjdump==13.5.37`). A missing tool skips its
//! half with a printed reason.
//!
//! Mapping: REG = registers; STACK = local_bytes (what cuFuncGetAttribute(LOCAL_SIZE_BYTES)
//! returns); SHARED = shared_bytes + reserved_shared_bytes (1024 on sm_90+ when the kernel has a `.nv.shared` section)
//! (cuobjdump counts the system-reserved KiB, cuFuncGetAttribute(SHARED_SIZE_BYTES) does not:
//! checked on an H200).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Every image: (path relative to the root, bytes).
fn images(ext: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = mhc_loader::embedded::IMAGES
        .iter()
        .filter(|i| i.path.ends_with(ext))
        .map(|i| (i.path.to_string(), i.bytes.to_vec()))
        .collect();
    let fixtures = repo_root().join("loader/tests/fixtures");
    for e in std::fs::read_dir(&fixtures).unwrap() {
        let p = e.unwrap().path();
        if p.to_string_lossy().ends_with(ext) {
            let rel = p.strip_prefix(repo_root()).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
    out.sort();
    out
}

fn run(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn amd_figures_agree_with_llvm_readelf_notes() {
    let readelf = Path::new("llvm-readelf-19");
    if run(readelf, &["--version"]).is_none() {
        eprintln!("SKIP: llvm-readelf-19 not installed (bash tools/install-asm-tools.sh)");
        return;
    }
    let mut checked = 0;
    for (path, bytes) in images(".hsaco") {
        let notes = run(readelf, &["--notes", &repo_root().join(&path).to_string_lossy()]).unwrap();
        // Kernel-level keys sit at indent 4 under `amdhsa.kernels:`; a kernel starts at "  - ".
        let mut kernels: Vec<BTreeMap<String, String>> = Vec::new();
        let mut inside = false;
        for line in notes.lines() {
            if !line.starts_with(' ') {
                inside = line.starts_with("amdhsa.kernels:");
                continue;
            }
            if !inside {
                continue;
            }
            let rest = if let Some(r) = line.strip_prefix("  - ") {
                kernels.push(BTreeMap::new());
                r
            } else if line.len() > 4 && line.starts_with("    ") && line.as_bytes()[4] == b'.' {
                &line[4..]
            } else {
                continue;
            };
            if let (Some(map), Some((k, v))) = (kernels.last_mut(), rest.split_once(':')) {
                map.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        let object = mhc_loader::parse(&bytes).unwrap();
        assert_eq!(kernels.len(), object.kernels.len(), "{path}");
        for m in &kernels {
            let name = &m[".name"];
            let k = object.kernel(name).unwrap_or_else(|| panic!("{path}: no {name}"));
            let a = k.amd.unwrap();
            let num = |key: &str| m.get(key).map(|v| v.parse::<u32>().unwrap()).unwrap_or(0);
            let ours =
                [k.registers, a.vgpr, a.sgpr, a.agpr, k.shared_bytes, k.local_bytes, k.kernarg_bytes, k.max_threads];
            let theirs = [
                num(".vgpr_count"),
                num(".vgpr_count"),
                num(".sgpr_count"),
                num(".agpr_count"),
                num(".group_segment_fixed_size"),
                num(".private_segment_fixed_size"),
                num(".kernarg_segment_size"),
                num(".max_flat_workgroup_size"),
            ];
            assert_eq!(
                ours, theirs,
                "{path} {name}: loader vs llvm-readelf (vgpr, vgpr, sgpr, agpr, lds, private, kernarg, wg)"
            );
            checked += 1;
        }
    }
    eprintln!("{checked} AMD kernels agree with llvm-readelf-19 --notes");
    assert!(checked > 0);
}

#[test]
fn nvidia_figures_agree_with_cuobjdump_res_usage() {
    let tool = std::env::var_os("MHC_CUOBJDUMP")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/cu13/nvidia/cu13/bin/cuobjdump"));
    if run(&tool, &["--version"]).is_none() {
        eprintln!("SKIP: cuobjdump not found at {} (set MHC_CUOBJDUMP)", tool.display());
        return;
    }
    let mut checked = 0;
    for (path, bytes) in images(".cubin") {
        let out = run(&tool, &["-res-usage", &repo_root().join(&path).to_string_lossy()]).unwrap();
        let object = mhc_loader::parse(&bytes).unwrap();
        let mut lines = out.lines();
        let mut seen = 0;
        while let Some(line) = lines.next() {
            let Some(name) = line.trim().strip_prefix("Function ").and_then(|s| s.strip_suffix(':')) else { continue };
            let usage: BTreeMap<&str, u32> = lines
                .next()
                .unwrap()
                .split_whitespace()
                .filter_map(|f| f.split_once(':'))
                .filter_map(|(k, v)| Some((k, v.parse().ok()?)))
                .collect();
            let k = object.kernel(name).unwrap_or_else(|| panic!("{path}: no {name}"));
            assert_eq!(
                (k.registers, k.local_bytes, k.shared_bytes + k.reserved_shared_bytes),
                (usage["REG"], usage["STACK"], usage["SHARED"]),
                "{path} {name}: loader (registers, local, shared) vs cuobjdump {usage:?}"
            );
            seen += 1;
        }
        assert_eq!(seen, object.kernels.len(), "{path}");
        checked += seen;
    }
    eprintln!("{checked} NVIDIA kernels agree with cuobjdump -res-usage");
    assert!(checked > 0);
}
