"""Numbers several kernel families and the Rust launchers share."""

NS = [1, 2, 4, 8, 16, 32]
DTYPES = ["bf16", "f32"]
ESIZE = {"bf16": 2, "f32": 4}
TMAX = 2147483647  # the largest token count a row serves (u31: grid sizes stay positive i32)


def vchan(n):
    """Channels per thread for per-channel work over all n streams: n*V <= 64 values held
    (post, static, expand and head's phase 2)."""
    return min(8, 64 // n)
