"""FedAvg on LoRA with private heads (McMahan et al. 2017; algorithms.md §1.2).

Clients start each round from the global adapter, train adapter and head, and upload the adapter;
the server takes the sample-weighted mean ``θ ← Σ_k n_k / Σ_j n_j · θ_k``. Heads never leave the
client. On LoRA factors this is also FedIT's rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.base import NUM_EXAMPLES, Algorithm, ClientUpdate, LocalContext, Record
from fedloom.tasks.learner import Learner


class FedAvg(Algorithm):
    name = "fedavg"

    def init_server(self, shared_init: Mapping[str, Tensor]) -> Record:
        return Record(dict(shared_init))

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record(server.tensors) for c in clients}

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        ups = list(uploads.values())
        return Record(weighted_average([u.tensors for u in ups], [float(u.scalars[NUM_EXAMPLES]) for u in ups]))

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record(learner.init_head(generator))

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        params = self.client_model(download, state)
        fit = ctx.learner.fit(params, self.param_groups(list(params)), self.local.steps, ctx.generator)
        return ClientUpdate(
            upload=Record({k: fit.params[k] for k in download.tensors}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({k: fit.params[k] for k in state.tensors}),
            metrics={"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> dict[str, Tensor]:
        return {**download.tensors, **state.tensors}
