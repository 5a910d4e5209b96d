"""Aggregation formulas shared by many methods, each in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.errors import UploadError


def weighted_average(tensors: Sequence[Mapping[str, Tensor]], weights: Sequence[float]) -> dict[str, Tensor]:
    """``Σ_k p_k θ_k`` with ``p_k = w_k / Σ_j w_j`` per key (FedAvg, algorithms.md §1.2).

    >>> weighted_average([{"a": torch.tensor([0.0])}, {"a": torch.tensor([3.0])}], [1, 2])["a"]
    tensor([2.])
    """
    if not tensors or len(tensors) != len(weights):
        raise UploadError(f"need one weight per upload, got {len(tensors)} uploads and {len(weights)} weights")
    total = float(sum(weights))
    if total <= 0:
        raise UploadError(f"aggregation weights must sum to a positive number, got {list(weights)}")
    keys = tensors[0].keys()
    out = {}
    for key in keys:
        acc = torch.zeros_like(tensors[0][key], dtype=torch.float32)
        for t, w in zip(tensors, weights, strict=True):
            acc += (w / total) * t[key].to(torch.float32)
        out[key] = acc
    return out
