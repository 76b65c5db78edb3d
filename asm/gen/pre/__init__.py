"""pre.ptx (asm/gen/pre/kernel.py): mhc_pre_sm90_* and mhc_post_pre_sm90_*."""
