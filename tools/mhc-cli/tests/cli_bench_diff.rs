//! `mhc bench-diff` on two committed benchmark records of the same kernels on two H100s: the
//! agreement docs/benchmarks/README.md quotes, and clear errors for a missing or foreign file.

use std::path::PathBuf;
use std::process::Command;

fn records() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks/records")
}

fn mhc(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mhc")).args(args).output().expect("run mhc");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn two_runs_of_the_same_kernels_agree_where_the_gpu_bounds_them() {
    let (old, new) = (records().join("2026-11-27-h100-ab.json"), records().join("2026-11-28-h100-a.json"));
    let (ok, out, err) = mhc(&["bench-diff", old.to_str().unwrap(), new.to_str().unwrap()]);
    assert!(ok, "{err}");
    for line in [
        "100 rows in both (0 with another variant, left out of the ranges below); 0 only in old, 0 only in new",
        "back-to-back, gpu-bound: 68 rows, new / old 0.987 .. 1.019, 0 beyond 5%",
        "back-to-back, host-bound (the host's launch rate): 32 rows, new / old 0.710 .. 1.348, 17 beyond 5%",
        "graph replay: 48 rows, new / old 0.979 .. 1.006, 0 beyond 5%",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn unreadable_or_foreign_files_are_errors() {
    let good = records().join("2026-11-28-h100-a.json");
    let (ok, _, err) = mhc(&["bench-diff", "/nonexistent/bench.json", good.to_str().unwrap()]);
    assert!(!ok && err.contains("/nonexistent/bench.json"), "{err}");
    let toml = records().join("2026-11-27-h200-tune-sm_90a.toml");
    let (ok, _, err) = mhc(&["bench-diff", good.to_str().unwrap(), toml.to_str().unwrap()]);
    assert!(!ok && err.contains("not JSON"), "{err}");
    let (ok, _, err) = mhc(&["bench-diff", good.to_str().unwrap(), good.to_str().unwrap(), "--tol-pct=-1"]);
    assert!(!ok && err.contains("--tol-pct"), "{err}");
}
