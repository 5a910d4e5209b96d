"""Client sampling per round, from an explicit seeded generator."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedloom.algorithms.participation import participation_rate, sample_size
from fedloom.seeding import derive_seed


def sample_clients(clients: Sequence[str], fraction: float, round: int, seed: int) -> list[str]:
    """``max(1, round(fraction · K))`` distinct clients, in their original order, fixed by (seed, round)."""
    k = sample_size(fraction, len(clients))
    if k == len(clients):
        return list(clients)
    rng = np.random.default_rng(derive_seed(seed, "sample", round))
    chosen = set(rng.choice(len(clients), size=k, replace=False).tolist())
    return [c for i, c in enumerate(clients) if i in chosen]


def select_clients(
    clients: Sequence[str], fraction: float, clients_per_round: int | None, round: int, seed: int
) -> list[str]:
    """The round's participants: ``clients_per_round`` of them when set, else a ``fraction``."""
    return sample_clients(clients, participation_rate(fraction, clients_per_round, len(clients)), round, seed)
