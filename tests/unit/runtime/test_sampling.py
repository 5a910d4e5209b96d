"""Client sampling is seeded, sized by fraction, and independent of global RNG state."""

from __future__ import annotations

import random

import numpy as np

from fedloom.algorithms.config import LocalTrainingConfig, PrivacyConfig
from fedloom.algorithms.fedavg import DP_RATE, FedAvg
from fedloom.algorithms.participation import participation_rate
from fedloom.runtime.sampling import sample_clients, select_clients
from fedloom.seeding import derive_seed

CLIENTS = [f"c{i}" for i in range(10)]


def test_fraction_count_and_order():
    s = sample_clients(CLIENTS, 0.25, round=1, seed=0)
    assert len(s) == 3 and s == sorted(s, key=CLIENTS.index)
    assert sample_clients(CLIENTS, 1.0, 1, 0) == CLIENTS
    assert len(sample_clients(CLIENTS, 0.01, 1, 0)) == 1


def test_one_participation_rule_for_sampling_and_the_dp_rate():
    """clients_per_round overrides fraction (capped at 1); the runtime samples and FedAvg's accountant reads it."""
    assert participation_rate(0.3, None, 10) == 0.3
    assert participation_rate(0.3, 4, 10) == 0.4 and participation_rate(0.3, 40, 10) == 1.0
    assert len(select_clients(CLIENTS, 0.3, 4, round=1, seed=0)) == 4
    dp = FedAvg(LocalTrainingConfig(), privacy=PrivacyConfig(clip=1.0), participation=(0.3, 4))
    assert dp.init_server({}, CLIENTS).scalars[DP_RATE] == 0.4


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
