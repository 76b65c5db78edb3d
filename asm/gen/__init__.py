"""The generators of the hand-written GPU kernels' PTX (sm_90a, sm_100a).

Run `python3 -m asm.gen` from the repository root: it writes every generated file (the .ptx
sources under asm/ptx, the generated sections of asm/catalogue.toml, the Rust argument layouts
in asm/src/abi/sm90.rs); `--check` writes them to a temporary folder instead and fails, naming
each file, where the committed one differs. See cli.py for the switches.

Layout: ptx.py (the emitter: registers, labels, instructions, the dependent-launch preamble),
blocks.py and sinkhorn.py / resmix.py / rows.py (the blocks several kernels share), abi.py (every
kernel's argument block, defined once: the PTX parameter loads and header lines, the catalogue's
params strings and rust_abi.py's structs come from it), catalogue.py (the generated rows), and
one module per kernel family (coeffs, post, head, static, expand, pre/, pre_decode, pre_pc,
pre_gemm).

Why Python, stdlib only: the kernels are PTX text that Python expands (unrolled register lists,
mma grids, per-stream loops); keeping that code as a package keeps every committed PTX file
byte-identical and checkable file by file, needs nothing beyond python3 to run or check, and
adds no build step or dependency to the Rust crates (a Rust tool crate would be a rewrite of the
expansion logic with the byte-identity to prove again, and a cargo build for every check).
"""
