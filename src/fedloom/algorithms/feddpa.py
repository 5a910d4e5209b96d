"""FedDPA-T (Yang et al. 2024; algorithms.md §2.7): a federated global LoRA and a personal local LoRA
on the same modules, mixed per test instance.

Each round after the first a client first trains its local adapter with the global one frozen,
mixed as ``(1 − a)·global + a·local`` (``local_weight`` a), then trains the global adapter alone and
uploads it. The server averages global adapters (uniformly, as the reference code does; switchable).
At test time the weight of the global adapter is

    λ(x) = w_max · mean_i cos(e(x), e(x_i))

over N fixed local training instances, with e(·) the mean-pooled final hidden state computed with
the local adapter only (the code's ``emb_type='avg'``); the local adapter gets 1 − λ(x).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from fedloom.algorithms.aggregation import weighted_average
from fedloom.algorithms.base import NUM_EXAMPLES, Algorithm, ClientModel, ClientUpdate, LocalContext, Record
from fedloom.algorithms.config import FedDPAConfig, LocalTrainingConfig
from fedloom.algorithms.lora_math import fresh_lora, module_shapes
from fedloom.backbone.lora import DEFAULT_SLOT, lora_a_key
from fedloom.tasks.learner import HEAD_PREFIX, Learner, Mixture

LOCAL_SLOT = "local"
INSTANCES = "instances"


def to_slot(tensors: Mapping[str, Tensor], src: str, dst: str) -> dict[str, Tensor]:
    """Rename the LoRA keys of slot ``src`` to slot ``dst``."""
    return {k.replace(f".lora_A.{src}.", f".lora_A.{dst}.").replace(f".lora_B.{src}.", f".lora_B.{dst}."): v
            for k, v in tensors.items()}  # fmt: skip


class FedDPA(Algorithm):
    name = "feddpa"

    def __init__(self, local: LocalTrainingConfig, cfg: FedDPAConfig) -> None:
        super().__init__(local)
        self.cfg = cfg
        self.personal_steps = cfg.personal_steps or local.steps

    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        return Record(dict(shared_init))

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        return {c: Record(server.tensors) for c in clients}

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        weights = [1.0 if self.cfg.uniform else float(u.scalars[NUM_EXAMPLES]) for u in ups]
        return Record(weighted_average([u.tensors for u in ups], weights))

    summable = True  # a (uniformly or sample-) weighted mean

    def secure_upload(self, upload: Record) -> Record:
        return Record(upload.tensors, {NUM_EXAMPLES: 1}) if self.cfg.uniform else upload

    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        shapes = module_shapes(shared_init)
        local = to_slot(fresh_lora(shapes, shared_init[lora_a_key(next(iter(shapes)))].shape[0], generator),
                        DEFAULT_SLOT, LOCAL_SLOT)  # fmt: skip
        picks = torch.randperm(learner.num_train, generator=generator)[: self.cfg.instances]
        return Record({**local, **learner.init_head(generator), INSTANCES: picks})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        local = {k: v for k, v in state.tensors.items() if k != INSTANCES}
        metrics = {}
        if ctx.round > 1:  # local step: train the local adapter (and head) beside the frozen global one
            params = {**download.tensors, **local}
            mix = Mixture((DEFAULT_SLOT, LOCAL_SLOT), weights=self._fixed_weights)
            fit_local = ctx.learner.fit(params, self.optimization(list(local)), self.personal_steps, ctx.generator,
                                        mixture=mix)  # fmt: skip
            local = {k: fit_local.params[k] for k in local}
            metrics["local_train_loss"] = fit_local.loss
        head = {k: v for k, v in local.items() if k.startswith(HEAD_PREFIX)}
        params = {**download.tensors, **head}
        fit = ctx.learner.fit(params, self.optimization(list(params)), self.local.steps, ctx.generator)
        local.update({k: fit.params[k] for k in head})
        return ClientUpdate(
            upload=Record({k: fit.params[k] for k in download.tensors}, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({**local, INSTANCES: state.tensors[INSTANCES]}),
            metrics={"train_loss": fit.loss, **metrics},
        )

    def _fixed_weights(self, learner: Learner, params: Mapping[str, Tensor], rows: np.ndarray) -> Tensor:
        return torch.tensor([[1 - self.cfg.local_weight, self.cfg.local_weight]]).expand(len(rows), 2)

    def client_model(self, download: Record, state: Record) -> ClientModel:
        """Global + local adapters with the test-time instance-wise weights λ(x)."""
        params = {**download.tensors, **{k: v for k, v in state.tensors.items() if k != INSTANCES}}
        picks = state.tensors[INSTANCES].numpy()
        only_local = Mixture((LOCAL_SLOT,))

        def weights(learner: Learner, p: Mapping[str, Tensor], rows: np.ndarray) -> Tensor:
            with torch.no_grad():
                e_x = learner.pooled(p, rows, mixture=only_local)
                e_i = learner.pooled(p, learner.data.train[picks], mixture=only_local)
                lam = self.cfg.max_weight * F.cosine_similarity(e_x[:, None], e_i[None], dim=-1).mean(1)
            return torch.stack([lam, 1 - lam], dim=1)

        return ClientModel(params, Mixture((DEFAULT_SLOT, LOCAL_SLOT), weights=weights))

    def global_model(self, server: Record, state: Record) -> ClientModel:
        head = {k: v for k, v in state.tensors.items() if k.startswith(HEAD_PREFIX)}
        return ClientModel({**server.tensors, **head})
