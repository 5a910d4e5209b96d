"""FLoRA (Wang et al. 2024; algorithms.md §2.3): stack client LoRAs instead of averaging factors, so
the aggregate is exactly Σ p_k s_k B_k A_k even with heterogeneous ranks; merge it into the base
and start every round from a fresh LoRA (A random, B = 0).

    A_stack = [p_1 s_1 A_1; …; p_K s_K A_K],  B_stack = [B_1 … B_K],  ΔW₀ ← ΔW₀ + B_stack A_stack

fedloom keeps the merged update as a dense per-module base delta on the server and downloads it to
every sampled client (the "merged dense ΔW" form of the downlink in algorithms.md §0.2), so a client
that skipped rounds is never out of date. s_k = α / r_k (PEFT's convention; the reference code sets
α_k = 2 r_k, i.e. s = 2 for all). The stacked rank is Σ r_k over the clients that reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import torch
from torch import Tensor

from fedloom.algorithms.base import (
    NUM_EXAMPLES,
    Algorithm,
    ClientModel,
    ClientUpdate,
    LocalContext,
    Record,
    UploadSpec,
)
from fedloom.algorithms.config import LocalTrainingConfig, RankConfig
from fedloom.algorithms.lora_math import assign_ranks, base_delta_shapes, fresh_lora, stack_loras, zero_base_deltas
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import base_delta_key, lora_a_key, lora_b_key
from fedloom.tasks.learner import Learner, Mixture

RANK = "rank"


class FLoRA(Algorithm):
    name = "flora"

    def __init__(self, local: LocalTrainingConfig, alpha: float, rank: int, cfg: RankConfig) -> None:
        """``alpha``, ``rank``: the run's LoRA alpha and default rank (``adapter.alpha``, ``adapter.rank``)."""
        super().__init__(local)
        self.alpha, self.rank, self.ranks = alpha, rank, list(cfg.ranks) if cfg.ranks else None

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        ranks = assign_ranks(clients, self.ranks, self.rank)
        return Record(zero_base_deltas(shared_init), {f"{RANK}/{c}": r for c, r in ranks.items()})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record(server.tensors, {RANK: server.scalars[f"{RANK}/{c}"]}) for c in clients}

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        r = int(download.scalars[RANK])
        entries = []
        for path, (d_out, d_in) in base_delta_shapes(download.tensors).items():
            entries += [(lora_a_key(path), (r, d_in)), (lora_b_key(path), (d_out, r))]
        return UploadSpec(TensorLayout(tuple(entries)))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        total = float(sum(cast(float, u.scalars[NUM_EXAMPLES]) for u in ups))
        out = dict(server.tensors)
        for path in base_delta_shapes(server.tensors):
            As = [u.tensors[lora_a_key(path)] for u in ups]
            Bs = [u.tensors[lora_b_key(path)] for u in ups]
            w = [
                float(u.scalars[NUM_EXAMPLES]) / total * self.alpha / a.shape[0] for u, a in zip(ups, As, strict=True)
            ]
            A_stack, B_stack = stack_loras(As, Bs, w)
            out[base_delta_key(path)] = server.tensors[base_delta_key(path)] + B_stack @ A_stack
        return Record(out, dict(server.scalars))

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record(learner.init_head(generator))

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        fresh = fresh_lora(base_delta_shapes(download.tensors), int(download.scalars[RANK]), ctx.generator)
        params = {**download.tensors, **fresh, **state.tensors}
        fit = ctx.learner.fit(params, self.optimization([*fresh, *state.tensors]), self.local.steps, ctx.generator)
        return ClientUpdate(
            upload=Record({k: fit.params[k] for k in fresh}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({k: fit.params[k] for k in state.tensors}),
            metrics={"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        """The merged base and the private head; no LoRA slot (a fresh one has B = 0 and adds nothing)."""
        return ClientModel({**download.tensors, **state.tensors}, Mixture(slots=()))
