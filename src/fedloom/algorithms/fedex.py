"""FedEx-LoRA (Singhal et al. 2024; algorithms.md §2.6): FedIT's averaged factors plus the exact
residual folded into the frozen weight, so the global update is the exact average of client updates:

    Ā = Σ p_k A_k,  B̄ = Σ p_k B_k,  ΔW₀ ← ΔW₀ + Σ p_k s B_k A_k − s B̄ Ā
    ⇒  W₀ + ΔW₀ + s B̄ Ā  =  (W₀ + ΔW₀_old) + Σ p_k s B_k A_k        (exact)

Weights p_k are sample counts, used consistently for Ā, B̄ and the product mean (the reference code
uses uniform weights). ΔW₀ is written as [d_out, d_in] for ``nn.Linear`` (no transpose; the
reference code's transpose is correct only for GPT-2 ``Conv1D``). The accumulated dense ΔW₀ is part
of every download (it is what clients must apply), and its bytes are counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.base import (
    NUM_EXAMPLES,
    Algorithm,
    ClientModel,
    ClientUpdate,
    LocalContext,
    Record,
    UploadSpec,
)
from fedloom.algorithms.config import LocalTrainingConfig
from fedloom.algorithms.lora_math import delta_weight, module_paths, zero_base_deltas
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import base_delta_key, lora_a_key, lora_b_key
from fedloom.tasks.learner import Learner


def fedex_aggregate(
    server: Mapping[str, Tensor], uploads: Sequence[Mapping[str, Tensor]], weights: Sequence[float], alpha: float
) -> dict[str, Tensor]:
    """New server tensors: averaged factors and the base deltas with this round's residual added."""
    mean = weighted_average(uploads, weights)
    out = {**server, **mean}
    total = float(sum(weights))
    for path in module_paths(mean):
        a, b = lora_a_key(path), lora_b_key(path)
        product_mean = sum(
            (w / total) * delta_weight(u[a], u[b], alpha) for u, w in zip(uploads, weights, strict=True)
        )
        residual = product_mean - delta_weight(mean[a], mean[b], alpha)
        out[base_delta_key(path)] = server[base_delta_key(path)] + residual
    return out


class FedExLoRA(Algorithm):
    name = "fedex-lora"

    def __init__(self, local: LocalTrainingConfig, alpha: float) -> None:
        super().__init__(local)
        self.alpha = alpha

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        return Record({**shared_init, **zero_base_deltas(shared_init)})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record(server.tensors) for c in clients}

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        factors = {k: v for k, v in download.tensors.items() if ".lora_" in k}
        return UploadSpec(TensorLayout.of(factors))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        weights = [float(u.scalars[NUM_EXAMPLES]) for u in ups]
        return Record(fedex_aggregate(server.tensors, [u.tensors for u in ups], weights, self.alpha))

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record(learner.init_head(generator))

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        params = self.client_model(download, state).params
        trainable = [k for k in params if ".base_delta" not in k]
        fit = ctx.learner.fit(params, self.optimization(trainable), self.local.steps, ctx.generator)
        factors = [k for k in download.tensors if ".lora_" in k]
        return ClientUpdate(
            upload=Record({k: fit.params[k] for k in factors}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({k: fit.params[k] for k in state.tensors}),
            metrics={"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        return ClientModel({**download.tensors, **state.tensors})
