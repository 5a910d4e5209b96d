"""A client's intercept shrunk toward the federation's mean by empirical Bayes (beyond seed 000).

A private regression head is fitted to targets standardized with the client's own training mean, so its
predictions centre on that mean. With a few dozen rows of next-day returns per client the mean is mostly
noise (FNSPID: the per-client constant scores 1.03× the pooled mean on test, benchmarks/RESULTS.md). The
random-effects model of the client means,

    ȳ_c ~ N(μ, τ² + s_c²/n_c),

gives each client the posterior mean of its own mean,

    ỹ_c = μ + B_c (ȳ_c − μ),   B_c = τ² / (τ² + s_c²/n_c),

with τ² by DerSimonian & Laird (1986) and μ the inverse-variance weighted mean, w_c = n_c / s_c². Both are
functions of five sums over the clients (`MeanSums`: count, Σw, Σwȳ, Σwȳ², Σw²), so each client sends five
numbers once before round 1 (sums: secure aggregation would pass them unchanged), the server sends back
(μ, τ²), and B_c, which needs the client's own s_c²/n_c, is computed on the client. Little between-client
spread (τ² ≈ 0) pulls every intercept to μ; much spread (τ² ≫ s_c²/n_c) leaves it where it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FederationMean:
    """What the server sends back: the weighted mean μ of the client means and their spread τ² (inf: fewer
    than two clients could say anything, so no client is shrunk)."""

    mean: float
    tau2: float


@dataclass(frozen=True)
class MeanSums:
    """One client's contribution (or, added up, the federation's): the inverse-variance weight of its
    training mean and that mean's first and second moments under it. A client with fewer than two rows or
    constant targets sends zeros (its mean's variance is unknown or zero)."""

    count: float = 0.0
    w: float = 0.0
    wy: float = 0.0
    wyy: float = 0.0
    ww: float = 0.0

    @classmethod
    def of(cls, targets: np.ndarray) -> MeanSums:
        y = np.asarray(targets, dtype=np.float64)
        if len(y) < 2 or not np.all(np.isfinite(y)) or float(np.var(y, ddof=1)) <= 0:
            return cls()
        w = len(y) / float(np.var(y, ddof=1))  # 1 / the squared standard error of the mean
        m = float(np.mean(y))
        return cls(1.0, w, w * m, w * m * m, w * w)

    def __add__(self, other: MeanSums) -> MeanSums:
        return MeanSums(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[float, float, float, float, float]:
        return (self.count, self.w, self.wy, self.wyy, self.ww)

    def as_dict(self) -> dict[str, float]:
        """The sums by field name (how they travel on Flower)."""
        return dict(zip(("count", "w", "wy", "wyy", "ww"), self.as_tuple(), strict=True))

    def federation_mean(self) -> FederationMean:
        """μ (the inverse-variance weighted mean) and the DerSimonian–Laird τ² = max(0, (Q − (K − 1)) /
        (Σw − Σw² / Σw)), Q = Σ w_c (ȳ_c − μ)², from the sums alone."""
        if self.count < 2 or self.w <= 0:
            return FederationMean(self.wy / self.w if self.w > 0 else 0.0, math.inf)
        mean = self.wy / self.w
        q = max(0.0, self.wyy - self.wy * self.wy / self.w)
        spread = self.w - self.ww / self.w
        tau2 = max(0.0, (q - (self.count - 1)) / spread) if spread > 0 else math.inf
        return FederationMean(mean, tau2)


def shrunk_mean(targets: np.ndarray, federation: FederationMean) -> float:
    """The client's training mean shrunk toward the federation's: μ + B (ȳ − μ), B = τ² / (τ² + s²/n).
    A client whose mean's variance is unknown (one row) takes μ; constant targets (s² = 0) keep ȳ."""
    y = np.asarray(targets, dtype=np.float64)
    if len(y) == 0:
        return federation.mean
    own = float(np.mean(y))
    if len(y) < 2 or math.isinf(federation.tau2):
        return own if math.isinf(federation.tau2) else federation.mean
    se2 = float(np.var(y, ddof=1)) / len(y)
    if se2 <= 0:
        return own
    weight = federation.tau2 / (federation.tau2 + se2)
    return federation.mean + weight * (own - federation.mean)
