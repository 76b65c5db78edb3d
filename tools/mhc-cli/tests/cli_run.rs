//! `mhc run` end to end: random .npy inputs in a temporary folder, the built binary, and the
//! outputs compared with the library's CPU runner; plus every error case (one-line message that
//! names the file, non-zero exit, nothing written).

use mhc::npy::{self, NpyDtype};
use mhc::reference::testing::Rng;
use mhc::runner::{signature, Array, CpuRunner, Named, StageRunner};
use mhc::{Config, Dtype, Formulation, Stage};
use std::path::{Path, PathBuf};
use std::process::Command;

fn rng(test: &str) -> Rng {
    Rng::new(Rng::test_seed(test))
}

/// A fresh, empty folder under the system temp dir; removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "mhc-cli-test-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .map(|d| d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Random inputs for every input of the signature (optional ones only when `with` names them).
fn random_inputs(rng: &mut Rng, stage: Stage, cfg: &Config, t: usize, with: &[&str]) -> Named {
    let sig = signature(stage, cfg);
    let mut named = Named::new();
    for p in &sig.inputs {
        if p.optional && !with.contains(&p.name) {
            continue;
        }
        let shape = p.shape(t);
        let len = shape.iter().product();
        let data = match p.name {
            "phi" => rng.normals(len, 0.1),
            "scale" => rng.uniforms(len, 0.01, 1.0),
            "h_post" | "h_res" | "gamma" | "gamma_k" | "gamma_f" => rng.uniforms(len, 0.2, 1.5),
            _ => rng.normals(len, 1.0),
        };
        named.insert(p.name.to_string(), Array::new(shape, data));
    }
    named
}

fn write_inputs(dir: &Path, named: &Named, dtype: NpyDtype) {
    for (name, a) in named {
        std::fs::write(dir.join(format!("{name}.npy")), npy::write(a, dtype)).unwrap();
    }
}

fn mhc(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mhc")).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_stage(stage: Stage, input: &Path, output: &Path, extra: &[&str]) -> (bool, String, String) {
    let mut args = vec!["run", stage.name(), "--in", input.to_str().unwrap(), "--out", output.to_str().unwrap()];
    args.extend_from_slice(extra);
    mhc(&args)
}

fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let num = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt();
    let den = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    if num.is_nan() {
        f64::INFINITY
    } else {
        num / den.max(f64::MIN_POSITIVE)
    }
}

#[test]
fn every_stage_matches_the_library_in_f64() {
    let mut rng = rng("every_stage_matches_the_library_in_f64");
    let (n, c, t) = (4, 9, 5);
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        for stage in Stage::ALL {
            let with: &[&[&str]] = match stage {
                Stage::Pre | Stage::PostPre => &[&[], &["gamma_k", "gamma_f"]],
                Stage::PreBackward => &[&["dh_pre", "dinv_rms"], &["gamma_k", "gamma_f", "dy", "da"]],
                _ => &[&[]],
            };
            for &w in with {
                let mut cfg = Config::new(n, c).with_formulation(formulation);
                cfg.gamma_k = w.contains(&"gamma_k");
                cfg.gamma_f = w.contains(&"gamma_f");
                if stage == Stage::Sinkhorn {
                    cfg.c = 1;
                }
                let inputs = random_inputs(&mut rng, stage, &cfg, t, w);
                let (din, dout) = (TempDir::new("in"), TempDir::new("out"));
                write_inputs(din.path(), &inputs, NpyDtype::F64);
                let fname = formulation.to_string();
                let mut extra =
                    vec!["--formulation", fname.as_str(), "--dtype", "f64", "--iters", "7", "--eps-hc", "1e-3"];
                let n_text = n.to_string();
                if stage == Stage::Expand {
                    extra.extend(["--n", n_text.as_str()]);
                }
                let (ok, stdout, stderr) = run_stage(stage, din.path(), dout.path(), &extra);
                assert!(ok, "{stage} {formulation} {w:?}: {stderr}");
                assert!(stdout.contains(stage.name()), "{stdout}");
                let cfg = Config { sinkhorn_iters: 7, eps_hc: 1e-3, ..cfg };
                let want = CpuRunner.run(stage, &cfg, Dtype::F64, &inputs).unwrap();
                let mut names: Vec<String> = want.keys().map(|k| format!("{k}.npy")).collect();
                names.sort();
                assert_eq!(dout.files(), names, "{stage}: exactly the outputs, no leftovers");
                for (name, w_arr) in &want {
                    let (got, dt) =
                        npy::read(&std::fs::read(dout.path().join(format!("{name}.npy"))).unwrap()).unwrap();
                    assert_eq!(dt, NpyDtype::F64);
                    assert_eq!(got.shape, w_arr.shape, "{stage} {name}");
                    let e = rel_err(&got.data, &w_arr.data);
                    assert!(e <= 1e-12, "{stage} {formulation} {name}: relative error {e:e}");
                    assert!(got.data.iter().all(|v| v.is_finite()), "{stage} {name}: unwritten or non-finite values");
                }
            }
        }
    }
}

