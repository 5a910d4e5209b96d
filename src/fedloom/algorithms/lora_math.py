"""LoRA factor algebra shared by the aggregation rules that reason about ΔW = s · B A."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.backbone.lora import DEFAULT_SLOT, base_delta_key, lora_a_key, lora_b_key, lora_scaling

A_SUFFIX = f".lora_A.{DEFAULT_SLOT}.weight"


def module_paths(tensors: Mapping[str, Tensor]) -> list[str]:
    """Adapted module paths present in a single-slot tensor dict, in key order."""
    return [k.removesuffix(A_SUFFIX) for k in tensors if k.endswith(A_SUFFIX)]


def module_shapes(tensors: Mapping[str, Tensor]) -> dict[str, tuple[int, int]]:
    """Module path → (d_out, d_in) of every adapted module of a single-slot LoRA tensor dict."""
    return {p: (tensors[lora_b_key(p)].shape[0], tensors[lora_a_key(p)].shape[1]) for p in module_paths(tensors)}


def zero_base_deltas(tensors: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A zero dense ΔW₀ [d_out, d_in] per adapted module (FedEx-LoRA and FLoRA start from these)."""
    return {base_delta_key(p): torch.zeros(d_out, d_in) for p, (d_out, d_in) in module_shapes(tensors).items()}


def delta_weight(A: Tensor, B: Tensor, alpha: float) -> Tensor:
    """ΔW = (α / r) · B A  [d_out, d_in] for A [r, d_in], B [d_out, r] (PEFT scaling, r = A's rank)."""
    return lora_scaling(alpha, A.shape[0]) * (B @ A)


def stack_loras(As: Sequence[Tensor], Bs: Sequence[Tensor], weights: Sequence[float]) -> tuple[Tensor, Tensor]:
    """FLoRA stacking (algorithms.md §2.3): rows p_k A_k and columns B_k, so B_stack A_stack = Σ p_k B_k A_k.

    Ranks may differ between clients; the stacked rank is their sum.
    """
    A = torch.cat([w * a for a, w in zip(As, weights, strict=True)], dim=0)
    B = torch.cat(list(Bs), dim=1)
    return A, B


def svd_factors(
    W: Tensor, rank: int, alpha: float, usv: tuple[Tensor, Tensor, Tensor] | None = None
) -> tuple[Tensor, Tensor]:
    """Best rank-r factors of W with PEFT scaling (FlexLoRA, algorithms.md §2.4): (α/r) B A = W_r.

    B = U[:, :r] Σ[:r] / (α/r) and A = Vᵀ[:r]; the rank is capped by W's size. ``usv`` reuses a
    precomputed ``torch.linalg.svd(W, full_matrices=False)`` when several ranks are needed.
    """
    U, S, Vh = usv if usv is not None else torch.linalg.svd(W.double(), full_matrices=False)
    r = min(rank, S.numel())
    A = Vh[:r].float()
    B = (U[:, :r] * S[:r]).float() / lora_scaling(alpha, rank)
    if r < rank:  # pad to the requested shape with zero directions
        A = torch.cat([A, torch.zeros(rank - r, A.shape[1])])
        B = torch.cat([B, torch.zeros(B.shape[0], rank - r)], dim=1)
    return A, B


def fresh_lora(
    paths_shapes: Mapping[str, tuple[int, int]], rank: int, generator: torch.Generator
) -> dict[str, Tensor]:
    """A new default-slot LoRA (A kaiming-uniform, B = 0) for modules given as path → (d_out, d_in).

    The law of `AdapterLayout.init_slot`, but A ÷ √d_in instead of A × (1/√d_in): the roundings differ,
    so merging the two would change the runs of the methods using either.
    """
    out = {}
    for path, (d_out, d_in) in paths_shapes.items():
        out[lora_a_key(path)] = (torch.rand(rank, d_in, generator=generator) * 2 - 1) / d_in**0.5
        out[lora_b_key(path)] = torch.zeros(d_out, rank)
    return out


def base_delta_shapes(tensors: Mapping[str, Tensor]) -> dict[str, tuple[int, int]]:
    """Module path → (d_out, d_in) from the base-delta tensors of a record."""
    suffix = base_delta_key("")
    return {k.removesuffix(suffix): (v.shape[0], v.shape[1]) for k, v in tensors.items() if k.endswith(suffix)}


def assign_ranks(clients: Sequence[str], ranks: Sequence[int] | None, default: int) -> dict[str, int]:
    """Heterogeneous LoRA ranks: the sorted client ids take ``ranks`` in turn (all ``default`` if None)."""
    order = sorted(clients)
    return {c: (ranks[i % len(ranks)] if ranks else default) for i, c in enumerate(order)}
