"""Server-side residual decomposition, aggregation and signature refresh (seed 000, §3.3, App. A.2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from torch import Tensor


def least_norm_pieces(residual: Tensor, route: Tensor) -> Tensor:
    """Δ_m = π_m / ‖π‖² · R  (eq. 19), as [M, d]: the minimum-norm solution of Σ_m π_m Δ_m = R (eq. 18)."""
    return (route / route.pow(2).sum()).unsqueeze(1) * residual.unsqueeze(0)


def naive_pieces(residual: Tensor, route: Tensor) -> Tensor:
    """Δ_m = π_m · R: the ablation without least-norm decomposition (reconstructs ‖π‖² R, not R)."""
    return route.unsqueeze(1) * residual.unsqueeze(0)


def aggregate_pieces(pieces: Sequence[Tensor], counts: Sequence[float]) -> Tensor:
    """Δ̄_m = (1/N_k) Σ_i n_i Δ_{i,m}  (eq. 22), as [M, d]."""
    total = float(sum(counts))
    return cast(Tensor, sum(float(n) / total * p for p, n in zip(pieces, counts, strict=True)))


def refresh_accumulator(accumulator: Tensor, update: Tensor, momentum: float) -> Tensor:
    """U_m ← (1 − λ) U_m + λ Δ̄_m  (eq. 9), row-wise for [M, d]."""
    return (1 - momentum) * accumulator + momentum * update


def amplification(route: Tensor) -> Tensor:
    """Per-prototype amplification π_m / ‖π‖² of ‖R‖ (eq. 21); at most √M on the simplex."""
    return route / route.pow(2).sum()
