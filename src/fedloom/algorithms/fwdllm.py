"""FwdLLM (Xu et al. 2023; algorithms.md §2.10): backprop-free federated tuning with forward gradients.

For every mini-batch b a client draws a perturbation v of the adapter tensors and estimates the
directional derivative by central differences; the gradient estimate is that derivative times v:

    jvp_b = [L(θ + h v) − L(θ − h v)] / (2h),   g_b = jvp_b · v,   G_k = Σ_b g_b

With ``perturbation_sampling`` v is the best of ``candidates`` Gaussian draws by cosine with the
previous global gradient. The server applies θ ← θ − η_t (Σ G_k + cache) / (Σ n_k + cache), with
η_t warmed up then linearly decayed; when the clients' reported variance (between the mean of the
first and second half of their g_b) exceeds ``var_threshold``, the step is reverted and the round's
gradients are cached to pool with the next round's (adaptive number of perturbations).

fedloom mapping: n_k counts mini-batches (G_k sums per-batch mean-loss gradients); the private head
is trained with exact gradients on frozen-model features, which needs no backward pass through the
LLM. Losses are computed in float32 (the spec warns that fp16 central differences are noisy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import cast

import torch
import torch.nn.functional as F
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
from fedloom.algorithms.config import FwdLLMConfig, LocalTrainingConfig
from fedloom.backbone.layout import TensorLayout
from fedloom.tasks.learner import HEAD_PREFIX, Learner

GRAD, CACHE = "grad.", "cache."
VARIANCE, CACHED_N = "variance", "cached_n"


class FwdLLM(Algorithm):
    name = "fwdllm"

    def __init__(self, local: LocalTrainingConfig, cfg: FwdLLMConfig, rounds: int) -> None:
        """``rounds``: the run's length, over which η warms up and decays."""
        super().__init__(local)
        self.cfg, self.rounds = cfg, rounds
        self.warmup = max(1, math.ceil(rounds * cfg.warmup_ratio))

    def learning_rate(self, round: int) -> float:
        """η_t: linear warm-up to η over T_w rounds, then linear decay to 0 at the last round."""
        t = round - 1
        if t < self.warmup:
            return self.cfg.server_lr * (t + 1) / self.warmup
        return self.cfg.server_lr * (self.rounds - t) / max(1, self.rounds - self.warmup)

    # server half
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        grads = {GRAD + k: torch.zeros_like(v) for k, v in shared_init.items()}
        cache = {CACHE + k: torch.zeros_like(v) for k, v in shared_init.items()}
        return Record({**shared_init, **grads, **cache}, {CACHED_N: 0.0})

    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        sent = {k: v for k, v in server.tensors.items() if not k.startswith(CACHE)}
        return {c: Record(sent) for c in clients}

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        """The gradient sums (shaped like the adapter), the batch count and the variance."""
        theta = {k: v for k, v in download.tensors.items() if not k.startswith(GRAD)}
        return UploadSpec(TensorLayout.of(theta), (NUM_EXAMPLES, VARIANCE))

    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        if not uploads:
            return server
        theta = {k: v for k, v in server.tensors.items() if not k.startswith((GRAD, CACHE))}
        total = {k: server.tensors[CACHE + k] + sum(u.tensors[k] for u in uploads.values()) for k in theta}
        n = float(server.scalars[CACHED_N]) + sum(float(u.scalars[NUM_EXAMPLES]) for u in uploads.values())
        variance = max(float(u.scalars[VARIANCE]) for u in uploads.values())
        if self.cfg.var_threshold is not None and variance > self.cfg.var_threshold:  # revert; pool with next round
            cache = {CACHE + k: v for k, v in total.items()}
            return Record({**server.tensors, **cache}, {CACHED_N: n})
        grad = {k: v / n for k, v in total.items()}
        eta = self.learning_rate(round)
        new = {k: theta[k] - eta * grad[k] for k in theta}
        grads = {GRAD + k: v for k, v in grad.items()}
        cache = {CACHE + k: torch.zeros_like(v) for k, v in theta.items()}
        return Record({**new, **grads, **cache}, {CACHED_N: 0.0})

    # client half
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        return Record(learner.init_head(generator))

    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        theta = {k: v for k, v in download.tensors.items() if not k.startswith(GRAD)}
        previous = {k: download.tensors[GRAD + k] for k in theta}
        learner, gen, h = ctx.learner, ctx.generator, self.cfg.h
        fit = learner.fit({**theta, **state.tensors}, self.optimization(list(state.tensors)), self.local.steps, gen)
        head = {k: fit.params[k] for k in state.tensors if k.startswith(HEAD_PREFIX)}
        estimates = []
        with torch.no_grad():
            for rows in learner.batches(
                self.local.steps, gen, self.local.batch_size, length_buckets=self.local.length_buckets
            ):
                v = self._perturbation(previous, gen)
                plus = learner.loss({k: theta[k] + h * v[k] for k in theta} | head, rows)
                minus = learner.loss({k: theta[k] - h * v[k] for k in theta} | head, rows)
                jvp = (plus - minus) / (2 * h)
                estimates.append({k: jvp * v[k] for k in theta})
        total = {k: cast(Tensor, sum(e[k] for e in estimates)) for k in theta}
        return ClientUpdate(
            upload=Record(total, {NUM_EXAMPLES: len(estimates), VARIANCE: half_variance(estimates)}),
            state=Record(head),
            metrics={"train_loss": fit.loss},
        )

    def _perturbation(self, previous: Mapping[str, Tensor], gen: torch.Generator) -> dict[str, Tensor]:
        """A Gaussian direction; with sampling, the candidate best aligned with the previous global gradient."""
        draws = [
            {k: torch.randn(v.shape, generator=gen) for k, v in previous.items()} for _ in range(self.cfg.candidates)
        ]
        if not self.cfg.perturbation_sampling or all(float(v.abs().sum()) == 0 for v in previous.values()):
            return draws[0]
        flat_prev = torch.cat([v.reshape(-1) for v in previous.values()])
        scores = [
            F.cosine_similarity(torch.cat([d[k].reshape(-1) for k in previous]), flat_prev, dim=0) for d in draws
        ]
        return draws[int(torch.stack(scores).argmax())]

    def client_model(self, download: Record, state: Record) -> ClientModel:
        theta = {k: v for k, v in download.tensors.items() if not k.startswith(GRAD)}
        return ClientModel({**theta, **state.tensors})


def half_variance(estimates: Sequence[Mapping[str, Tensor]]) -> float:
    """Mean elementwise variance between the mean of the first and of the second half of the estimates."""
    if len(estimates) < 2:
        return 0.0
    half = len(estimates) // 2
    keys = list(estimates[0])
    first = torch.cat([cast(Tensor, sum(e[k] for e in estimates[:half])).reshape(-1) / half for k in keys])
    second = torch.cat(
        [cast(Tensor, sum(e[k] for e in estimates[half:])).reshape(-1) / (len(estimates) - half) for k in keys]
    )
    return float(torch.stack([first, second]).var(dim=0).mean())
