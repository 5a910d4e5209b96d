"""Closed-form ridge regression: the head a linear model would fit on the same inputs.

A client's head starts at the ridge solution on its own training rows (``train.head_start: ridge``) instead
of a random draw that predicts 0.5–1 target sd off, and the frozen-feature probe references fit the same
estimator. Features are standardized with the training rows' own mean and std before the solve (the
penalty then treats every feature alike), and the solution is mapped back to the raw features, so the
head stays ŷ = W x + b on what the model computes. Everything runs in float64.

    w = (ZᵀZ + α I)⁻¹ Zᵀ (Y − Ȳ),   Z = (X − μ) / σ

The same fit needs only sums over rows (`Moments`: n, Σx, Σy, XᵀX, XᵀY, YᵀY), and sums add across
clients: the federated ridge probe sends each client's moments once (through SecAgg+ they would arrive as
the sum), the server solves, and the result equals the ridge fit on the pooled rows. A validation loss
Σ‖y − Wx − b‖² is a function of the validation rows' moments too, so α is chosen on pooled validation
rows without any row leaving its client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

ALPHAS = tuple(10.0**k for k in range(-2, 7))  # the validation grid; α is per standardized feature
Fit = TypeVar("Fit")


def ridge(x: Tensor, y: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """The ridge fit of ``y`` [n, k] on ``x`` [n, d] with penalty ``alpha``: (W [k, d], b [k]) on the raw
    features, float64. A feature constant on the rows gets weight 0."""
    return Moments.of(x, y).solve(alpha)


def ridge_path(
    x: Tensor,
    y: Tensor,
    score: Callable[[Tensor, Tensor], float],
    alphas: Sequence[float] = ALPHAS,
) -> tuple[Tensor, Tensor, float]:
    """The ridge fit whose ``score(W, b)`` (a loss, e.g. on validation rows) is lowest over ``alphas``
    (ties: the larger α, the simpler model); returns (W, b, α). The rows' moments are summed once."""
    return _best_alpha(Moments.of(x, y), score, alphas)


@dataclass(frozen=True)
class Moments:
    """The sufficient statistics of a least-squares fit of ``y`` [n, k] on ``x`` [n, d], float64 sums."""

    n: float
    sx: Tensor  # [d]
    sy: Tensor  # [k]
    sxx: Tensor  # [d, d]
    sxy: Tensor  # [d, k]
    syy: Tensor  # [k]

    @classmethod
    def of(cls, x: Tensor, y: Tensor) -> Moments:
        x, y = x.double(), (y.double() if y.dim() == 2 else y.double()[:, None])
        return cls(float(len(x)), x.sum(0), y.sum(0), x.T @ x, x.T @ y, (y * y).sum(0))

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.n + other.n, self.sx + other.sx, self.sy + other.sy, self.sxx + other.sxx,
                       self.sxy + other.sxy, self.syy + other.syy)  # fmt: skip

    @property
    def numel(self) -> int:
        """Numbers a client sends: what the federated probe costs in communication."""
        return 1 + sum(t.numel() for t in (self.sx, self.sy, self.sxx, self.sxy, self.syy))

    def solve(self, alpha: float) -> tuple[Tensor, Tensor]:
        """The ridge fit (W [k, d], b [k]) on the raw features, as `ridge` on the rows these moments sum."""
        mu, y_mean = self.sx / self.n, self.sy / self.n
        cxx = self.sxx - self.n * torch.outer(mu, mu)  # centred Gram; its diagonal / n is the variance
        cxy = self.sxy - self.n * torch.outer(mu, y_mean)
        scale = feature_scale(mu, (cxx.diagonal().clamp_min(0) / self.n).sqrt())
        zz = cxx / torch.outer(scale, scale)
        w = torch.linalg.solve(zz + alpha * torch.eye(len(mu), dtype=zz.dtype), cxy / scale[:, None])
        w = (w / scale[:, None]).T
        return w, y_mean - w @ mu

    def sse(self, w: Tensor, b: Tensor) -> float:
        """Σ over the rows of ‖y − W x − b‖², from the moments alone."""
        w, b = w.double(), b.double()
        quad = torch.einsum("kd,de,ke->", w, self.sxx, w)
        cross = torch.einsum("kd,dk->", w, self.sxy)
        return float(self.syy.sum() - 2 * cross - 2 * b @ self.sy + quad + 2 * b @ (w @ self.sx) + self.n * b @ b)


def feature_scale(mu: Tensor, sd: Tensor) -> Tensor:
    """What a penalized fit divides each feature by: its std, or 1 where the feature is constant on the rows
    (std at round-off of its mean), whose weight then comes out 0."""
    return torch.where(sd > 1e-12 * (1 + mu.abs()), sd, torch.ones_like(sd))


def moments_path(
    train: Moments, valid: Moments | None, alphas: Sequence[float] = ALPHAS
) -> tuple[Tensor, Tensor, float]:
    """`ridge_path` from moments: the α whose fit has the lowest squared error on ``valid`` (none: α = the
    feature count d, as `Learner` does without validation rows); returns (W, b, α)."""
    if valid is None or valid.n == 0:
        alpha = float(len(train.sx))
        return (*train.solve(alpha), alpha)
    return _best_alpha(train, valid.sse, alphas)


def _best_alpha(
    train: Moments, score: Callable[[Tensor, Tensor], float], alphas: Sequence[float]
) -> tuple[Tensor, Tensor, float]:
    """The fit on ``train`` with the lowest ``score`` over ``alphas``, the larger α on a tie."""
    (w, b), alpha = choose_alpha(train.solve, lambda fit: score(*fit), alphas)
    return w, b, alpha


def choose_alpha(
    solve: Callable[[float], Fit], score: Callable[[Fit], float], alphas: Sequence[float] = ALPHAS
) -> tuple[Fit, float]:
    """The penalized fit ``solve(α)`` with the lowest ``score`` (a loss, e.g. on validation rows) over
    ``alphas``, the larger α (the simpler model) on a tie; returns (fit, α). Any penalized estimator: the ridge
    solution here, the logistic one of `fedloom.tasks.logistic`."""
    best: tuple[float, float, Fit] | None = None
    for alpha in sorted(alphas, reverse=True):
        fit = solve(alpha)
        loss = score(fit)
        if best is None or loss < best[0]:
            best = (loss, alpha, fit)
    assert best is not None
    return best[2], best[1]
