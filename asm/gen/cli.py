"""python3 -m asm.gen [--check] [--experiment NAME[,NAME]] [--list-experiments]

Without switches: writes every generated file of the repository (paths relative to its root).
--check: writes them to a temporary folder, compares each with the committed file and fails,
  naming every file that differs (with the first lines of the difference) or is missing.
--experiment NAME[,NAME]: a timing build. NAME is FAMILY.EXPERIMENT[=VALUE] (see
  --list-experiments); only the families named are generated, into asm/gen/out/ (ignored by
  git), never over the committed sources. Assemble and time such a file by hand, e.g.
  `ptxas -arch=sm_90a -o pre_pc.cubin asm/gen/out/ptx/sm90/pre_pc.ptx` or by copying it over
  asm/ptx in a scratch checkout before `mhc asm`.
"""

import argparse
import difflib
import os
import sys
import tempfile

from . import catalogue, coeffs, expand, head, post, pre_decode, pre_gemm, pre_lc, pre_pc, rust_abi, static
from .pre import kernel as pre_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOGUE = "asm/catalogue.toml"
OUT = "asm/gen/out"

# family -> (its generate(experiments) function, its experiments: name -> what it does)
FAMILIES = {
    "coeffs": (coeffs.generate, {}),
    "post": (post.generate, {}),
    "head": (head.generate, {}),
    "static": (static.generate, {}),
    "expand": (expand.generate, {}),
    "pre": (pre_kernel.generate, {}),
    "pre_decode": (pre_decode.generate, {
        "stamps": "the decode / mid entries write (%globaltimer, %clock64) at 8 phase boundaries per CTA "
                  "after the partial rows (tests/gpu_pre.rs profile_decode_phases)",
        "mixsplit": "with stamps: the mid entries' last stamp after the h_pre barrier instead of after the mix",
        "nopost": "post_pre entries: no x' computed or stored (the load phase and its second barrier stay)",
        "noxo": "post_pre entries: x' not stored to x_out",
        "nopload": "post_pre entries: f and the coefficients not loaded",
        "nohpre": "mid entries: the mixers take h_pre = 1/4 without polling the token owner's copy (wrong a)",
        "sink1": "one Sinkhorn iteration whatever the arguments say",
    }),
    "pre_lc": (pre_lc.generate, {
        "stamps": "thread 0 of every CTA writes %globaltimer at its phase boundaries, and %clock64 around the "
                  "res role's Sinkhorn, to the workspace (tests/gpu_pre.rs profile_lc_phases)",
        "direct": "the res role's Sinkhorn in direct steps (sinkhorn.unrolled without pairs)",
        "ldgsts": "phi's rows by 16-byte cp.async from every thread instead of bulk copies",
        "xprobe": "with stamps: thread 255, which issues no copy, loads one word of the CTA's x slice "
                  "right after the grid dependency and stamps when it arrives (slots 14, then 13)",
    }),
    "pre_pc": (pre_pc.generate, {
        "nosink": "iters = 0: no Sinkhorn iteration",
        "nomma": "the math warps skip the projection's mma (the Gram matrix of ss stays)",
        "nomix": "the mix stores nothing",
        "nowsum": "TMA entries: no barrier 1 and no warp sums (the pushes carry zeros: wrong sums)",
        "stamps": "the pre entries record (%globaltimer, %clock64) per round and phase in the workspace, "
                  "the pair entry's past its exchange rows (tests/gpu_pre.rs profile_pc_phases)",
        "nophi": "phi's fragments come from a register, not memory",
        "nophibar": "the mix warps do not wait for phi's fragments (PHI_BAR) before stages 1..",
        "opening": "every entry: a CTA barrier on the mbarriers' init, then phi split before the opening "
                   "cluster barrier's wait (the fused entry that fills with post warps and the fused pair "
                   "entry always do)",
        "localfill": "with the opening, every entry's side warps fill stage 0 before that wait (the fused "
                     "entry that fills with post warps always does)",
        "early": "phi's fragments loaded before the grid dependency whatever flags say (FLAG_EARLY_PARAMS)",
        "xlate": "pair entry: the own sums written to the exchange after barrier 2 (not before it)",
        "nowait": "pair entry: the other half's sums read without waiting for their tags (wrong sums)",
        "noxf": "fused entries: no x' computed",
        "noxo": "fused entries: x' not stored to x_out",
        "cwt": "=N: fused entries, the last N tokens (a multiple of 4) of each tile's x' on the coefficient warp",
    }),
    "pre_gemm": (pre_gemm.generate, {
        "noload": "the K loop issues no ring fills after the prologue",
        "nox": "the K loop issues no x copies after the prologue",
        "nophi": "the K loop loads no phi after the prologue (the registers' stale values are split)",
        "nosplit": "phi is loaded but not split into the ring (the tiles keep the prologue's values)",
        "noss": "no sums of squares",
        "pol50": "phi's loads mark half their lines evict_last (not all)",
        "polnormal": "phi's loads with the evict_normal policy (not evict_last)",
        "nocompute": "the K loop skips the mma work",
    }),
}