#[test]
fn f32_and_bf16_runs_write_float32_files_close_to_f64() {
    let mut rng = rng("f32_and_bf16_runs_write_float32_files_close_to_f64");
    let cfg = Config::new(4, 16);
    let inputs = random_inputs(&mut rng, Stage::Pre, &cfg, 3, &[]);
    let din = TempDir::new("in");
    write_inputs(din.path(), &inputs, NpyDtype::F32);
    let want = CpuRunner.run(Stage::Pre, &cfg, Dtype::F64, &inputs).unwrap();
    for (dtype, tol) in [("f32", 1e-6), ("bf16", 1e-2)] {
        let dout = TempDir::new("out");
        let (ok, _, stderr) = run_stage(Stage::Pre, din.path(), dout.path(), &["--dtype", dtype]);
        assert!(ok, "{stderr}");
        for (name, w) in &want {
            let (got, dt) = npy::read(&std::fs::read(dout.path().join(format!("{name}.npy"))).unwrap()).unwrap();
            assert_eq!(dt, NpyDtype::F32, "{name}");
            let e = rel_err(&got.data, &w.data);
            assert!(e <= tol, "{dtype} {name}: relative error {e:e}");
        }
    }
}

/// Runs a failing case: non-zero exit, one line on stderr containing every `needles`, nothing
/// in the output folder.
fn fails(stage: Stage, din: &Path, extra: &[&str], needles: &[&str]) {
    let dout = TempDir::new("out");
    let (ok, _, stderr) = run_stage(stage, din, dout.path(), extra);
    assert!(!ok, "{stage} should fail");
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{stderr:?} should contain {n:?}");
    }
    assert!(dout.files().is_empty(), "nothing written: {:?}", dout.files());
}

