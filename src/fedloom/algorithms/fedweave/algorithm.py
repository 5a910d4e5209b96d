"""FedWeave (seed 002, §3), settled by specs/fedweave.md: local prototype discovery, cross-client
alignment by adaptation signatures, asymmetric expert / router aggregation, sparse inference.

Round 1 carries stages 1–2 (they run once, before training):
  client — embed its rows (the frozen pooled embedding, cached), find buckets (silhouette over
  C ≤ C_max), warm a LoRA per bucket from the shared init, upload warmups + bucket sizes;
  server — align buckets by B-signature distance (agglomerative, silhouette-chosen M*), start
  expert m from the size-weighted mean of its aligned warmups, initialize the router.
Rounds ≥ 2 are stage 3: the E-step budget is split across buckets ∝ size (≥ 1 each) and
interleaved, each step one bucket's mini-batch; experts and the router train through the soft
mixture (router state persists across the schedule). Uploads: Δθ_m for experts with n_{i,m} > 0
and Δφ; the server applies

    θ_m += Σ_i n_{i,m} / Σ_j n_{j,m} · Δθ_{i,m}        φ += Σ_i |D_i| / Σ_j |D_j| · Δφ_i

Switches: ``granularity`` prototype/client (FedWeave), client/client (w/o prototype-expert: experts
per client cluster) and prototype/prototype (w/o client-router: the router restarts from the
broadcast at every bucket and the per-bucket endpoints are averaged by size); ``clusterer``;
``inference`` soft / top1 (only the chosen expert runs) / top2. Task labels are never read: the
method sees embeddings, rows and losses only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fedloom.algorithms.base import (
    NUM_EXAMPLES,
    Algorithm,
    Audit,
    ClientModel,
    ClientUpdate,
    Heatmap,
    LocalContext,
    Record,
    RunReport,
    UploadSpec,
)
from fedloom.algorithms.config import FedWeaveConfig, LocalTrainingConfig
from fedloom.algorithms.fedweave.alignment import align, signature_distances, weighted_mean
from fedloom.algorithms.fedweave.audit import alignment_quality, task_expert_routing
from fedloom.algorithms.fedweave.discovery import discover_buckets
from fedloom.algorithms.fedweave.reporting import ALIGNMENT, TASK_EXPERT
from fedloom.algorithms.fedweave.router import ROUTER, init_router, route
from fedloom.algorithms.fedweave.schedule import allocate_steps, interleave
from fedloom.backbone.layout import TensorLayout
from fedloom.backbone.lora import DEFAULT_SLOT
from fedloom.seeding import derive_seed
from fedloom.tasks.learner import HEAD_PREFIX, Learner, Mixture, Optimization, ParamGroup

STAGE, DISCOVER, TRAIN = "stage", "discover", "train"
EXPERTS, BUCKETS, BUCKET = "experts", "buckets", "bucket"


def slot(m: int) -> str:
    return f"e{m}"


def rename_slot(tensors: Mapping[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    return {k.replace(f".{src}.", f".{dst}."): v for k, v in tensors.items()}


class FedWeave(Algorithm):
    name = "fedweave"

    def __init__(self, local: LocalTrainingConfig, cfg: FedWeaveConfig, seed: int, layout: TensorLayout) -> None:
        """``layout``: the default-slot LoRA layout (warmups and experts share it)."""
        super().__init__(local)
        self.cfg, self.seed, self.layout = cfg, seed, layout

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        return Record(dict(shared_init), {STAGE: DISCOVER})

    def participants(self, server: Record, sampled: Sequence[str], everyone: Sequence[str]) -> list[str]:
        """Stage 1 (prototype discovery) runs on every client, whatever the sampling fraction."""
        return list(everyone) if server.scalars[STAGE] == DISCOVER else list(sampled)

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        if server.scalars[STAGE] == DISCOVER:
            return {c: Record(server.tensors, {STAGE: DISCOVER}) for c in clients}
        out = {}
        for c in clients:
            mine = {k: v for k, v in server.scalars.items() if k.startswith((f"map/{c}/", f"size/{c}/"))}
            out[c] = Record(server.tensors, {STAGE: TRAIN, EXPERTS: server.scalars[EXPERTS], **mine})
        return out

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        if download.scalars[STAGE] == DISCOVER:
            return UploadSpec(TensorLayout(()), (NUM_EXAMPLES, BUCKETS), repeated=(BUCKET, self.layout))
        routed = self._client_counts(download)
        entries = [e for m, n in routed.items() if n > 0 for e in self._expert_layout(m).entries]
        router = [(k, tuple(v.shape)) for k, v in download.tensors.items() if k.startswith(ROUTER)]
        return UploadSpec(TensorLayout(tuple(entries + router)))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        if server.scalars[STAGE] == DISCOVER:
            return self._align(uploads)
        out = dict(server.tensors)
        experts = int(server.scalars[EXPERTS])
        for m in range(experts):  # experts by aligned-prototype counts
            counts = {c: float(u.scalars.get(f"n/{m}", 0)) for c, u in uploads.items()}
            total = sum(counts.values())
            if total <= 0:
                continue
            for key in self._expert_layout(m).keys:
                out[key] = server.tensors[key] + sum(counts[c] / total * u.tensors[key]
                                                     for c, u in uploads.items() if counts[c] > 0)  # fmt: skip
        sizes = {c: float(u.scalars[NUM_EXAMPLES]) for c, u in uploads.items()}
        for key in (k for k in server.tensors if k.startswith(ROUTER)):  # router by client sizes
            out[key] = server.tensors[key] + sum(sizes[c] / sum(sizes.values()) * u.tensors[key]
                                                 for c, u in uploads.items())  # fmt: skip
        return Record(out, dict(server.scalars))

    def _align(self, uploads: Mapping[str, Record]) -> Record:
        """Stage 2: bucket → expert by signature alignment; experts from aligned warmups; a fresh router."""
        buckets = []  # (client, bucket, size, warm adapter)
        for cid, up in sorted(uploads.items()):
            for c in range(int(up.scalars[BUCKETS])):
                warm = {
                    k.removeprefix(f"{BUCKET}{c}/"): v for k, v in up.tensors.items() if k.startswith(f"{BUCKET}{c}/")
                }
                buckets.append((cid, c, int(up.scalars[f"size/{c}"]), warm))
        signatures = [{k: w[k] for k in w if ".lora_B." in k} for *_, w in buckets]
        if self.cfg.granularity == "client/client":  # one signature per client: its size-weighted buckets
            clients = sorted(uploads)
            per_client = [
                weighted_mean(
                    [s for (cid, *_), s in zip(buckets, signatures, strict=True) if cid == c],
                    [b[2] for b in buckets if b[0] == c],
                )
                for c in clients
            ]
            client_expert = dict(
                zip(clients, align(signature_distances(per_client), self.cfg.expert_counts), strict=True)
            )
            labels = np.array([client_expert[b[0]] for b in buckets])
        else:
            labels = align(signature_distances(signatures), self.cfg.expert_counts)
        experts = int(labels.max()) + 1
        tensors: dict[str, Tensor] = {}
        for m in range(experts):
            members = [b for b, lab in zip(buckets, labels, strict=True) if lab == m]
            init = weighted_mean([b[3] for b in members], [b[2] for b in members])
            tensors.update(rename_slot(init, DEFAULT_SLOT, slot(m)))
        width = next(iter(uploads.values())).scalars["embedding_dim"]
        g = torch.Generator().manual_seed(derive_seed(self.seed, "fedweave-router"))
        tensors.update(init_router(int(width), experts, self.cfg.router_hidden, g))
        scalars: dict[str, Any] = {STAGE: TRAIN, EXPERTS: experts}
        for (cid, c, size, _), lab in zip(buckets, labels, strict=True):
            scalars[f"map/{cid}/{c}"] = int(lab)
            scalars[f"size/{cid}/{c}"] = size
        return Record(tensors, scalars)

    # client half
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record(learner.init_head(generator))

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        if download.scalars[STAGE] == DISCOVER:
            return self._discover(download, state, ctx)
        if BUCKETS not in state.tensors:
            raise RuntimeError("this client has no prototypes: it failed or was absent in the discovery round")
        return self._train(download, state, ctx)

    def _discover(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        """Stage 1: buckets from frozen embeddings, one warmup LoRA per bucket from the shared init."""
        learner, rows = ctx.learner, ctx.learner.data.train
        embeddings = learner.features.embedding[torch.as_tensor(rows)].numpy()
        seed = derive_seed(self.seed, "buckets", learner.client_id) % 2**31
        cfg = self.cfg
        labels = discover_buckets(embeddings, cfg.max_buckets, cfg.clusterer, cfg.silhouette_threshold, seed)
        head = dict(state.tensors)
        upload: dict[str, Tensor] = {}
        losses = []
        scalars: dict[str, Any] = {NUM_EXAMPLES: learner.num_train, BUCKETS: int(labels.max()) + 1,
                                   "embedding_dim": int(embeddings.shape[1])}  # fmt: skip
        for c in range(int(labels.max()) + 1):
            members = rows[labels == c]
            params = {**download.tensors, **head}
            schedule = learner.batches(
                self.cfg.warmup_steps,
                ctx.generator,
                self.local.batch_size,
                rows=members,
                length_buckets=self.local.length_buckets,
            )
            fit = learner.fit(params, self.optimization(list(download.tensors)), len(schedule), ctx.generator,
                              schedule=schedule)  # fmt: skip
            upload.update({f"{BUCKET}{c}/{k}": fit.params[k] for k in download.tensors})
            scalars[f"size/{c}"] = len(members)
            losses.append(fit.loss)
        new_state = Record({**head, BUCKETS: torch.as_tensor(labels)})
        metrics = {"buckets": float(scalars[BUCKETS]), "train_loss": float(np.mean(losses))}  # warmup loss
        return ClientUpdate(Record(upload, scalars), new_state, metrics)

    def _train(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        """Stage 3: the interleaved bucket schedule through the soft mixture."""
        learner, gen = ctx.learner, ctx.generator
        labels = state.tensors[BUCKETS].numpy()
        rows = learner.data.train
        sizes = [int((labels == c).sum()) for c in range(int(labels.max()) + 1)]
        steps = allocate_steps(sizes, max(self.local.steps, sum(s > 0 for s in sizes)))
        per_bucket = {
            c: learner.batches(
                n, gen, self.local.batch_size, rows=rows[labels == c], length_buckets=self.local.length_buckets
            )
            for c, n in enumerate(steps)
            if n
        }
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        experts = int(download.scalars[EXPERTS])
        mixture = self.mixture(experts, top_k=None)
        params = {**download.tensors, **head}
        optimization = self._optimization(list(params))
        if self.cfg.granularity == "prototype/prototype":  # router restarts at every bucket
            losses: list[float]
            fit_params, endpoints, losses = dict(params), [], []
            for c, batches in per_bucket.items():
                start = {**fit_params, **{k: v for k, v in download.tensors.items() if k.startswith(ROUTER)}}
                fit = learner.fit(start, optimization, len(batches), gen, mixture=mixture, schedule=batches)
                fit_params, losses = dict(fit.params), [*losses, fit.loss]
                endpoints.append((sizes[c], {k: v for k, v in fit.params.items() if k.startswith(ROUTER)}))
            router = weighted_mean([e for _, e in endpoints], [n for n, _ in endpoints])
            final, loss = {**fit_params, **router}, float(np.mean(losses))
        else:
            cursor = {c: iter(b) for c, b in per_bucket.items()}
            schedule = [next(cursor[c]) for c in interleave(steps)]
            fit = learner.fit(params, optimization, len(schedule), gen, mixture=mixture, schedule=schedule)
            final, loss = fit.params, fit.loss
        counts = self._client_counts(download)
        upload = {
            k: final[k] - download.tensors[k] for m, n in counts.items() if n > 0 for k in self._expert_layout(m).keys
        }
        upload.update({k: final[k] - download.tensors[k] for k in download.tensors if k.startswith(ROUTER)})
        scalars = {NUM_EXAMPLES: learner.num_train, **{f"n/{m}": n for m, n in counts.items()}}
        effective = {f"steps_expert_{m}": float(sum(n for c, n in enumerate(steps) if self._map(download, c) == m))
                     for m in range(experts)}  # fmt: skip
        return ClientUpdate(
            Record(upload, scalars),
            Record({**{k: final[k] for k in head}, BUCKETS: state.tensors[BUCKETS]}),
            {"train_loss": loss, **effective},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        experts = int(download.scalars.get(EXPERTS, 0))
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        top_k = {"soft": None, "top1": 1, "top2": min(2, experts)}[self.cfg.inference]
        return ClientModel({**download.tensors, **head}, self.mixture(experts, top_k))

    def final_report(self, server: Record, clients: Mapping[str, Record], audit: Audit) -> RunReport:
        """The alignment audit against the hidden tasks (seed 002, Table 3), where the data has tasks:
        each client's buckets and their experts, purity / NMI / ARI, and the task × expert routing."""
        if audit.tasks is None:
            return RunReport()
        maps = {k: v for k, v in server.scalars.items() if k.startswith("map/")}
        buckets = {
            "buckets": {c: s.tensors[BUCKETS].tolist() for c, s in clients.items() if BUCKETS in s.tensors},
            "bucket_expert": maps,
            "experts": server.scalars.get(EXPERTS),
        }
        quality = alignment_quality(buckets, audit.learners, audit.tasks)
        routing = task_expert_routing(server.tensors, audit.learners, audit.tasks)
        heatmap = Heatmap(routing["matrix"], routing["tasks"], "E", "expert", "mean routing weight",
                          "task × expert routing", cmap="magma")  # fmt: skip
        return RunReport(files={ALIGNMENT: {**buckets, "quality": quality, "routing": routing}},
                         heatmaps={TASK_EXPERT: heatmap}, summary={ALIGNMENT: quality})  # fmt: skip

    # helpers
    def mixture(self, experts: int, top_k: int | None) -> Mixture:
        def weights(learner: Learner, params: Mapping[str, Tensor], rows: np.ndarray) -> Tensor:
            return route(params, learner.features.embedding[torch.as_tensor(rows)])

        return Mixture(tuple(slot(m) for m in range(experts)), weights=weights, top_k=top_k)

    def _optimization(self, keys: Sequence[str]) -> Optimization:
        """The usual groups for adapters and head, then the router at ``router_lr``."""
        router = tuple(k for k in keys if k.startswith(ROUTER))
        rest = [k for k in keys if not k.startswith(ROUTER)]
        return self.optimization(rest, extra=[ParamGroup(router, self.cfg.router_lr)])

    def _expert_layout(self, m: int) -> TensorLayout:
        return TensorLayout(tuple((k.replace(f".{DEFAULT_SLOT}.", f".{slot(m)}."), s) for k, s in self.layout.entries))

    @staticmethod
    def _map(download: Record, bucket: int) -> int:
        return int(next(v for k, v in download.scalars.items() if k.startswith("map/") and k.endswith(f"/{bucket}")))

    def _client_counts(self, download: Record) -> dict[int, int]:
        """n_{i,m}: the client's rows in buckets aligned to expert m (from the server's size record)."""
        experts = int(download.scalars[EXPERTS])
        counts = dict.fromkeys(range(experts), 0)
        for key, m in download.scalars.items():
            if key.startswith("map/"):
                bucket = key.rsplit("/", 1)[1]
                size = next(
                    v for k, v in download.scalars.items() if k.startswith("size/") and k.endswith(f"/{bucket}")
                )
                counts[int(m)] += int(size)
        return counts
