"""FlexLoRA (Bai et al. 2024; algorithms.md §2.4): clients of different LoRA ranks; the server averages
their full-size updates and hands each client the best approximation at its own rank:

    W_g = Σ_k p_k (α / r_k) B_k A_k ;   U Σ Vᵀ = svd(W_g) ;   B⁽ʳ⁾ = U_r Σ_r / (α/r),  A⁽ʳ⁾ = V_rᵀ

W₀ is never modified: the LoRA carries the whole adaptation, so W_g averages full adapters, not
deltas. Before the first aggregation each rank starts from PEFT's default init (A kaiming-uniform,
B = 0), drawn from a generator seeded by the rank so every party derives the same one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import torch
from torch import Tensor

from fedloom.algorithms.base import NUM_EXAMPLES, Record
from fedloom.algorithms.config import LocalTrainingConfig, RankConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.algorithms.lora_math import (
    assign_ranks,
    delta_weight,
    fresh_lora,
    module_paths,
    module_shapes,
    svd_factors,
)
from fedloom.backbone.lora import lora_a_key, lora_b_key

RANK = "rank"
GLOBAL = ".global_delta"


class FlexLoRA(FedAvg):
    """Server half of its own; the client half is FedAvg's (train the downloaded LoRA and the head)."""

    name = "flexlora"
    summable = False  # the SVD of the stacked client products needs every upload

    def __init__(self, local: LocalTrainingConfig, alpha: float, rank: int, cfg: RankConfig) -> None:
        """``alpha``, ``rank``: the run's LoRA alpha and default rank (``adapter.alpha``, ``adapter.rank``)."""
        super().__init__(local)
        self.alpha, self.rank, self.ranks = alpha, rank, list(cfg.ranks) if cfg.ranks else None

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        shapes = module_shapes(shared_init)
        ranks = assign_ranks(clients, self.ranks, self.rank)
        init = {}
        for r in sorted(set(ranks.values())):  # PEFT's init per rank, identical on every party
            lora = fresh_lora(shapes, r, torch.Generator().manual_seed(r))
            init.update({f"init{r}/{k}": v for k, v in lora.items()})
        return Record(init, {f"{RANK}/{c}": r for c, r in ranks.items()})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        dense = {k.removesuffix(GLOBAL): v for k, v in server.tensors.items() if k.endswith(GLOBAL)}
        svds = {p: torch.linalg.svd(W.double(), full_matrices=False) for p, W in dense.items()}
        out = {}
        for c in clients:
            r = int(server.scalars[f"{RANK}/{c}"])
            if not dense:  # no aggregation yet: the rank's initial LoRA
                prefix = f"init{r}/"
                tensors = {k.removeprefix(prefix): v for k, v in server.tensors.items() if k.startswith(prefix)}
            else:
                tensors = {}
                for path, usv in svds.items():
                    A, B = svd_factors(dense[path], r, self.alpha, usv)
                    tensors[lora_a_key(path)], tensors[lora_b_key(path)] = A, B
            out[c] = Record(tensors, {RANK: r})
        return out

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        total = float(sum(cast(float, u.scalars[NUM_EXAMPLES]) for u in ups))
        out = {k: v for k, v in server.tensors.items() if not k.startswith("init")}
        for path in module_paths(ups[0].tensors):
            a, b = lora_a_key(path), lora_b_key(path)
            out[path + GLOBAL] = cast(
                Tensor,
                sum(
                    float(u.scalars[NUM_EXAMPLES]) / total * delta_weight(u.tensors[a], u.tensors[b], self.alpha)
                    for u in ups
                ),
            )
        return Record(out, dict(server.scalars))
