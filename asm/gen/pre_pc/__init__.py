"""`pre` for many tokens on persistent clusters, sm_90a: asm/ptx/sm90/pre_pc.ptx and pre_pc_pair.ptx.

The kernel is written by hand here as PTX text; Python only spells out the unrolled blocks
(phi fragments per run, the mma grid, the per-source sums) that PTX, having no macros and no
register indexing, would otherwise repeat line by line. The Sinkhorn and h_post bodies are the
decode kernel's (pre_decode). header.py holds the design documents at the top of the two files.
Deterministic output (no dates, no paths).

The parts, each a module: constants (geometry, limits, entry names, the ring's size formulas),
prologue (register declarations, row layouts, the pair split, the prefetches), fills (the ring's
copies), rounds (the math warps' loop), sums (fixed-order gathers), mix (the pre-mix), post (the
fused entries' x'), coef (the coefficient warps and the pair exchange), stamps (the timing
experiment), entry (an entry assembled; the files), rows (the catalogue rows).
"""

from .constants import *  # noqa: F401,F403  (the geometry other generators read: rust_abi)
from .entry import generate  # noqa: F401
from .rows import catalogue_rows  # noqa: F401
from .stamps import STAMP_ROUNDS  # noqa: F401
