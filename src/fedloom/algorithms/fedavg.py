"""The FedAvg family on LoRA with private heads: one mechanism, switched per published method.

Every method here trains locally from the downloaded shared tensors plus the client's private ones,
uploads the shared tensors, and the server takes their sample-weighted mean (algorithms.md §1.2):

    θ̄ = Σ_k n_k / Σ_j n_j · θ_k

| method     | switch                                       | rule (algorithms.md)                         |
|------------|----------------------------------------------|----------------------------------------------|
| fedavg     | —                                            | §1.2 weighted mean; heads private            |
| fedit      | —                                            | §2.1 FedAvg of LoRA factors (the same rule)  |
| fedprox    | ``prox_mu`` = μ                              | §1.4 local loss + μ/2 ‖θ − θᵗ‖² on shared θ  |
| fedavgm    | ``server_momentum`` = β, ``server_lr`` = η_g | §1.3 v ← βv + (θ − θ̄); θ ← θ − η_g v       |
| ffa-lora   | ``shared="B"``, ``frozen="A"``               | §2.2 A fixed at the shared init, B averaged  |
| fedsa-lora | ``shared="A"``                               | §2.5 A averaged, B and head stay local       |
| fedper     | ``personal_layers`` = K_P                    | §1.6 LoRA of the top K_P layers stays local  |

Heads never leave the client in any of them. Every member also takes the run's defences: a robust
server rule (``robust``: trimmed mean, norm bounding) and client-level DP uploads (``privacy``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
from torch import Tensor

from fedloom.algorithms.base import NUM_EXAMPLES, Algorithm, ClientModel, ClientUpdate, LocalContext, Record
from fedloom.algorithms.config import LocalTrainingConfig, PrivacyConfig, RobustConfig
from fedloom.algorithms.participation import participation_rate, sample_size
from fedloom.algorithms.privacy import epsilon, privatize
from fedloom.algorithms.robust import robust_average, robust_problem, robust_report
from fedloom.errors import ConfigError
from fedloom.tasks.learner import HEAD_PREFIX, Learner

MOMENTUM = "momentum."
DP_ROUNDS, DP_RATE = "dp_rounds", "dp_sample_rate"  # server scalars the (ε, δ) accountant reads


@dataclass(frozen=True)
class Sharing:
    """Which adapter tensors are federated, frozen, or kept local."""

    shared: Literal["all", "A", "B"] = "all"
    frozen: Literal["none", "A"] = "none"
    personal_layers: int = 0

    def is_shared(self, key: str, top_layers: set[int]) -> bool:
        if key.startswith(HEAD_PREFIX):
            return False
        if self.personal_layers and _layer_of(key) in top_layers:
            return False
        return self.shared == "all" or f".lora_{self.shared}." in key

    def is_frozen(self, key: str) -> bool:
        return self.frozen == "A" and ".lora_A." in key


class FedAvg(Algorithm):
    name = "fedavg"
    summable = True  # the server step is a function of the weighted mean of the uploads

    def __init__(
        self,
        local: LocalTrainingConfig,
        sharing: Sharing = Sharing(),
        prox_mu: float = 0.0,
        server_momentum: float = 0.0,
        server_lr: float = 1.0,
        nesterov: bool = False,
        name: str | None = None,
        robust: RobustConfig | None = None,
        privacy: PrivacyConfig | None = None,
        participation: tuple[float, int | None] = (1.0, None),
    ) -> None:
        """Every switch defaults to off (plain FedAvg); FedProx, FedAvgM and FedPer set theirs from their configs.

        ``participation``: (fraction, clients per round) of the runtime, for the DP accountant's q.
        """
        super().__init__(local)
        self.robust, self.privacy = robust or RobustConfig(), privacy or PrivacyConfig()
        if self.robust.rule != "mean":
            self.summable = False  # a robust rule needs every client's update
        self.participation = participation
        self.sharing = sharing
        self.prox_mu = prox_mu
        self.server_momentum = server_momentum
        self.server_lr = server_lr
        self.nesterov = nesterov
        if name is not None:
            self.name = name

    # which tensors are shared
    def _split(self, tensors: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        top: set[int] = set()
        if self.sharing.personal_layers:
            layers = sorted({_layer_of(k) for k in tensors if not k.startswith(HEAD_PREFIX)})
            top = set(layers[len(layers) - self.sharing.personal_layers :])
        shared = {k: v for k, v in tensors.items() if self.sharing.is_shared(k, top)}
        return shared, {k: v for k, v in tensors.items() if k not in shared}

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        shared, _ = self._split(shared_init)
        momentum = {MOMENTUM + k: torch.zeros_like(v) for k, v in shared.items()} if self.server_momentum else {}
        rate = participation_rate(*self.participation, len(clients))
        problem = robust_problem(self.robust, sample_size(rate, len(clients)))
        if problem:
            raise ConfigError(problem)
        return Record({**shared, **momentum}, {DP_ROUNDS: 0, DP_RATE: rate} if self.privacy.clip else {})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        shared = {k: v for k, v in server.tensors.items() if not k.startswith(MOMENTUM)}
        return {c: Record(shared) for c in clients}

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        ups = list(uploads.values())
        weights = [float(u.scalars[NUM_EXAMPLES]) for u in ups]
        mean = robust_average(server.tensors, [u.tensors for u in ups], weights, self.robust)
        scalars = dict(server.scalars)
        if self.privacy.clip:
            scalars[DP_ROUNDS] = int(scalars[DP_ROUNDS]) + 1
        if not self.server_momentum and self.server_lr == 1.0:
            return Record({**server.tensors, **mean}, scalars)
        out = dict(server.tensors)
        for key, avg in mean.items():  # §1.3: pseudo-gradient Δ = θ − θ̄, heavy-ball on the server
            delta = server.tensors[key] - avg
            velocity = self.server_momentum * server.tensors.get(MOMENTUM + key, 0.0) + delta
            step = delta + self.server_momentum * velocity if self.nesterov else velocity
            out[key] = server.tensors[key] - self.server_lr * step
            if self.server_momentum:
                out[MOMENTUM + key] = velocity
        return Record(out, scalars)

    def diagnostics(self, before: Record, uploads: Mapping[str, Record], after: Record) -> dict[str, Any]:
        """What the robust rule did this round; with DP on, the client-level ε spent so far at the configured δ."""
        ups = list(uploads.values())
        weights = [float(u.scalars[NUM_EXAMPLES]) for u in ups]
        out: dict[str, Any] = robust_report(before.tensors, [u.tensors for u in ups], weights, self.robust)
        if self.privacy.clip:
            p = self.privacy
            eps = epsilon(p.noise_multiplier, float(after.scalars[DP_RATE]), int(after.scalars[DP_ROUNDS]), p.delta)
            out.update(dp_epsilon=eps, dp_delta=p.delta)
        return out

    # client half
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        _, private = self._split(shared_init)
        return Record({**private, **learner.init_head(generator)})

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        params = self.client_model(download, state).params
        trainable = [k for k in params if not self.sharing.is_frozen(k)]
        anchor = dict(download.tensors)
        regularizer = None
        if self.prox_mu:  # §1.4: μ/2 Σ ‖θ − θᵗ‖² over the shared tensors, on live parameters

            def regularizer(p: Mapping[str, Tensor]) -> Tensor:
                return 0.5 * self.prox_mu * cast(Tensor, sum((p[k] - anchor[k]).pow(2).sum() for k in anchor))

        fit = ctx.learner.fit(params, self.optimization(trainable), self.local.steps, ctx.generator, regularizer)
        shared = {k: fit.params[k] for k in download.tensors}
        if self.privacy.clip:  # released update: clip(Δ) + N(0, (σC)²), before anything leaves the client
            delta = {k: v.detach() - download.tensors[k] for k, v in shared.items()}
            noisy = privatize(delta, self.privacy.clip, self.privacy.noise_multiplier, ctx.generator)
            shared = {k: download.tensors[k] + noisy[k] for k in shared}
        return ClientUpdate(
            upload=Record(shared, {NUM_EXAMPLES: ctx.learner.num_train}),
            state=Record({k: fit.params[k] for k in state.tensors}),
            metrics={"train_loss": fit.loss},
        )

    def client_model(self, download: Record, state: Record) -> ClientModel:
        return ClientModel({**download.tensors, **state.tensors})


def _layer_of(key: str) -> int:
    """Decoder layer index of an adapter key ``model.layers.{i}....``."""
    parts = key.split(".")
    return int(parts[parts.index("layers") + 1])
