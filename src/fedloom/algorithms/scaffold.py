"""SCAFFOLD, option II (Karimireddy et al. 2020; algorithms.md §1.5), on LoRA with private heads.

Control variates c (server) and c_i (client) correct every local step; with AdamW the correction
``c − c_i`` is added to the adapter gradients before each step (weight decay never sees it)::

    c_i⁺ = c_i − c + (θᵗ − y_i) / (K η_l)          (option II)
    θ ← θ + η_g · mean_i Δy_i ;  c ← c + |S|/N · mean_i Δc_i
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import torch
from torch import Tensor

from fedloom.algorithms.base import NUM_EXAMPLES, Algorithm, ClientModel, ClientUpdate, LocalContext, Record
from fedloom.algorithms.config import LocalTrainingConfig, ScaffoldConfig
from fedloom.tasks.learner import HEAD_PREFIX, Learner

CONTROL = "control."
NUM_CLIENTS = "num_clients"


class Scaffold(Algorithm):
    name = "scaffold"

    def __init__(self, local: LocalTrainingConfig, cfg: ScaffoldConfig) -> None:
        super().__init__(local)
        self.cfg = cfg

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        control = {CONTROL + k: torch.zeros_like(v) for k, v in shared_init.items()}
        return Record({**shared_init, **control}, {NUM_CLIENTS: len(clients)})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record(server.tensors) for c in clients}

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        # uploads carry Δy under the adapter keys and Δc under control keys
        mean = {
            key: cast(Tensor, sum(u.tensors[key] for u in uploads.values())) / len(uploads) for key in server.tensors
        }
        return self._step(server, mean, len(uploads))

    # Secure aggregation: both server updates are plain means, so each client weighs in with 1 and
    # the revealed total weight is the number of contributors k.
    summable = True

    def secure_upload(self, upload: Record) -> Record:
        return Record(upload.tensors, {NUM_EXAMPLES: 1})

    def aggregate_mean(self, server: Record, mean: Record, round: int) -> Record:
        return self._step(server, mean.tensors, int(mean.scalars[NUM_EXAMPLES]))

    def _step(self, server: Record, mean: Mapping[str, Tensor], k: int) -> Record:
        """x ← x + η_g · mean Δy;  c ← c + k/N · mean Δc  (option II, k of N clients contributed)."""
        n, eta = int(server.scalars[NUM_CLIENTS]), self.cfg.server_lr
        out = dict(server.tensors)
        for key, value in mean.items():
            out[key] = server.tensors[key] + (eta * value if not key.startswith(CONTROL) else k / n * value)
        return Record(out, dict(server.scalars))

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        control = {CONTROL + k: torch.zeros_like(v) for k, v in shared_init.items()}
        return Record({**learner.init_head(generator), **control})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        theta = {k: v for k, v in download.tensors.items() if not k.startswith(CONTROL)}
        c = {k: download.tensors[CONTROL + k] for k in theta}
        c_i = {k: state.tensors[CONTROL + k] for k in theta}
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        params = {**theta, **head}
        offset = {k: c[k] - c_i[k] for k in theta}
        fit = ctx.learner.fit(
            params, self.optimization(list(params)), self.local.steps, ctx.generator, grad_offset=offset
        )
        k_eta = self.local.steps * self.local.lr  # Σ_k η_k for a constant learning rate
        c_new = {k: c_i[k] - c[k] + (theta[k] - fit.params[k]) / k_eta for k in theta}
        upload = {k: fit.params[k] - theta[k] for k in theta}
        upload.update({CONTROL + k: c_new[k] - c_i[k] for k in theta})
        return ClientUpdate(
            upload=Record(upload, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({**{k: fit.params[k] for k in head}, **{CONTROL + k: v for k, v in c_new.items()}}),
            metrics={"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        theta = {k: v for k, v in download.tensors.items() if not k.startswith(CONTROL)}
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        return ClientModel({**theta, **head})
