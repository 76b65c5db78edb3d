//! `mhc example` writes every required input of a stage; `mhc run` accepts them; `mhc compare`
//! passes identical outputs and fails (non-zero exit, naming the output) on a perturbed one.

use std::path::PathBuf;
use std::process::Command;

fn mhc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mhc")).args(args).output().expect("run mhc")
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mhc-example-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn example_inputs_run_and_compare() {
    let root = temp("roundtrip");
    let (inp, a, b) = (root.join("in"), root.join("a"), root.join("b"));
    let s = |p: &PathBuf| p.to_str().unwrap().to_string();
    for stage in ["pre", "post", "post_pre", "head", "static", "expand", "sinkhorn", "post-backward"] {
        let _ = std::fs::remove_dir_all(&root);
        let o = mhc(&["example", stage, "--out", &s(&inp), "--tokens", "3", "--n", "4", "--c", "16", "--seed", "7"]);
        assert!(o.status.success(), "{stage}: {}", String::from_utf8_lossy(&o.stderr));
        let rin = s(&inp);
        let mut run = vec!["run", stage, "--in", rin.as_str()];
        if stage == "expand" {
            run.extend(["--n", "4"]);
        }
        let (ra, rb) = (s(&a), s(&b));
        for out in [&ra, &rb] {
            let mut args = run.clone();
            args.extend(["--out", out.as_str()]);
            let o = mhc(&args);
            assert!(o.status.success(), "{stage}: {}", String::from_utf8_lossy(&o.stderr));
        }
        let o = mhc(&["compare", &ra, &rb, "--tol", "0"]);
        assert!(o.status.success(), "{stage}: {}", String::from_utf8_lossy(&o.stdout));
    }
    // Perturb one output: compare must fail and name it.
    let path = a.join("dx.npy");
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let o = mhc(&["compare", &s(&a), &s(&b), "--tol", "1e-12"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("dx.npy"));
    // An output of the reference missing from the folder checked fails too, named.
    std::fs::remove_file(&path).unwrap();
    let o = mhc(&["compare", &s(&a), &s(&b), "--tol", "1"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("dx.npy") && String::from_utf8_lossy(&o.stdout).contains("missing")
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn example_same_seed_same_files_and_bad_stage_is_an_error() {
    let (r1, r2) = (temp("seed1"), temp("seed2"));
    for r in [&r1, &r2] {
        let o = mhc(&["example", "post", "--out", r.to_str().unwrap(), "--tokens", "2", "--n", "2", "--c", "8"]);
        assert!(o.status.success());
    }
    for f in ["x.npy", "f.npy", "h_post.npy", "h_res.npy"] {
        assert_eq!(std::fs::read(r1.join(f)).unwrap(), std::fs::read(r2.join(f)).unwrap(), "{f}");
    }
    let o = mhc(&["example", "nope", "--out", r1.to_str().unwrap()]);
    assert!(!o.status.success());
    let o = mhc(&["example", "pre", "--out", r1.to_str().unwrap(), "--n", "33"]);
    assert!(!o.status.success());
    for r in [r1, r2] {
        let _ = std::fs::remove_dir_all(r);
    }
}
