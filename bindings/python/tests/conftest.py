import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def rng():
    """Fresh random inputs every run (the seed is printed on failure; MHC_TEST_SEED=S reruns
    with seed S)."""
    fixed = os.environ.get("MHC_TEST_SEED")
    seed = int(fixed) if fixed else int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def layer_params(rng, n, c, phi_std=0.02, dtype=np.float32):
    m = n * n + 2 * n
    phi = (phi_std * rng.standard_normal((m, n * c))).astype(dtype)
    scale = rng.uniform(0.01, 1.0, 3).astype(dtype)
    base = (0.1 * rng.standard_normal(m)).astype(dtype)
    return phi, scale, base
