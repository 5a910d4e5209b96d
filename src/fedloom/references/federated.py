"""A neural reference trained federated: the whole small network takes the LoRA adapter's place.

Its tensors are what FedAvg, FedProx, FedAvgM, Ditto, SCAFFOLD and Local-only average, regularize or
keep (`FederatedAlgorithm`); each client keeps a private linear head on the network's last hidden
layer, as the LLM methods keep theirs on the pooled hidden state. The algorithm protocol is
unchanged — only the learner differs: `NetLearner` computes what the head reads with the network
instead of the frozen LM. Methods that need LoRA factors (FLoRA, FedSA-LoRA, RPA…), the backbone or
frozen embeddings do not apply to a network.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call

from fedloom.data.schema import ClientData
from fedloom.errors import ConfigError
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import HEAD_PREFIX, SINGLE, Learner, Mixture
from fedloom.tasks.registry import Task

NET_PREFIX = "net."


def body_of(net: nn.Module) -> tuple[nn.Module, int]:
    """``net`` without its output layer (an identity in its place) and that layer's input width: a
    Sequential's last Linear, or the ``head`` Linear of the sequence encoders."""
    body = copy.deepcopy(net)
    if isinstance(body, nn.Sequential) and isinstance(body[-1], nn.Linear):
        width = body[-1].in_features
        body[-1] = nn.Identity()
        return body, width
    head = getattr(body, "head", None)
    if isinstance(head, nn.Linear):
        body.head = nn.Identity()
        return body, head.in_features
    raise ConfigError(f"{type(net).__name__} has no output Linear to split off as the private head")


def body_tensors(body: nn.Module) -> dict[str, Tensor]:
    """The network's trainable tensors under ``net.``: the shared initialization of every party."""
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in body.modules()):
        raise ConfigError(
            "BatchNorm's running statistics would be client state that no federated rule here averages: "
            "train the federated MLP with references.mlp.norm=layer (or auto)"
        )
    return {NET_PREFIX + k: v.detach().clone() for k, v in body.named_parameters()}


class NetLearner(Learner):
    """One client's rows through the shared network: ``x`` [n, d] its numeric features (every row of
    the table; the client reads its own), the head on the network's [B, width] output."""

    def __init__(
        self,
        body: nn.Module,
        width: int,
        x: Tensor,
        targets: np.ndarray,
        dates: np.ndarray,
        data: ClientData,
        task: Task,
        eval_targets: np.ndarray | None = None,
        eval_batch_size: int = 4096,
        head_seed: int | None = None,
    ) -> None:
        self.body, self.width, self.x = copy.deepcopy(body), width, x
        self.targets = torch.as_tensor(targets, dtype=torch.float32)
        self.eval_targets = (
            self.targets if eval_targets is None else torch.as_tensor(eval_targets, dtype=torch.float32)
        )
        self.dates, self.data, self.task = dates, data, task
        self.eval_batch_size, self.side_channel, self.head_seed = eval_batch_size, None, head_seed
        self.head_start, self.head_input, self.keeps_optimizer = "uniform", "raw", False  # the reference's recipe
        self.head_intercept, self.head_update, self.federation_mean = "local", "adam", None
        self.train_loss = "steps"
        self.memory, self.trained = None, None

    def init_head(self, generator: torch.Generator) -> dict[str, Tensor]:
        if self.head_seed is not None:
            generator = torch.Generator().manual_seed(self.head_seed)
        return self.task.init_head(self.width, generator)

    def pooled(
        self, params: Mapping[str, Tensor], rows: np.ndarray, train: bool = False, mixture: Mixture = SINGLE
    ) -> Tensor:
        """The network's last hidden layer [len(rows), width] under ``params``' ``net.`` tensors."""
        if mixture != SINGLE:
            raise ConfigError("a federated reference has one network: adapter mixtures do not apply")
        self.body.train(train)  # dropout on while training, as in the pooled reference
        net = {k.removeprefix(NET_PREFIX): v for k, v in params.items() if not k.startswith(HEAD_PREFIX)}
        return functional_call(self.body, net, (self.x[torch.as_tensor(rows)],))

    def adapter_movement(
        self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE, adapted: np.ndarray | None = None
    ) -> dict[str, float]:
        """A reference's network is trained whole: there is no frozen model and no adapter to measure."""
        return {}

    @torch.no_grad()
    def predict(self, params: Mapping[str, Tensor], split: str, mixture: Mixture = SINGLE) -> np.ndarray:
        task = self.task
        if isinstance(task, GenerationTask):
            raise TypeError(f"client {self.client_id}: a text task has no head to predict with")
        rows, head = self.data.split(split), params_head(params)
        size = self.eval_batch_size
        out = [task.predict(head, self.pooled(params, rows[i : i + size])) for i in range(0, len(rows), size)]
        return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.float32)

    def batches(
        self, steps: int, generator: torch.Generator, batch_size: int, rows: np.ndarray | None = None,
        length_buckets: bool = False,
    ) -> list[np.ndarray]:  # fmt: skip
        """As the LM learner's, without length buckets: every row of a table is as long as the next."""
        return super().batches(steps, generator, batch_size, rows, length_buckets=False)


def params_head(params: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """The private head's tensors of a client's parameters (the network's ``net.`` ones left out)."""
    return {k: v for k, v in params.items() if k.startswith(HEAD_PREFIX)}
