"""Robust aggregation for the FedAvg family: rules that bound what a few bad uploads can do.

A weighted mean lets one client move the model arbitrarily far, by the size of its update or by
the sample count it claims. The rules, each on the updates Δ_k = θ_k − θ of the round:

* ``trimmed_mean`` (Yin et al., 2018): per coordinate, drop the ⌊β·n⌋ largest and smallest values
  and average the rest (unweighted);
* ``median`` (Yin et al., 2018): the coordinate-wise median;
* ``norm_bound`` (Sun et al., 2019): clip each update to L2 norm ≤ M before the weighted mean; M is
  fixed (``norm_bound``) or, by default, ``norm_multiple`` × the median update norm of the round,
  which honest clients set while they are the majority;
* ``krum`` / ``multi_krum`` (Blanchard et al., 2017): score each update by the summed squared
  distance to its n − f − 2 nearest others and average the m best (Krum: m = 1).

Trust model: a client's sample count is its own claim (in a deployment the node reports it, and
the server cannot check it against data it never sees). ``mean`` trusts the claims, as FedAvg does;
every robust rule that weights caps each weight at ``weight_cap`` × the round's median claim, so a
client that lies about its data size gains at most that factor, and trimmed mean and median ignore
the claims altogether.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.config import RobustConfig


def capped_weights(claims: Sequence[float], cap: float) -> list[float]:
    """Each claimed sample count at most ``cap`` × the median claim.

    >>> capped_weights([10, 12, 1e9], 2.0)
    [10, 12, 24.0]
    """
    bound = cap * statistics.median(float(c) for c in claims)
    return [min(c, bound) for c in claims]


def trimmed_mean(values: Sequence[Mapping[str, Tensor]], trim_fraction: float) -> dict[str, Tensor]:
    """Coordinate-wise mean after dropping the ⌊β·n⌋ smallest and largest values.

    >>> trimmed_mean([{"a": torch.tensor([v])} for v in (0.0, 1.0, 2.0, 100.0)], 0.25)["a"]
    tensor([1.5000])
    """
    k = trim_count(len(values), trim_fraction)
    out = {}
    for key in values[0]:
        stacked, _ = torch.stack([v[key] for v in values]).sort(dim=0)
        out[key] = stacked[k : len(values) - k].mean(dim=0)
    return out


def trim_count(n: int, trim_fraction: float) -> int:
    """Values dropped at each end of n: ⌊β·n⌋ (0 below n = 1/β)."""
    return math.floor(trim_fraction * n)


def coordinate_median(values: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
    """Per coordinate, the median of the client values (the mean of the middle two for even n).

    >>> coordinate_median([{"a": torch.tensor([v])} for v in (0.0, 1.0, 3.0, 100.0)])["a"]
    tensor([2.])
    """
    n = len(values)
    out = {}
    for key in values[0]:
        stacked, _ = torch.stack([v[key] for v in values]).sort(dim=0)
        out[key] = 0.5 * (stacked[(n - 1) // 2] + stacked[n // 2])
    return out


def update_norm(update: Mapping[str, Tensor]) -> float:
    """L2 norm of a whole update, all its tensors as one vector."""
    return math.sqrt(sum(float(v.double().pow(2).sum()) for v in update.values()))


def clip_update(update: Mapping[str, Tensor], bound: float) -> dict[str, Tensor]:
    """Scale a whole update (all its tensors as one vector) to L2 norm ≤ ``bound``."""
    norm = update_norm(update)
    scale = min(1.0, bound / norm) if norm > 0 else 1.0
    return {k: v * scale for k, v in update.items()}


def norm_bound(norms: Sequence[float], cfg: RobustConfig) -> float:
    """M: the configured bound, else ``norm_multiple`` × the median norm of the round's updates."""
    if cfg.norm_bound is not None:
        return cfg.norm_bound
    return cfg.norm_multiple * statistics.median(norms)


def krum_scores(updates: Sequence[Mapping[str, Tensor]], byzantine: int) -> list[float]:
    """Each update's summed squared L2 distance to its n − f − 2 nearest others (at least 1)."""
    flat = torch.stack([torch.cat([u[k].double().flatten() for k in updates[0]]) for u in updates])
    distances = torch.cdist(flat, flat).pow(2)
    nearest = max(1, len(updates) - byzantine - 2)
    ordered, _ = distances.sort(dim=1)  # column 0 is the distance to itself
    return ordered[:, 1 : nearest + 1].sum(dim=1).tolist()


