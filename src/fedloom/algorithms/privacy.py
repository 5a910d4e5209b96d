"""Differentially private uploads for the FedAvg family: clip each client's update, add Gaussian noise.

Each sampled client clips its update Δ = θ_k − θ (all shared tensors as one vector) to L2 norm ≤ C
and uploads θ + Δ̃ with Δ̃ = clip(Δ) + N(0, (σ·C)²·I): a Gaussian mechanism of sensitivity C per
client per round, run before anything leaves the client (the server, SecAgg or not, sees only noisy
updates). Client-level (ε, δ) over the rounds, with Poisson-style participation rate q, comes from
opacus' RDP accountant, not from our own arithmetic. The sample count travels unprotected.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from fedloom.algorithms.robust import clip_update


def privatize(
    update: Mapping[str, Tensor], clip: float, noise_multiplier: float, generator: torch.Generator
) -> dict[str, Tensor]:
    """clip(Δ) + N(0, (σ·C)²) per coordinate — the client's released update."""
    clipped = clip_update(update, clip)
    std = noise_multiplier * clip
    return {k: v + std * torch.randn(v.shape, generator=generator, dtype=v.dtype) for k, v in clipped.items()}


def epsilon(noise_multiplier: float, sample_rate: float, rounds: int, delta: float) -> float:
    """Client-level ε after ``rounds`` subsampled Gaussian releases (opacus RDP accountant)."""
    from opacus.accountants import RDPAccountant

    if rounds == 0:
        return 0.0
    if noise_multiplier == 0:
        return float("inf")
    accountant = RDPAccountant()
    accountant.history = [(noise_multiplier, sample_rate, rounds)]
    return float(accountant.get_epsilon(delta))
