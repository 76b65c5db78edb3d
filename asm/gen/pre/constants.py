"""The numbers of the pre kernel family the runtime shares (asm/src/abi/sm90.rs)."""

TILE_TOKENS = 32  # tokens per CTA tile (two 16-row mma tiles)
CTA_STEP = 256    # j-space elements one CTA step of the K loop covers (8 warps x 32)
# PreArgs.flags bits the kernel reads
FLAG_PAPER, FLAG_GAMMA_K, FLAG_GAMMA_F, FLAG_POST, FLAG_SOLO = 1, 2, 4, 8, 16
# the launch promises no kernel that may still run writes the weights (phi, gamma_k, scale, base):
# the persistent-cluster kernels load them before the grid dependency
FLAG_EARLY_PARAMS = 32
FLAG_POST_BATCH = 64   # post_pre, bf16, n <= 4: the batched producer (producer.pb)
FLAG_PREFETCH = 128    # pre K loop: prefetch x (to L2) and phi (to L1) a few steps ahead (hints)
FLAG_FAST_K = 256      # bf16, n = 4, C % 32 == 0, no gamma_k: the fast K loop (re-checked by the kernel)
FLAG_DBG_NO_MIX = 512  # time attribution only: skip the pre-mix
FLAG_DBG_NO_K = 1024   # time attribution only: skip the K loop (the logits are zeros)
FLAG_GROUPS_SHIFT = 16  # bits 16..23: logit-group slices per K split (0 = 1)
MAX_C = 131072  # the largest C the catalogue offers the pre / post_pre rows
