"""Ditto (Li et al. 2021; algorithms.md §1.8): a global model trained with FedAvg, and on every client
a personal model regularized toward the global one::

    v_k ← v_k − η (∇F_k(v_k) + λ (v_k − wᵗ))          (λ on the adapter tensors)

fedloom mapping: w is the LoRA adapter (its head, private, trains with it); v_k is a personal LoRA
copy with its own private head. The personal phase takes ``personal_steps`` (default: as many as
the global phase), so a round costs up to twice FedAvg's compute. Personalized evaluation uses
v_k; global evaluation uses w with the global-track head.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import torch
from torch import Tensor

from fedloom.algorithms.base import NUM_EXAMPLES, ClientModel, ClientUpdate, LocalContext, Record
from fedloom.algorithms.config import DittoConfig, LocalTrainingConfig
from fedloom.algorithms.fedavg import FedAvg
from fedloom.tasks.learner import Learner

PERSONAL = "personal/"


class Ditto(FedAvg):
    name = "ditto"

    def __init__(self, local: LocalTrainingConfig, cfg: DittoConfig) -> None:
        super().__init__(local)
        self.cfg = cfg
        self.personal_steps = cfg.personal_steps or local.steps

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        head = learner.init_head(generator)
        personal = {**shared_init, **learner.init_head(generator)}
        return Record({**head, **{PERSONAL + k: v for k, v in personal.items()}})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        w = {**download.tensors, **_shared_head(state)}
        fit_w = ctx.learner.fit(w, self.optimization(list(w)), self.local.steps, ctx.generator)
        anchor = dict(download.tensors)

        def prox(p: Mapping[str, Tensor]) -> Tensor:  # λ/2 ‖v − wᵗ‖² on the adapter tensors
            return 0.5 * self.cfg.lam * cast(Tensor, sum((p[k] - anchor[k]).pow(2).sum() for k in anchor))

        v = self._personal(state)
        fit_v = ctx.learner.fit(v, self.optimization(list(v)), self.personal_steps, ctx.generator, regularizer=prox)
        new_state = {
            **{k: fit_w.params[k] for k in _shared_head(state)},
            **{PERSONAL + k: x for k, x in fit_v.params.items()},
        }
        return ClientUpdate(
            upload=Record({k: fit_w.params[k] for k in download.tensors}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record(new_state),
            metrics={"train_loss": fit_v.loss, "global_train_loss": fit_w.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        return ClientModel(self._personal(state))

    def global_model(self, server: Record, state: Record) -> ClientModel:
        return ClientModel({**server.tensors, **_shared_head(state)})

    @staticmethod
    def _personal(state: Record) -> dict[str, Tensor]:
        return {k.removeprefix(PERSONAL): v for k, v in state.tensors.items() if k.startswith(PERSONAL)}


def _shared_head(state: Record) -> dict[str, Tensor]:
    return {k: v for k, v in state.tensors.items() if not k.startswith(PERSONAL)}
