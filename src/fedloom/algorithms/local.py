"""Local-only training (algorithms.md §1.1): each client trains its own adapter and head, from the
shared initialization, and never communicates. The lower bound for collaboration."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.algorithms.base import Algorithm, ClientModel, ClientUpdate, LocalContext, Record, UploadSpec
from fedloom.backbone.layout import TensorLayout
from fedloom.tasks.learner import Learner


class LocalOnly(Algorithm):
    name = "local"
    communicates = False

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        return Record()

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record() for c in clients}

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        return server

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        return UploadSpec(TensorLayout(()), scalars=())

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record({**shared_init, **learner.init_head(generator)})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        fit = ctx.learner.fit(state.tensors, self.optimization(list(state.tensors)), self.local.steps, ctx.generator)
        return ClientUpdate(upload=Record(), state=Record(fit.params), metrics={"train_loss": fit.loss})

    def client_model(self, download: Record, state: Record) -> ClientModel:
        return ClientModel(dict(state.tensors))
