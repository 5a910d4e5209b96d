"""Client sampling is seeded, sized by fraction, and independent of global RNG state."""

from __future__ import annotations

import random

import numpy as np

from fedloom.runtime.sampling import sample_clients
from fedloom.seeding import derive_seed

CLIENTS = [f"c{i}" for i in range(10)]


def test_fraction_count_and_order():
    s = sample_clients(CLIENTS, 0.25, round=1, seed=0)
    assert len(s) == 3 and s == sorted(s, key=CLIENTS.index)
    assert sample_clients(CLIENTS, 1.0, 1, 0) == CLIENTS
    assert len(sample_clients(CLIENTS, 0.01, 1, 0)) == 1


def test_deterministic_and_varies_by_round():
    random.seed(1)
    np.random.seed(1)
    a = sample_clients(CLIENTS, 0.3, 5, 42)
    random.seed(2)
    np.random.seed(2)
    assert sample_clients(CLIENTS, 0.3, 5, 42) == a
    assert len({tuple(sample_clients(CLIENTS, 0.3, r, 42)) for r in range(1, 20)}) > 1


def test_derive_seed_is_stable():
    assert derive_seed(0, "local", 1, "tech") == derive_seed(0, "local", 1, "tech")
    assert derive_seed(0, "local", 1, "tech") != derive_seed(0, "local", 2, "tech")
    assert 0 <= derive_seed(123, "x") < 2**63
