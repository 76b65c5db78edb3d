//! Runs a fixture kernel (tests/fixtures/*.s): one `buf` argument, a 1 KiB buffer of the floats
//! 0, 1, 2, ... .
#![allow(dead_code)]

use gcn_sim::{launch_with, load_kernel, Launch, Memory, Options, Order, SimError, Trans};

/// Runs `name` from `image` over `grid` workgroups of `block` work-items; returns the outcome
/// and the buffer's bytes.
pub fn run(image: &[u8], name: &str, grid: u32, block: u32, opts: &Options) -> (Result<(), SimError>, Vec<u8>) {
    let k = match load_kernel(image, name) {
        Ok(k) => k,
        Err(e) => return (Err(e), vec![]),
    };
    let mut mem = Memory::new();
    let data: Vec<u8> = (0..256).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let buf = mem.alloc("buf", data);
    let mut ka = buf.to_le_bytes().to_vec();
    ka.resize(16, 0);
    let ka = mem.alloc("kernarg", ka);
    let r = launch_with(&k, Launch { grid: [grid, 1, 1], block: [block, 1, 1] }, ka, &mut mem, opts).map(|_| ());
    (r, mem.bytes(buf).to_vec())
}

pub fn opts(order: Order, xnack: bool) -> Options {
    Options { order, trans: Trans::Exact, xnack }
}

pub fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Every permutation of 0..n (dispatch orders of a small grid).
pub fn permutations(n: u32) -> Vec<Vec<u32>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}
