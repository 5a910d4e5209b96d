"""A quorum that no round can meet is refused before round 1."""

from __future__ import annotations

import pytest

from fedloom.runtime.rounds import FederationConfig, quorum_problem


@pytest.mark.parametrize(
    ("federation", "clients", "message"),
    [
        (FederationConfig(min_clients=10), 9, "min_clients=10, but the partition has only 9 clients"),
        (FederationConfig(min_clients=4, fraction=0.5), 6, "each round samples 3 of 6 clients"),
        (FederationConfig(min_clients=3, clients_per_round=2), 6, "each round samples 2 of 6 clients"),
    ],
)
def test_an_unreachable_quorum_is_explained(federation, clients, message):
    assert message in (quorum_problem(federation, clients) or "")


def test_a_reachable_quorum_passes():
    assert quorum_problem(FederationConfig(min_clients=3, fraction=0.5), 6) is None