#[test]
fn bad_inputs_are_one_line_errors_and_write_nothing() {
    let mut rng = rng("bad_inputs_are_one_line_errors_and_write_nothing");
    let cfg = Config::new(4, 8);
    let good = random_inputs(&mut rng, Stage::Pre, &cfg, 3, &[]);

    // A missing parameter: the file and its expected shape.
    let mut named = good.clone();
    named.remove("base");
    let din = TempDir::new("in");
    write_inputs(din.path(), &named, NpyDtype::F64);
    fails(Stage::Pre, din.path(), &[], &["base.npy", "missing", "[M=24]"]);

    // A misshapen one.
    let mut named = good.clone();
    named.insert("phi".into(), Array::new(vec![24, 31], vec![0.01; 24 * 31]));
    let din = TempDir::new("in");
    write_inputs(din.path(), &named, NpyDtype::F64);
    fails(Stage::Pre, din.path(), &[], &["phi.npy", "[M=24, n*C=32]", "[24, 31]"]);

    // A token count that disagrees with x.
    let mut named = random_inputs(&mut rng, Stage::Post, &cfg, 3, &[]);
    named.insert("f".into(), Array::new(vec![2, 8], vec![1.0; 16]));
    let din = TempDir::new("in");
    write_inputs(din.path(), &named, NpyDtype::F32);
    fails(Stage::Post, din.path(), &[], &["f.npy", "[3, 8]", "[2, 8]"]);

    // x of the wrong rank; missing x.
    let mut named = good.clone();
    named.insert("x".into(), Array::new(vec![3, 32], vec![1.0; 96]));
    let din = TempDir::new("in");
    write_inputs(din.path(), &named, NpyDtype::F64);
    fails(Stage::Pre, din.path(), &[], &["x.npy", "[T, n, C]", "[3, 32]"]);
    let empty = TempDir::new("in");
    fails(Stage::Head, empty.path(), &[], &["x.npy", "missing"]);

    // NaN in a parameter.
    let mut named = good.clone();
    named.get_mut("scale").unwrap().data[1] = f64::NAN;
    let din = TempDir::new("in");
    write_inputs(din.path(), &named, NpyDtype::F64);
    fails(Stage::Pre, din.path(), &[], &["scale.npy", "non-finite", "index 1"]);

    // n out of range (from x's shape), bad options, unknown stage and device.
    let din = TempDir::new("in");
    write_inputs(din.path(), &random_inputs(&mut rng, Stage::Post, &Config::new(33, 2), 1, &[]), NpyDtype::F32);
    fails(Stage::Post, din.path(), &[], &["n", "1..=32"]);
    let din = TempDir::new("in");
    write_inputs(din.path(), &good, NpyDtype::F64);
    fails(Stage::Pre, din.path(), &["--iters", "0"], &["sinkhorn_iters"]);
    fails(Stage::Pre, din.path(), &["--formulation", "v5"], &["v5"]);
    fails(Stage::Pre, din.path(), &["--dtype", "f16"], &["f16"]);
    fails(Stage::Pre, din.path(), &["--device", "tpu"], &["unknown device"]);
    fails(Stage::Pre, din.path(), &["--n", "2"], &["--n 2"]);
    let e = TempDir::new("in");
    write_inputs(e.path(), &random_inputs(&mut rng, Stage::Expand, &cfg, 2, &[]), NpyDtype::F32);
    fails(Stage::Expand, e.path(), &[], &["--n"]);
    let dout = TempDir::new("out");
    let (ok, _, stderr) =
        mhc(&["run", "prefill", "--in", din.path().to_str().unwrap(), "--out", dout.path().to_str().unwrap()]);
    assert!(!ok && stderr.contains("unknown stage") && stderr.contains("post_pre"), "{stderr}");
}

#[test]
fn unreadable_npy_files_are_refused_with_the_reason() {
    let mut rng = rng("unreadable_npy_files_are_refused_with_the_reason");
    let cfg = Config::new(2, 4);
    let din = TempDir::new("in");
    write_inputs(din.path(), &random_inputs(&mut rng, Stage::Post, &cfg, 2, &[]), NpyDtype::F64);
    let f = din.path().join("f.npy");
    let good = std::fs::read(&f).unwrap();
    // Same-length edits of the header, so only the one property changes.
    let edit = |from: &[u8], to: &[u8]| {
        let mut b = good.clone();
        let at = b.windows(from.len()).position(|w| w == from).unwrap();
        b[at..at + from.len()].copy_from_slice(to);
        b
    };
    std::fs::write(&f, edit(b"False", b"True ")).unwrap();
    fails(Stage::Post, din.path(), &[], &["f.npy", "Fortran"]);
    std::fs::write(&f, edit(b"<f8", b"<i8")).unwrap();
    fails(Stage::Post, din.path(), &[], &["f.npy", "<i8"]);
    std::fs::write(&f, &good[..good.len() - 3]).unwrap();
    fails(Stage::Post, din.path(), &[], &["f.npy", "bytes"]);
}

#[test]
fn help_documents_stages_files_and_options() {
    let (ok, stdout, _) = mhc(&["run", "--help"]);
    assert!(ok);
    for needle in [
        "--in",
        "--out",
        "--device",
        "--dtype",
        "--formulation",
        "--iters",
        "--eps-norm",
        "--eps-hc",
        "--eps-f",
        "--n",
        "pre-backward",
        "static-backward",
        "h_res_logits",
        "gamma_f",
        "dinv_rms",
        "logits[T,n,n]",
    ] {
        assert!(stdout.contains(needle), "mhc run --help lacks {needle}");
    }
    let (ok, stdout, _) = mhc(&["--help"]);
    assert!(ok && stdout.contains("run"), "{stdout}");
}
