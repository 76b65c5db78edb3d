//! The tool's safety model end to end: outputs are committed all or none, `.npy` inputs are
//! checked from their header and size before their data is read (and only regular files are
//! read), every size `mhc example` computes is bounded, and out-of-range epsilons are refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh, empty folder under the system temp dir; removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!("mhc-cli-safety-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `mhc args`, killing it after `limit` (a blocked read must fail the test, not hang it).
fn mhc_within(args: &[&str], limit: Duration) -> (bool, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mhc"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (status.success(), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mhc {args:?} still ran after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mhc(args: &[&str]) -> (bool, String) {
    mhc_within(args, Duration::from_secs(60))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap_or_default())
        })
        .collect();
    v.sort();
    v
}

fn example(dir: &Path) {
    let (ok, err) = mhc(&["example", "pre", "--out", s(dir), "--tokens", "3", "--n", "4", "--c", "8"]);
    assert!(ok, "{err}");
}

#[test]
fn an_output_that_cannot_be_written_leaves_every_output_as_it_was() {
    let root = TempDir::new("commit");
    let (inp, out) = (root.path().join("in"), root.path().join("out"));
    example(&inp);
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out)]);
    assert!(ok, "{err}");
    // h_res.npy (the fourth output in name order) becomes a folder.
    std::fs::remove_file(out.join("h_res.npy")).unwrap();
    std::fs::create_dir(out.join("h_res.npy")).unwrap();
    let before = listing(&out);
    // Another run with other results: refused, and nothing in `out` changed or was added.
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out), "--iters", "3", "--eps-hc", "0.01"]);
    assert!(!ok);
    assert!(err.contains("h_res.npy") && err.contains("nothing was written"), "{err}");
    assert_eq!(listing(&out), before, "a.npy, h_post.npy, h_pre.npy must not be replaced");
    // With the folder gone the same run replaces every output at once.
    std::fs::remove_dir(out.join("h_res.npy")).unwrap();
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out), "--iters", "3", "--eps-hc", "0.01"]);
    assert!(ok, "{err}");
    let after = listing(&out);
    let names: Vec<&str> = after.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["a.npy", "h_post.npy", "h_pre.npy", "h_res.npy", "inv_rms.npy"], "no temporaries left");
    assert_ne!(after[0].1, before[0].1, "a.npy was replaced");
}

#[test]
fn npy_inputs_are_checked_from_their_header_before_their_data_is_read() {
    let root = TempDir::new("npy");
    let (inp, out) = (root.path().join("in"), root.path().join("out"));
    example(&inp);
    // A valid x header with a 3 GiB tail (sparse): refused from the file size, at once.
    let x = inp.join("x.npy");
    let good_x = std::fs::read(&x).unwrap();
    std::fs::OpenOptions::new().write(true).open(&x).unwrap().set_len(3 << 30).unwrap();
    let start = Instant::now();
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out)]);
    assert!(!ok && err.contains("x.npy") && err.contains("needs 768"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    std::fs::write(&x, &good_x).unwrap();
    // phi's header says another shape: refused from the header, naming the expected shape.
    let phi = inp.join("phi.npy");
    let good_phi = std::fs::read(&phi).unwrap();
    std::fs::write(&phi, mhc::npy::write(&mhc::runner::Array::new(vec![2], vec![0.0; 2]), mhc::npy::NpyDtype::F64))
        .unwrap();
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out)]);
    assert!(!ok && err.contains("phi.npy: expected shape [M=24, n*C=32] = [24, 32], got [2]"), "{err}");
    // Not regular files: a device that never ends, a FIFO nobody writes, a folder.
    #[cfg(unix)]
    {
        std::fs::remove_file(&phi).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &phi).unwrap();
        let (ok, err) = mhc_within(&["run", "pre", "--in", s(&inp), "--out", s(&out)], Duration::from_secs(20));
        assert!(!ok && err.contains("phi.npy: not a regular file"), "{err}");
        std::fs::remove_file(&phi).unwrap();
        let made = Command::new("mkfifo").arg(&phi).status().map(|st| st.success()).unwrap_or(false);
        if made {
            let (ok, err) = mhc_within(&["run", "pre", "--in", s(&inp), "--out", s(&out)], Duration::from_secs(20));
            assert!(!ok && err.contains("phi.npy: not a regular file"), "{err}");
            std::fs::remove_file(&phi).unwrap();
        }
    }
    std::fs::create_dir(&phi).unwrap();
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out)]);
    assert!(!ok && err.contains("phi.npy: not a regular file"), "{err}");
    std::fs::remove_dir(&phi).unwrap();
    std::fs::write(&phi, good_phi).unwrap();
    let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out)]);
    assert!(ok, "{err}");
}

#[test]
fn example_sizes_are_bounded_with_a_clear_error() {
    let root = TempDir::new("example");
    let out = root.path().join("out");
    // 1e14 tokens overflows the capacity arithmetic, 2^62 would wrap to an empty array under
    // unchecked multiplication (files whose headers claim 2^62 tokens), 1e13 fits usize but no
    // memory.
    for tokens in ["100000000000000", "4611686018427387904", "10000000000000"] {
        let (ok, err) = mhc(&["example", "post", "--out", s(&out), "--tokens", tokens]);
        assert!(!ok, "--tokens {tokens} succeeded");
        assert!(err.starts_with(&format!("mhc: --tokens {tokens}: shape of x")), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists() || std::fs::read_dir(&out).unwrap().next().is_none(), "nothing written");
    }
}

#[test]
fn epsilons_outside_their_range_are_refused_with_the_range() {
    let root = TempDir::new("eps");
    let (inp, out) = (root.path().join("in"), root.path().join("out"));
    example(&inp);
    for (flag, value) in [("--eps-f", "0"), ("--eps-hc", "0"), ("--eps-hc", "1e308"), ("--eps-norm", "1e-30")] {
        let (ok, err) = mhc(&["run", "pre", "--in", s(&inp), "--out", s(&out), flag, value]);
        let field = flag.trim_start_matches("--").replace('-', "_");
        assert!(!ok && err.contains(&field) && err.contains("[1e-20, 1]"), "{flag} {value}: {err}");
        assert!(!out.exists(), "nothing written");
    }
}
