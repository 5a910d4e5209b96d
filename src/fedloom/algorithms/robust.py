"""Robust aggregation for the FedAvg family: coordinate-wise trimmed mean and update norm bounding.

A weighted mean lets one client move the model arbitrarily far. Two standard defences:

* trimmed mean (Yin et al., 2018): per coordinate, drop the ⌊β·n⌋ largest and smallest client
  values and average the rest (unweighted);
* norm bounding (Sun et al., 2019): clip each client's update θ_k − θ to L2 norm ≤ M before the
  sample-weighted mean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import torch
from torch import Tensor

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.config import RobustConfig


def trimmed_mean(values: Sequence[Mapping[str, Tensor]], trim_fraction: float) -> dict[str, Tensor]:
    """Coordinate-wise mean after dropping the ⌊β·n⌋ smallest and largest values.

    >>> trimmed_mean([{"a": torch.tensor([v])} for v in (0.0, 1.0, 2.0, 100.0)], 0.25)["a"]
    tensor([1.5000])
    """
    k = int(trim_fraction * len(values))
    out = {}
    for key in values[0]:
        stacked, _ = torch.stack([v[key] for v in values]).sort(dim=0)
        out[key] = stacked[k : len(values) - k].mean(dim=0)
    return out


def clip_update(update: Mapping[str, Tensor], bound: float) -> dict[str, Tensor]:
    """Scale a whole update (all its tensors as one vector) to L2 norm ≤ ``bound``."""
    norm = torch.sqrt(cast(Tensor, sum(v.double().pow(2).sum() for v in update.values())))
    scale = min(1.0, bound / float(norm)) if norm > 0 else 1.0
    return {k: v * scale for k, v in update.items()}


def robust_average(
    current: Mapping[str, Tensor], values: Sequence[Mapping[str, Tensor]], weights: Sequence[float], cfg: RobustConfig
) -> dict[str, Tensor]:
    """The new shared tensors from client values under ``cfg.rule`` (``current``: the server's)."""
    if cfg.rule == "trimmed_mean":
        return trimmed_mean(values, cfg.trim_fraction)
    if cfg.rule == "norm_bound":
        keys = list(values[0])
        deltas = [clip_update({k: v[k] - current[k] for k in keys}, cfg.norm_bound) for v in values]
        mean = weighted_average(deltas, weights)
        return {k: current[k] + mean[k] for k in keys}
    return weighted_average(values, weights)