def parse_experiments(spec):
    """'fam.name[=v],...' -> {family: {name: value}} (value None for a plain switch)."""
    out = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, value = item.partition("=")
        family, _, exp = name.partition(".")
        if family not in FAMILIES or exp not in FAMILIES[family][1]:
            raise SystemExit(f"unknown experiment `{item}` (python3 -m asm.gen --list-experiments)")
        out.setdefault(family, {})[exp] = value or None
    return out


def generate_all():
    """Every generated file: path (relative to the root) -> text."""
    files = {}
    for family, (gen, _) in FAMILIES.items():
        files.update(gen({}))
    files.update(rust_abi.generate())
    with open(os.path.join(ROOT, CATALOGUE)) as f:
        files[CATALOGUE] = catalogue.generate(f.read(), catalogue_sections())
    return files


def catalogue_sections():
    return [
        ("post", "sm_90a post.ptx", [], post.catalogue_rows()),
        ("head", "sm_90a head.ptx", [], head.catalogue_rows()),
        ("static", "sm_90a static.ptx", [], static.catalogue_rows()),
        ("expand", "sm_90a expand.ptx", [], expand.catalogue_rows()),
        ("coeffs_sm90", "sm_90a coeffs_thread.ptx / coeffs_shfl.ptx", [], coeffs.catalogue_rows("sm_90a")),
        ("coeffs_sm100", "sm_100a coeffs_thread.ptx / coeffs_shfl.ptx", [], coeffs.catalogue_rows("sm_100a")),
        ("pre", "sm_90a pre.ptx", [], pre_kernel.catalogue_rows()),
        ("pre_decode", "sm_90a pre_decode.ptx", [], pre_decode.catalogue_rows()),
        ("pre_lc", "sm_90a pre_lc.ptx", [], pre_lc.catalogue_rows()),
        ("pre_pc", "sm_90a pre_pc.ptx", [], pre_pc.catalogue_rows()),
        ("pre_gemm", "sm_90a pre_gemm.ptx", [], pre_gemm.catalogue_rows()),
    ]


def write(root, files):
    for path, text in sorted(files.items()):
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        old = None
        if os.path.exists(full):
            with open(full) as f:
                old = f.read()
        if old != text:
            with open(full, "w") as f:
                f.write(text)
            print(f"wrote {path}")


def check(files):
    """Writes files to a temporary folder and compares each with the committed one."""
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for path, text in sorted(files.items()):
            full = os.path.join(tmp, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
            committed = os.path.join(ROOT, path)
            if not os.path.exists(committed):
                bad.append(path)
                print(f"{path}: missing (the generators write it)", file=sys.stderr)
                continue
            with open(committed) as f:
                old = f.read()
            with open(full) as f:
                new = f.read()
            if old != new:
                bad.append(path)
                diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{path} (committed)",
                                                 f"{path} (generated)", lineterm="", n=1))
                print("\n".join(diff[:24] + (["..."] if len(diff) > 24 else [])), file=sys.stderr)
    if bad:
        print("python3 -m asm.gen --check: these files differ from what the generators write "
              "(run python3 -m asm.gen):\n  " + "\n  ".join(bad), file=sys.stderr)
        raise SystemExit(1)
    print(f"python3 -m asm.gen --check: all {len(files)} generated files are what the generators write")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m asm.gen", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--check", action="store_true", help="compare instead of writing (fails on a difference)")
    ap.add_argument("--experiment", metavar="NAME[,NAME]", help="a timing build into asm/gen/out/")
    ap.add_argument("--list-experiments", action="store_true", help="the experiments and what they change")
    args = ap.parse_args(argv)
    if args.list_experiments:
        for family, (_, exps) in FAMILIES.items():
            for name, what in exps.items():
                print(f"{family}.{name}: {what}")
        return
    if args.experiment:
        if args.check:
            raise SystemExit("--experiment writes a timing build; it has nothing to check")
        files = {}
        for family, exps in parse_experiments(args.experiment).items():
            for path, text in FAMILIES[family][0](exps).items():
                files[os.path.join(OUT, os.path.relpath(path, "asm"))] = text
        write(ROOT, files)
        return
    files = generate_all()
    if args.check:
        check(files)
    else:
        write(ROOT, files)