def krum_select(updates: Sequence[Mapping[str, Tensor]], byzantine: int, keep: int) -> list[int]:
    """Indices of the ``keep`` updates with the lowest Krum scores, best first (ties by index)."""
    scores = krum_scores(updates, byzantine)
    return sorted(range(len(updates)), key=lambda i: (scores[i], i))[:keep]


def krum_keep(cfg: RobustConfig, n: int) -> int:
    """m: 1 for Krum; ``krum_keep`` or n − f for multi-Krum."""
    if cfg.rule == "krum":
        return 1
    return min(n, cfg.krum_keep) if cfg.krum_keep is not None else max(1, n - cfg.byzantine)


def robust_problem(cfg: RobustConfig, per_round: int) -> str | None:
    """Why ``cfg`` cannot defend a round of ``per_round`` clients (None: it can)."""
    if cfg.rule == "trimmed_mean" and per_round >= 2 and trim_count(per_round, cfg.trim_fraction) == 0:
        need = math.ceil(1 / cfg.trim_fraction) if cfg.trim_fraction > 0 else None
        return (
            f"robust.rule=trimmed_mean with robust.trim_fraction={cfg.trim_fraction:g} trims nothing at "
            f"{per_round} clients per round (⌊β·n⌋ = 0): raise trim_fraction to at least {1 / per_round:.3g}"
            + (f" or sample at least {need} clients a round" if need else "")
        )
    if cfg.rule in ("krum", "multi_krum") and per_round <= 2 * cfg.byzantine + 2:
        return (
            f"robust.rule={cfg.rule} needs more than 2f + 2 = {2 * cfg.byzantine + 2} clients per round "
            f"(robust.byzantine={cfg.byzantine}), got {per_round}"
        )
    return None


def robust_average(
    current: Mapping[str, Tensor], values: Sequence[Mapping[str, Tensor]], weights: Sequence[float], cfg: RobustConfig
) -> dict[str, Tensor]:
    """The new shared tensors from client values under ``cfg.rule`` (``current``: the server's).

    Trimmed mean, median and Krum's distances are unchanged by subtracting ``current``, so they act
    on the values; norm bounding clips the updates θ_k − θ.
    """
    if cfg.rule == "trimmed_mean":
        return trimmed_mean(values, cfg.trim_fraction)
    if cfg.rule == "median":
        return coordinate_median(values)
    capped = capped_weights(weights, cfg.weight_cap) if cfg.rule != "mean" else list(weights)
    if cfg.rule == "norm_bound":
        keys = list(values[0])
        deltas = [{k: v[k] - current[k] for k in keys} for v in values]
        bound = norm_bound([update_norm(d) for d in deltas], cfg)
        step = weighted_average([clip_update(d, bound) for d in deltas], capped)
        return {k: current[k] + step[k] for k in keys}
    if cfg.rule in ("krum", "multi_krum"):
        chosen = krum_select(values, cfg.byzantine, krum_keep(cfg, len(values)))
        return weighted_average([values[i] for i in chosen], [capped[i] for i in chosen])
    return weighted_average(values, capped)


def robust_report(
    current: Mapping[str, Tensor], values: Sequence[Mapping[str, Tensor]], weights: Sequence[float], cfg: RobustConfig
) -> dict[str, float]:
    """What the rule did this round: weights capped, the bound and clients clipped, values trimmed, updates kept."""
    if not values or cfg.rule in ("mean", "median"):
        return {}
    if cfg.rule == "trimmed_mean":
        return {"robust_trimmed": trim_count(len(values), cfg.trim_fraction)}
    capped = capped_weights(weights, cfg.weight_cap)
    out: dict[str, float] = {"robust_capped": sum(c < w for c, w in zip(capped, weights, strict=True))}
    if cfg.rule == "norm_bound":
        norms = [update_norm({k: v[k] - current[k] for k in v}) for v in values]
        bound = norm_bound(norms, cfg)
        out.update(robust_bound=bound, robust_clipped=sum(n > bound for n in norms))
    else:
        out["robust_kept"] = krum_keep(cfg, len(values))
    return out
