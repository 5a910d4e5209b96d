"""Agreement of a clustering with hidden labels (purity; NMI and ARI come from scikit-learn)."""

from __future__ import annotations

import numpy as np


def purity_score(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Share of items whose cluster's majority label is their own label."""
    hits = sum(np.unique(labels[clusters == k], return_counts=True)[1].max() for k in np.unique(clusters))
    return float(hits / len(labels))
