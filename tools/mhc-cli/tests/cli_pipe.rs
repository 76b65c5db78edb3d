//! Output into a pipe whose reader has gone (`mhc inspect | head -1`) ends `mhc` quietly by
//! SIGPIPE, as it does any Unix tool, instead of a panic in `println!`.

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_listing_by_sigpipe_without_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_mhc"))
        .arg("inspect")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mhc");
    // The reader goes before mhc has read its catalogue, so its first write fails with EPIPE.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait for mhc");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "mhc panicked on a closed pipe:\n{stderr}");
    assert_eq!(out.status.signal(), Some(13), "mhc should end by SIGPIPE, got {:?}", out.status);
}
