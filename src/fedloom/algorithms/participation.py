"""Who takes part in a round, as numbers: one rule for the runtime's sampling and the DP accountant's q."""

from __future__ import annotations

import math


def participation_rate(fraction: float, clients_per_round: int | None, num_clients: int) -> float:
    """Share of the clients sampled per round: ``clients_per_round / K`` (at most 1) when set, else ``fraction``."""
    if clients_per_round is not None:
        return min(1.0, clients_per_round / num_clients)
    return fraction


def sample_size(rate: float, num_clients: int) -> int:
    """Clients drawn per round at ``rate``: ``rate · K`` rounded half up, at least 1 and at most K."""
    return min(num_clients, max(1, math.floor(rate * num_clients + 0.5)))
