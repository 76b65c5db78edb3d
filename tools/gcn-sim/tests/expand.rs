//! `expand` (gfx942 `mhc_expand`) on the simulator: a copy, so the outputs must equal the f64
//! reference bit for bit, at every n (the kernel loops over the streams at run time), C not a
//! multiple of the 256-channel tile, and strided rows whose padding must stay untouched.

mod common;
use gcn_sim::runner::GcnSimRunner;
use gcn_sim::{Launch, Memory};
use mhc::config::{Config, Dtype, Stage};
use mhc::device::hip::recipe::{self, ArgLayout, KernargBlock, KernelArgs, Rows, Step, BLOCK};
use mhc::reference::testing::Rng;
use mhc::runner::{random_inputs, CpuRunner, StageRunner};

#[test]
fn expand_equals_the_reference_bit_for_bit() {
    let seed = common::seed();
    let mut rng = Rng::new(seed);
    for (n, c, t) in [(1, 1, 1), (3, 7, 5), (4, 256, 2), (4, 300, 3), (5, 513, 2), (32, 64, 2), (17, 40, 1)] {
        for dtype in [Dtype::F32, Dtype::Bf16] {
            let cfg = Config::new(n, c);
            let ins = random_inputs(Stage::Expand, &cfg, t, 0.02, &mut rng);
            let got = GcnSimRunner::new()
                .run(Stage::Expand, &cfg, dtype, &ins)
                .unwrap_or_else(|e| panic!("expand n={n} C={c} T={t} {dtype}: {e}"));
            let want = CpuRunner.run(Stage::Expand, &cfg, dtype, &ins).expect("reference");
            assert_eq!(got["x"].shape, want["x"].shape);
            let same = got["x"].data.iter().zip(&want["x"].data).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "expand n={n} C={c} T={t} {dtype} (seed {seed}): outputs differ from the reference");
        }
    }
}

/// `e` and `out` with row strides past their rows (the recipe's own launch, on simulated
/// memory): every element of a row lands in each stream, and no padding element is written.
#[test]
fn expand_with_strided_rows_writes_only_its_rows() {
    let (n, c, t) = (3usize, 300usize, 4usize);
    let (es, os) = (c + 5, n * c + 9);
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let size = dtype.size();
        let mut mem = Memory::new();
        let e_bytes: Vec<u8> = (0..t * es * size).map(|i| (i * 7 + 3) as u8).collect();
        let e = mem.alloc("e", e_bytes.clone());
        let poison = 0xa5u8;
        let out = mem.alloc("out", vec![poison; t * os * size]);
        let steps = recipe::expand_steps(
            &Config::new(n, c),
            dtype,
            t,
            Rows { ptr: e, stride: es },
            Rows { ptr: out, stride: os },
        )
        .unwrap();
        let [Step::Expand { grid, args }] = steps.as_slice() else { panic!("{steps:?}") };
        let (image, info) = <recipe::ExpandArgs as KernelArgs>::KERNEL.info().unwrap();
        let mut block = KernargBlock::default();
        ArgLayout::of::<recipe::ExpandArgs>(&info).unwrap().write(args, &mut block).unwrap();
        let kernel = gcn_sim::load_kernel(image, "mhc_expand").unwrap();
        let ka = mem.alloc("kernarg", block.as_bytes().to_vec());
        gcn_sim::launch(&kernel, Launch { grid: *grid, block: [BLOCK, 1, 1] }, ka, &mut mem).unwrap();
        let got = mem.bytes(out);
        for tt in 0..t {
            for j in 0..os {
                let at = (tt * os + j) * size;
                let want: Vec<u8> = if j < n * c {
                    let from = (tt * es + j % c) * size;
                    e_bytes[from..from + size].to_vec()
                } else {
                    vec![poison; size]
                };
                assert_eq!(&got[at..at + size], &want[..], "{dtype} token {tt} element {j}");
            }
        }
    }
}
