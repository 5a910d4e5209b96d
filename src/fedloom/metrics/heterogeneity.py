"""Client heterogeneity score of seed 000, eq. 26::

    H_i = JSD(p_i(y) || p_global(y)) + λ · ||μ_i − μ_global|| / ((1/K) Σ_j ||μ_j − μ_global||)

p_i(y) is client i's label distribution: class frequencies for class labels, or frequencies over
``bins`` quantile bins of the pooled targets for returns. JSD is the Jensen–Shannon *divergence* in
bits (in [0, 1]); μ_i is the client's mean covariate vector and μ_global the pooled mean.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


def jensen_shannon_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """JSD in bits of two distributions (normalized here). ``jsd([1, 0], [0, 1]) == 1``."""
    p, q = np.asarray(p, float) / np.sum(p), np.asarray(q, float) / np.sum(q)
    m = (p + q) / 2
    return float(0.5 * _kl(p, m) + 0.5 * _kl(q, m))


def label_histograms(targets: Mapping[str, np.ndarray], bins: int | None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-client and pooled label distributions (class counts if ``bins`` is None, else pooled quantile bins)."""
    pooled = np.concatenate([np.asarray(v, float) for v in targets.values()])
    if bins is None:
        classes = np.unique(pooled)
        counts = {k: np.array([(np.asarray(v) == c).sum() for c in classes], float) for k, v in targets.items()}
        return counts, np.array([(pooled == c).sum() for c in classes], float)
    edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)))
    inner = edges[1:-1]
    counts = {
        k: np.bincount(np.searchsorted(inner, v, side="right"), minlength=len(edges) - 1).astype(float)
        for k, v in targets.items()
    }
    return counts, np.bincount(np.searchsorted(inner, pooled, side="right"), minlength=len(edges) - 1).astype(float)


def heterogeneity_scores(
    targets: Mapping[str, np.ndarray], covariates: Mapping[str, np.ndarray], bins: int | None = 10, lam: float = 1.0
) -> dict[str, float]:
    """H_i of every client (eq. 26); ``covariates[k]`` is client k's (rows × features) matrix."""
    if set(targets) != set(covariates):
        raise ValueError(f"targets and covariates name different clients: {sorted(targets)} vs {sorted(covariates)}")
    hist, pooled = label_histograms(targets, bins)
    means = {k: np.asarray(covariates[k], float).mean(axis=0) for k in targets}
    global_mean = np.concatenate([np.asarray(covariates[k], float) for k in targets]).mean(axis=0)
    dist = {k: float(np.linalg.norm(means[k] - global_mean)) for k in targets}
    scale = float(np.mean(list(dist.values())))
    return {
        k: jensen_shannon_divergence(hist[k], pooled) + lam * (dist[k] / scale if scale > 0 else 0.0) for k in targets
    }


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    mask = p > 0
    return float(np.sum(p[mask] * np.log2(p[mask] / q[mask])))
