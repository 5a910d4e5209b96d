"""Alignment audit of FedWeave (seed 002, Table 3) against the hidden task labels — read only after
training, never by the method: purity, NMI and ARI of the local buckets (within each client,
averaged) and of the global expert assignment, and the task × expert routing matrix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from fedloom.algorithms.fedweave.router import route
from fedloom.metrics.clustering import purity_score
from fedloom.tasks.learner import Learner


def alignment_quality(
    report: Mapping[str, Any], learners: Mapping[str, Learner], tasks: np.ndarray
) -> dict[str, float]:
    """Local (buckets vs tasks per client, mean) and global (expert vs task) purity / NMI / ARI."""
    local: dict[str, list[float]] = {"purity": [], "nmi": [], "ari": []}
    experts: list[int] = []
    truth: list[Any] = []
    for cid, buckets in report["buckets"].items():
        rows, b = learners[cid].data.train, np.asarray(buckets)
        t = tasks[rows]
        local["purity"].append(purity_score(b, t))
        local["nmi"].append(normalized_mutual_info_score(t, b))
        local["ari"].append(adjusted_rand_score(t, b))
        mapping = {
            int(k.rsplit("/", 1)[1]): int(v) for k, v in report["bucket_expert"].items() if k.split("/")[1] == cid
        }
        experts.extend(mapping[int(x)] for x in b)
        truth.extend(t)
    e, t = np.asarray(experts), np.asarray(truth)
    out = {f"local_{k}": float(np.mean(v)) for k, v in local.items()}
    out.update(global_purity=purity_score(e, t), global_nmi=float(normalized_mutual_info_score(t, e)),
               global_ari=float(adjusted_rand_score(t, e)))  # fmt: skip
    return out


def task_expert_routing(
    router: Mapping[str, torch.Tensor], learners: Mapping[str, Learner], tasks: np.ndarray
) -> dict:
    """Mean router weight per (task, expert) over every client's test rows; rows normalized."""
    rows = np.concatenate([lrn.data.test for lrn in learners.values()])
    embedding = next(iter(learners.values())).features.embedding
    with torch.no_grad():
        weights = route(router, embedding[torch.as_tensor(rows)]).numpy()
    names = sorted(set(tasks[rows]))
    matrix = np.stack([weights[tasks[rows] == n].mean(0) for n in names])
    return {"tasks": names, "matrix": (matrix / matrix.sum(1, keepdims=True)).tolist()}
