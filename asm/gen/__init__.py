"""The generators of the hand-written GPU kernels' PTX (sm_90a, sm_100a).

Run `python3 -m asm.gen` from the repository root: it writes every generated file (the .ptx
sources under asm/ptx, the generated sections of asm/catalogue.toml, the Rust argument layouts
in asm/src/abi/sm90.rs); `--check` writes them to a temporary folder instead and fails, naming
each file, where the committed one differs. See cli.py for the switches.
"""
