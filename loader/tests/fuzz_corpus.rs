//! The short fuzz pass every test run makes: the committed corpus of the `parse` fuzz target
//! (`loader/fuzz/corpus/parse`, inputs the coverage-guided fuzzer kept because each reached new
//! code), replayed through what the target runs, then a few thousand seeded mutations of it
//! (bit flips, boundary integers, cuts, duplicated and spliced ranges). Each input must parse
//! or fail with `Err`: never a panic, and quickly.

use mhc_loader::{parse, render};
use std::path::Path;
use std::time::{Duration, Instant};

fn corpus() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse");
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap())
        })
        .collect();
    files.sort();
    files
}

/// What the fuzz target runs on one input.
fn target(data: &[u8]) {
    if let Ok(object) = parse(data) {
        let _ = render(&object);
        for k in object.kernels.iter().take(4) {
            let _ = mhc_loader::catalogue::measure(data, &k.name);
        }
    }
}

/// Runs the target on `data`; a panic or a slow input fails with its name.
fn check(name: &str, data: &[u8]) {
    let start = Instant::now();
    if std::panic::catch_unwind(|| target(data)).is_err() {
        let path = std::env::temp_dir().join(format!("mhc-fuzz-failure-{}", name.replace('/', "_")));
        let _ = std::fs::write(&path, data);
        panic!("{name}: the parser panicked (input saved to {})", path.display());
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(2), "{name}: {took:?} for {} bytes", data.len());
}

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// One libFuzzer-style mutation of `m` (`other` is a second corpus input, for splices).
fn mutate(rng: &mut Rng, m: &mut Vec<u8>, other: &[u8]) {
    if m.is_empty() {
        m.push(rng.next() as u8);
        return;
    }
    let at = rng.below(m.len());
    match rng.below(8) {
        0 => m[at] ^= 1 << rng.below(8),
        1 => m[at] = rng.next() as u8,
        2 => {
            // A boundary integer, 1, 2, 4 or 8 bytes wide.
            let values: [u64; 8] = [0, 1, 0x7f, 0xff, 0xffff, 0xffff_ffff, 0x8000_0000, u64::MAX];
            let bytes = values[rng.below(values.len())].to_le_bytes();
            let width = [1, 2, 4, 8][rng.below(4)];
            let end = (at + width).min(m.len());
            m[at..end].copy_from_slice(&bytes[..end - at]);
        }
        3 => m.truncate(at),
        4 => {
            let len = rng.below(64).min(m.len() - at);
            m.drain(at..at + len);
        }
        5 => {
            let len = rng.below(256).min(m.len() - at);
            let copy = m[at..at + len].to_vec();
            let to = rng.below(m.len());
            m.splice(to..to, copy);
        }
        6 if !other.is_empty() => {
            let from = rng.below(other.len());
            let len = rng.below(512).min(other.len() - from).min(m.len() - at);
            m[at..at + len].copy_from_slice(&other[from..from + len]);
        }
        _ => m[at] = m[at].wrapping_add(1),
    }
}

#[test]
fn the_committed_corpus_and_its_mutations_never_panic() {
    let start = Instant::now();
    let corpus = corpus();
    assert!(corpus.len() >= 10, "the corpus has {} inputs", corpus.len());
    let bytes: usize = corpus.iter().map(|(_, d)| d.len()).sum();
    assert!(bytes < 512 * 1024, "keep the committed corpus small: {bytes} bytes");
    for (name, data) in &corpus {
        check(name, data);
    }
    let mut rng = Rng(0x6675_7a7a_5f70_6173);
    let rounds = 10_000;
    for round in 0..rounds {
        let (name, data) = &corpus[rng.below(corpus.len())];
        let other = &corpus[rng.below(corpus.len())].1;
        let mut m = data.clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut rng, &mut m, other);
        }
        check(&format!("{name} mutation {round}"), &m);
    }
    eprintln!("{} corpus inputs and {rounds} mutations in {:?}", corpus.len(), start.elapsed());
}
