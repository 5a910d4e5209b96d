"""Summaries of per-client metrics: macro mean, sample-weighted mean and the worst quartile of clients."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

LOWER_IS_BETTER = ("mse", "mae", "loss")  # every other metric (IC, accuracy, MCC, score...) is higher-better


def higher_is_better(metric: str) -> bool:
    """Direction of a metric name, also for per-task names such as ``gsm8k/loss``."""
    return metric.rsplit("/", 1)[-1] not in LOWER_IS_BETTER


def macro_mean(values: Mapping[str, float]) -> float:
    """Unweighted mean over clients (NaN values skipped)."""
    v = np.array([x for x in values.values() if np.isfinite(x)], dtype=float)
    return float(v.mean()) if v.size else float("nan")


def weighted_mean(values: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Mean over clients weighted by ``weights`` (e.g. test-set sizes), NaN values skipped."""
    keys = [k for k, x in values.items() if np.isfinite(x) and weights.get(k, 0) > 0]
    if not keys:
        return float("nan")
    w = np.array([weights[k] for k in keys], dtype=float)
    return float(np.dot(w, [values[k] for k in keys]) / w.sum())


def worst_quartile_mean(values: Mapping[str, float], higher_is_better: bool) -> float:
    """Mean over the worst quarter of clients (at least one): the tail a federation must not neglect."""
    v = np.sort(np.array([x for x in values.values() if np.isfinite(x)], dtype=float))
    if not v.size:
        return float("nan")
    k = max(1, len(v) // 4)
    return float(v[:k].mean() if higher_is_better else v[-k:].mean())
