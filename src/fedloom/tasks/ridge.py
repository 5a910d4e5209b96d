"""Closed-form ridge regression: the head a linear model would fit on the same inputs.

A client's head starts at the ridge solution on its own training rows (``train.head_start: ridge``) instead
of a random draw that predicts 0.5–1 target sd off, and the frozen-feature probe references fit the same
estimator. Features are standardized with the training rows' own mean and std before the solve (the
penalty then treats every feature alike), and the solution is mapped back to the raw features, so the
head stays ŷ = W x + b on what the model computes. Everything runs in float64; with fewer rows than
features the solve uses the n × n (kernel) system.

    w = (ZᵀZ + α I)⁻¹ Zᵀ (Y − Ȳ)   =   Zᵀ (Z Zᵀ + α I)⁻¹ (Y − Ȳ),   Z = (X − μ) / σ
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

ALPHAS = tuple(10.0**k for k in range(-2, 7))  # the validation grid; α is per standardized feature


def ridge(x: Tensor, y: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """The ridge fit of ``y`` [n, k] on ``x`` [n, d] with penalty ``alpha``: (W [k, d], b [k]) on the raw
    features, float64. A feature constant on the rows gets weight 0."""
    x, y = x.double(), y.double()
    mu, sd = x.mean(0), x.std(0, correction=0)
    scale = torch.where(sd > 0, sd, torch.ones_like(sd))
    z = (x - mu) / scale
    y_mean = y.mean(0)
    yc = y - y_mean
    n, d = z.shape
    if n < d:  # the kernel form: an n × n solve
        w = z.T @ torch.linalg.solve(z @ z.T + alpha * torch.eye(n, dtype=z.dtype), yc)
    else:
        w = torch.linalg.solve(z.T @ z + alpha * torch.eye(d, dtype=z.dtype), z.T @ yc)
    w = (w / scale[:, None]).T  # [k, d] on the raw features
    return w, y_mean - w @ mu


def ridge_path(
    x: Tensor,
    y: Tensor,
    score: Callable[[Tensor, Tensor], float],
    alphas: Sequence[float] = ALPHAS,
) -> tuple[Tensor, Tensor, float]:
    """The ridge fit whose ``score(W, b)`` (a loss, e.g. on validation rows) is lowest over ``alphas``
    (ties: the larger α, the simpler model); returns (W, b, α)."""
    best: tuple[float, float, Tensor, Tensor] | None = None
    for alpha in sorted(alphas, reverse=True):
        w, b = ridge(x, y, alpha)
        loss = score(w, b)
        if best is None or loss < best[0]:
            best = (loss, alpha, w, b)
    assert best is not None
    return best[2], best[3], best[1]
