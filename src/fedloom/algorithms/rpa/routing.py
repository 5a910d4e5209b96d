"""Projected directional routing on the simplex (seed 000, §3.2): alignment scores, KL mirror descent,
and the route diagnostics of §4.4. Small pure functions on tensors.

Beyond seed 000 (labelled so): scores against the prototypes themselves (`prototype_scores`), scores
standardized across prototypes (`standardize`), and the per-round log-odds budget that bounds how far
eq. 14 can move a route (`log_odds_budget`)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

XI = 1e-8  # the numerical constant ξ of eqs. 10, 12, 13


def normalize(v: Tensor, xi: float = XI) -> Tensor:
    """v / (‖v‖₂ + ξ)  (eqs. 10 and 12)."""
    return v / (v.norm() + xi)


def alignment_scores(g: Tensor, signatures: Tensor, xi: float = XI) -> Tensor:
    """s_m = ⟨g̃, v_m⟩ / (‖g̃‖ ‖v_m‖ + ξ) for signatures [M, q]  (eq. 13)."""
    return (signatures @ g) / (g.norm() * signatures.norm(dim=1) + xi)


def prototype_scores(direction: Tensor, prototypes: Tensor, routed: Tensor, xi: float = XI) -> Tensor:
    """s_m = cos(−g, A_m − A_i) for prototypes [M, d] and the routed adapter A_i (eq. 11); beyond seed 000.

    ⟨−g, A_m − A_i⟩ is minus the derivative of the client's loss (eq. 24) along the simplex edge from
    π toward prototype m, so eq. 14 on these scores is a normalized mirror-descent step on the routing
    part of eq. 24 itself. Unlike EMA signatures, the inputs never decay toward each other; the client
    holds the prototypes, so the cosine is exact in R^d (no projection, no signature download)."""
    return alignment_scores(direction, prototypes - routed, xi)


def standardize(scores: Tensor, xi: float = XI) -> Tensor:
    """(s − mean s) / (std s + ξ) across prototypes: unit spread whatever the scores' scale (beyond seed 000)."""
    centred = scores - scores.mean()
    return centred / (centred.pow(2).mean().sqrt() + xi)


def log_odds_budget(scores: Tensor, step: float) -> float:
    """η (max_m s_m − min_m s_m): the most eq. 14 can change any log-odds log(π_m / π_j) this round."""
    return float(step * (scores.max() - scores.min())) if scores.numel() > 1 else 0.0


def mirror_descent(route: Tensor, scores: Tensor, step: float) -> Tensor:
    """π⁺_m ∝ π_m exp(η s_m)  (eq. 14): stays on the simplex and strictly positive."""
    logits = route.double().log() + step * scores.double()
    return torch.softmax(logits, dim=0).to(route.dtype)


def softmax_route(scores: Tensor, step: float) -> Tensor:
    """π⁺ = softmax(η s): the ablation without mirror descent (no inertia from π)."""
    return torch.softmax(step * scores.double(), dim=0).float()


def route_entropy(route: Tensor) -> float:
    """Normalized entropy H = −Σ π log π / log M ∈ [0, 1]  (eq. 15); 1 for M = 1 by convention.

    π is renormalized first: a route that crossed the wire in bfloat16 sums to 1 only within ~1e-3."""
    m = route.numel()
    if m == 1:
        return 1.0
    p = route.double().clamp_min(1e-300)
    p = p / p.sum()
    return float(-(p * p.log()).sum() / math.log(m))


def collapsed(route: Tensor, threshold: float = 0.9) -> bool:
    """The collapse indicator 1[max_m π_m > 0.9] of §3.2."""
    return bool(route.max() > threshold)
