"""FedLEASE (Wang et al. 2025; algorithms.md §2.11): LoRA experts per client cluster, with a router of
2M−1 outputs so that each client's own expert is always among the ones it uses.

1. Warm-up (rounds 1…E_w): each client trains its own LoRA; nothing is aggregated.
2. Clustering (end of round E_w): d(i, j) = mean over modules of 1 − cos(B_i, B_j); agglomerative
   (average linkage) for k = 2…max_clusters, k by silhouette; expert j = the uniform mean of its
   cluster's warm-up LoRAs (the released code's intended initialization).
3. Clustered rounds: every client holds all M experts and its cluster's router; the router's 2M−1
   softmax outputs are cut to the top M, renormalized, and slots M…2M−2 all alias the client's own
   expert g_i. Only the own expert, the router and the private head train; the own expert and the
   router are uploaded; the server averages expert j and router j uniformly over cluster j.

Pitfalls of the released code fixed here (spec §2.11): targeted slot renaming (no global '0'
replace), the head trains locally and stays personal, expert indices are not parsed from names,
clustering uses cluster means rather than each client's own warm-up expert, and partial
participation works (a non-sampled client keeps its state; one absent at clustering joins the
largest cluster).

Deviation, documented: the router reads the frozen pooled embedding and decides once per sequence
(the code routes every token in every adapted layer with its own linear router); fedloom's adapter
bank mixes experts per sample.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
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
from fedloom.algorithms.config import FedLEASEConfig, LocalTrainingConfig
from fedloom.algorithms.fedweave.algorithm import rename_slot, slot
from fedloom.algorithms.fedweave.alignment import align, signature_distances, weighted_mean
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import DEFAULT_SLOT
from fedloom.seeding import derive_seed
from fedloom.tasks.learner import HEAD_PREFIX, Learner, Mixture

ROUTER = "router.weight"
CLUSTER, CLUSTERS, STAGE = "cluster", "clusters", "stage"


def expert_weights(logits: Tensor, experts: int, own: int) -> Tensor:
    """Per-sample weights over M experts from 2M−1 router logits: top-M, renormalized, aliasing.

    >>> expert_weights(torch.tensor([[1.0, -30.0, 1.0]]), experts=2, own=1)  # slot 2 aliases expert 1
    tensor([[0.5000, 0.5000]])
    """
    probs = torch.softmax(logits, dim=1)
    values, index = probs.topk(experts, dim=1)
    values = values / values.sum(dim=1, keepdim=True)
    target = torch.where(index < experts, index, torch.full_like(index, own))
    return torch.zeros(len(logits), experts).scatter_add(1, target, values)


class FedLEASE(Algorithm):
    name = "fedlease"

    def __init__(self, local: LocalTrainingConfig, cfg: FedLEASEConfig, seed: int, layout: TensorLayout) -> None:
        super().__init__(local)
        self.cfg, self.seed, self.layout = cfg, seed, layout

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        return Record({}, {STAGE: "warmup"})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        if server.scalars[STAGE] == "warmup":
            return {c: Record({}, {STAGE: "warmup", "upload": round >= self.cfg.warmup_rounds}) for c in clients}
        m = int(server.scalars[CLUSTERS])
        experts = {k: v for k, v in server.tensors.items() if ".lora_" in k}
        out = {}
        for c in clients:
            g = int(server.scalars.get(f"{CLUSTER}/{c}", server.scalars["largest"]))
            router = {ROUTER: server.tensors[f"{ROUTER}/{g}"]}
            out[c] = Record({**experts, **router}, {STAGE: "moe", CLUSTERS: m, CLUSTER: g})
        return out

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        if download.scalars[STAGE] == "warmup":
            return UploadSpec(self.layout if download.scalars["upload"] else TensorLayout(()),
                              (NUM_EXAMPLES,) if download.scalars["upload"] else ())  # fmt: skip
        own = self._own_layout(int(download.scalars[CLUSTER]))
        return UploadSpec(TensorLayout((*own.entries, (ROUTER, tuple(download.tensors[ROUTER].shape)))))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if server.scalars[STAGE] == "warmup":
            return self._cluster(uploads) if round >= self.cfg.warmup_rounds and uploads else server
        out, scalars = dict(server.tensors), dict(server.scalars)
        for g in range(int(scalars[CLUSTERS])):
            members = [u for c, u in uploads.items() if int(scalars.get(f"{CLUSTER}/{c}", scalars["largest"])) == g]
            if not members:
                continue
            for key in self._own_layout(g).keys:  # uniform mean over the cluster, as the code
                out[key] = cast(Tensor, sum(u.tensors[key] for u in members)) / len(members)
            out[f"{ROUTER}/{g}"] = cast(Tensor, sum(u.tensors[ROUTER] for u in members)) / len(members)
        return Record(out, scalars)

    def _cluster(self, uploads: Mapping[str, Record]) -> Record:
        clients = sorted(uploads)
        loras = [dict(uploads[c].tensors) for c in clients]
        signatures = [{k: v for k, v in lora.items() if ".lora_B." in k} for lora in loras]
        labels = align(signature_distances(signatures), list(range(2, self.cfg.max_clusters + 1)))
        m = int(labels.max()) + 1
        tensors: dict[str, Tensor] = {}
        for g in range(m):
            members = [lora for lora, lab in zip(loras, labels, strict=True) if lab == g]
            tensors.update(rename_slot(weighted_mean(members, [1.0] * len(members)), DEFAULT_SLOT, slot(g)))
            gen = torch.Generator().manual_seed(derive_seed(self.seed, "fedlease-router", g))
            width = int(uploads[clients[0]].scalars["embedding_dim"])
            bound = 1.0 / width**0.5  # kaiming-uniform(a=√5) of a bias-free Linear
            tensors[f"{ROUTER}/{g}"] = (torch.rand(2 * m - 1, width, generator=gen) * 2 - 1) * bound
        scalars: dict[str, Any] = {STAGE: "moe", CLUSTERS: m, "largest": int(np.bincount(labels).argmax())}
        scalars.update({f"{CLUSTER}/{c}": int(lab) for c, lab in zip(clients, labels, strict=True)})
        return Record(tensors, scalars)

    # client half
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record({**shared_init, **learner.init_head(generator)})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        learner = ctx.learner
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        if download.scalars[STAGE] == "warmup":  # local LoRA, nothing shared until the last warm-up round
            fit = learner.fit(
                dict(state.tensors), self.optimization(list(state.tensors)), self.local.steps, ctx.generator
            )
            lora = {k: fit.params[k] for k in self.layout.keys}
            scalars = {NUM_EXAMPLES: learner.num_train, "embedding_dim": int(learner.features.embedding.shape[1])}
            upload = Record(lora, scalars) if download.scalars["upload"] else Record()
            return ClientUpdate(upload, Record(fit.params), {"train_loss": fit.loss})
        g = int(download.scalars[CLUSTER])
        params = {**download.tensors, **head}
        trainable = [*self._own_layout(g).keys, ROUTER, *head]
        mixture = self.mixture(int(download.scalars[CLUSTERS]), g)
        fit = learner.fit(params, self.optimization(trainable), self.local.steps, ctx.generator, mixture=mixture)
        shared = {k: fit.params[k] for k in (*self._own_layout(g).keys, ROUTER)}
        return ClientUpdate(
            Record(shared, {NUM_EXAMPLES: learner.num_train}),
            Record({k: fit.params[k] for k in head}),
            {"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        if download.scalars[STAGE] == "warmup":
            return ClientModel(dict(state.tensors))
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        mixture = self.mixture(int(download.scalars[CLUSTERS]), int(download.scalars[CLUSTER]))
        return ClientModel({**download.tensors, **head}, mixture)

    def mixture(self, experts: int, own: int) -> Mixture:
        def weights(learner: Learner, params: Mapping[str, Tensor], rows: np.ndarray) -> Tensor:
            logits = learner.features.embedding[torch.as_tensor(rows)] @ params[ROUTER].T
            return expert_weights(logits, experts, own)

        return Mixture(tuple(slot(m) for m in range(experts)), weights=weights)

    def _own_layout(self, g: int) -> TensorLayout:
        return TensorLayout(tuple((k.replace(f".{DEFAULT_SLOT}.", f".{slot(g)}."), s) for k, s in self.layout.entries))
