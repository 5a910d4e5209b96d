"""Stage 1 of FedWeave (seed 002, §3): local prototype discovery on frozen embeddings, without labels.

The bucket count C ∈ {1, …, C_max} is chosen by silhouette; C = 1 when no C ≥ 2 reaches the
threshold or the client has too few examples. k-means is the default clusterer (Table 3 also uses
agglomerative and spectral clustering).
"""

from __future__ import annotations

import numpy as np
from sklearn.cluster import AgglomerativeClustering, KMeans, SpectralClustering
from sklearn.metrics import silhouette_score

from fedloom.algorithms.config import Clusterer


def cluster(embeddings: np.ndarray, k: int, method: Clusterer, seed: int) -> np.ndarray:
    """Labels of ``k`` clusters by the chosen clusterer (deterministic given ``seed``)."""
    if method == "kmeans":
        return KMeans(n_clusters=k, n_init=10, random_state=seed).fit_predict(embeddings)
    if method == "agglomerative":
        return AgglomerativeClustering(n_clusters=k).fit_predict(embeddings)
    return SpectralClustering(n_clusters=k, random_state=seed, affinity="nearest_neighbors",
                              n_neighbors=min(10, len(embeddings) - 1)).fit_predict(embeddings)  # fmt: skip


def discover_buckets(
    embeddings: np.ndarray, max_buckets: int, method: Clusterer, threshold: float, seed: int
) -> np.ndarray:
    """Bucket id per example: the silhouette-best clustering over C = 2..C_max, or one bucket."""
    n = len(embeddings)
    best, best_score = np.zeros(n, dtype=np.int64), threshold
    for k in range(2, min(max_buckets, n - 1) + 1):
        labels = cluster(embeddings, k, method, seed)
        if len(np.unique(labels)) < 2:
            continue
        score = silhouette_score(embeddings, labels)
        if score > best_score:
            best, best_score = labels.astype(np.int64), score
    return best
