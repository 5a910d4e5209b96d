"""Prototypes warm-started from a clustering of the clients' first trained adapters (beyond seed 000).

With the seed's init every prototype starts as the frozen model (B = 0), so the first rounds give every
prototype the same piece and routes have nothing to tell apart (issue 17). Here the first aggregating
round clusters the clients' residual sketches P·R (the public projection of eq. 8, centred and
normalized, so the common direction every client shares cannot dominate) into the k ∈ 2..M clusters of
best silhouette (as FedWeave picks its buckets) and sets prototype m to the sample-weighted mean trained
adapter Â_i + R_i of cluster m mod k. The server sees
only what RPA already uploads (R, π, n); routes stay the clients' own and move by eq. 14 from there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from fedloom.algorithms.fedweave.discovery import cluster, discover_buckets


def sketch_clusters(sketches: Tensor, weights: Sequence[float], max_k: int, seed: int) -> np.ndarray:
    """k-means labels of the sketches [n, q], centred on their weighted mean and row-normalized, with the
    silhouette-best k ≤ ``max_k`` (every client its own cluster when there are at most two)."""
    n = sketches.shape[0]
    if max_k < 2 or n < 2:
        return np.zeros(n, dtype=np.int64)
    w = torch.tensor(weights, dtype=sketches.dtype)
    centred = sketches - (w / w.sum()) @ sketches
    rows = (centred / (centred.norm(dim=1, keepdim=True) + 1e-12)).double().numpy()
    if n <= 2:
        return cluster(rows, n, "kmeans", seed).astype(np.int64)
    return discover_buckets(rows, max_k, "kmeans", threshold=-1.0, seed=seed)


def cluster_prototypes(trained: Tensor, weights: Sequence[float], labels: np.ndarray, m: int) -> Tensor:
    """Prototype j = the sample-weighted mean of the trained adapters [n, d] in cluster j mod k, as [M, d]."""
    w = torch.tensor(weights, dtype=trained.dtype)
    k = int(labels.max()) + 1
    means = []
    for c in range(k):
        members = torch.from_numpy(labels == c)
        means.append((w[members] / w[members].sum()) @ trained[members])
    return torch.stack([means[j % k] for j in range(m)])
