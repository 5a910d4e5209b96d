"""Stage 2 of FedWeave (seed 002, §3): cross-client alignment of buckets by adaptation signatures.

    d_uv = (1 / L_B) Σ_ℓ [1 − cos(s_u^ℓ, s_v^ℓ)]        (s^ℓ: a bucket's warmed-up LoRA B of module ℓ)

Agglomerative clustering (average linkage, precomputed distances) for every M in K_g; M* is the
silhouette-best. Experts start from the size-weighted mean of the warmup adapters aligned to them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import torch
from sklearn.cluster import AgglomerativeClustering
from sklearn.metrics import silhouette_score
from torch import Tensor


def signature_distances(signatures: Sequence[Mapping[str, Tensor]]) -> np.ndarray:
    """Mean over modules of 1 − cosine between the B matrices of every pair of buckets."""
    keys = sorted(signatures[0])
    flat = [torch.stack([s[k].reshape(-1).double() for s in signatures]) for k in keys]  # per module [U, r·d]
    dist = np.zeros((len(signatures), len(signatures)))
    for m in flat:
        unit = m / m.norm(dim=1, keepdim=True).clamp_min(1e-12)
        dist += (1.0 - unit @ unit.T).numpy()
    dist /= len(keys)
    np.fill_diagonal(dist, 0.0)
    return np.clip((dist + dist.T) / 2, 0.0, None)


def align(distances: np.ndarray, expert_counts: Sequence[int]) -> np.ndarray:
    """Expert id per bucket: silhouette-best average-linkage clustering over the candidate counts."""
    n = len(distances)
    candidates = [m for m in expert_counts if 2 <= m < n]
    if not candidates:
        return np.zeros(n, dtype=np.int64)
    best, best_score = None, -np.inf
    for m in candidates:
        labels = AgglomerativeClustering(n_clusters=m, metric="precomputed", linkage="average").fit_predict(distances)
        score = silhouette_score(distances, labels, metric="precomputed")
        if score > best_score:
            best, best_score = labels, score
    return np.asarray(best, dtype=np.int64)


def weighted_mean(tensors: Sequence[Mapping[str, Tensor]], weights: Sequence[float]) -> dict[str, Tensor]:
    """Size-weighted mean of adapters (the expert initialization)."""
    total = float(sum(weights))
    return {k: cast(Tensor, sum(w / total * t[k] for t, w in zip(tensors, weights, strict=True))) for k in tensors[0]}
