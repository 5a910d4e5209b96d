"""The in-process runtime: all clients in one process around one frozen backbone (the default).

The clients' private states live in this process; downloads and uploads still cross a simulated
wire (rounded to the wire dtype), so the numbers are what a deployment would see.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

import torch

from fedloom.algorithms.base import Algorithm, ClientModel, ClientUpdate, LocalContext, Record
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.communication import transmit
from fedloom.runtime.config import FederationConfig, SecureAggregationConfig
from fedloom.runtime.memory import algorithm_state, split_memory, with_memory
from fedloom.runtime.rounds import (
    EVAL_SPLITS,
    TRAINABLE_PARAMS,
    ClientResult,
    Evaluation,
    Runtime,
    SecureRound,
    empty_evaluation,
)
from fedloom.runtime.secure import clipped, weighted_mean
from fedloom.seeding import derive_seed, generator
from fedloom.tasks.intercept import FederationMean, MeanSums
from fedloom.tasks.learner import Learner, OptimizerMemory
from fedloom.tasks.trained import TrainedTensors


class InProcessClients:
    """A client pool of in-process learners; private states are kept here."""

    def __init__(
        self,
        algorithm: Algorithm,
        learners: Mapping[str, Learner],
        seed: int,
        wire: torch.dtype,
        progress: Progress,
        clipping_range: float = SecureAggregationConfig().clipping_range,
    ) -> None:
        self.algorithm, self.learners, self.seed, self.wire, self.progress = (
            algorithm,
            dict(learners),
            seed,
            wire,
            progress,
        )
        self.ids = list(self.learners)
        self.sizes = {s: {c: len(lrn.data.split(s)) for c, lrn in self.learners.items()} for s in EVAL_SPLITS}
        self._states: dict[str, Record] = {}
        self.clipping_range = clipping_range  # of secure-form uploads, as SecAgg+ clips them

    def start(self, shared_init: Mapping[str, torch.Tensor], resume: Mapping[str, Record] | None) -> None:
        if resume is not None:
            self._states = dict(resume)
            return
        self._states = {
            cid: self.algorithm.init_client(shared_init, lrn, generator(self.seed, "init", cid))
            for cid, lrn in self.learners.items()
        }

    def train(self, rnd: int, downloads: Mapping[str, Record]) -> dict[str, ClientResult]:
        out = {}
        advance = self.progress.task(f"round {rnd}: local training", len(downloads))
        for cid, download in downloads.items():
            t0 = time.perf_counter()
            try:
                update = client_round(self.algorithm, self.learners[cid], transmit(download, self.wire),
                                      self._states[cid], self.seed, rnd)  # fmt: skip
            except Exception as exc:  # a failing client is reported, not raised: the round goes on
                out[cid] = ClientResult(failure=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t0)
            else:
                self._states[cid] = update.state
                out[cid] = ClientResult(update.upload, dict(update.metrics), seconds=time.perf_counter() - t0)
            advance(1)
        return out

    def secure_train(self, rnd: int, downloads: Mapping[str, Record]) -> SecureRound:
        """Secure aggregation's arithmetic in process: the weighted mean of the secure-form uploads,
        clipped as SecAgg+ clips them (its unbiased stochastic quantization is left out)."""
        results = self.train(rnd, downloads)
        clip = self.clipping_range
        forms = [clipped(self.algorithm.secure_upload(r.upload), clip) for r in results.values() if r.upload]
        hidden = {c: ClientResult(None, r.metrics, r.failure, r.seconds) for c, r in results.items()}
        return SecureRound(hidden, weighted_mean(forms) if forms else None)

    def evaluate(
        self, rnd: int, server: Record, downloads: Mapping[str, Record], splits: Sequence[str] = EVAL_SPLITS
    ) -> Evaluation:
        out = empty_evaluation(splits=splits)
        for cid, learner in self.learners.items():
            for mode, metrics in evaluate_client(
                self.algorithm, learner, server, downloads[cid], self._states[cid], splits
            ).items():
                for split, values in metrics.items():
                    out.setdefault(mode, {s: {} for s in splits})[split][cid] = values
        return out

    def states(self) -> dict[str, Record]:
        return dict(self._states)

    def mean_sums(self) -> dict[str, MeanSums]:
        return {cid: lrn.mean_sums() for cid, lrn in self.learners.items()}

    def share_federation_mean(self, federation: FederationMean) -> None:
        for lrn in self.learners.values():
            lrn.federation_mean = federation


class InProcessRuntime(Runtime):
    """The round loop over in-process clients."""

    def __init__(
        self,
        algorithm: Algorithm,
        learners: Mapping[str, Learner],
        cfg: FederationConfig,
        seed: int,
        progress: Progress | None = None,
    ) -> None:
        """The intercepts are shrunk (`Runtime`) when the learners' ``head_intercept`` says so."""
        progress = progress or SilentProgress()
        clip = cfg.secure_aggregation.clipping_range
        pool = InProcessClients(algorithm, learners, seed, cfg.wire, progress, clip)
        shrink = any(lrn.head_intercept == "shrunk" for lrn in learners.values())
        super().__init__(algorithm, pool, cfg, seed, progress, shrink)
        self.learners = pool.learners


def client_round(
    algorithm: Algorithm, learner: Learner, download: Record, state: Record, seed: int, rnd: int
) -> ClientUpdate:
    """One client's local work in round ``rnd``, seeded from (seed, round, client) alone, so every
    runtime (in-process, Flower simulation, deployment) computes the same update."""
    cid = learner.client_id
    torch.manual_seed(derive_seed(seed, "torch", rnd, cid))  # dropout masks
    own, memory = split_memory(state)
    learner.memory = OptimizerMemory(memory) if learner.keeps_optimizer else None
    learner.trained = TrainedTensors()
    try:
        update = algorithm.local_update(download, own, LocalContext(learner, rnd, generator(seed, "local", rnd, cid)))
    finally:
        kept, learner.memory = learner.memory, None
        trained, learner.trained = learner.trained, None
    if trained is not None and trained.total:  # what this client's fits updated: seed 000 Table 2's count
        update = replace(update, metrics={**update.metrics, TRAINABLE_PARAMS: float(trained.total)})
    return update if kept is None else replace(update, state=with_memory(update.state, kept.tensors))


ADAPTER_MODE = "adapter"  # evaluation's diagnostics mode: ‖ΔW‖/‖W‖ and the adapter's contribution


def evaluate_client(
    algorithm: Algorithm, learner: Learner, server: Record, download: Record, state: Record,
    splits: Sequence[str] = EVAL_SPLITS,
) -> dict[str, dict[str, dict[str, float]]]:  # fmt: skip
    """mode → split → metrics of one client: its personalized model and, where one exists, the global; and
    under mode ``adapter`` how far the personalized model's adapter moved it (`Learner.adapter_movement`)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    movement: dict[str, dict[str, float]] = {}
    for mode, m in client_models(algorithm, server, download, state).items():
        out[mode] = {}
        for s in splits:
            if mode == "personal" and s == "val":  # the personal model's val predictions serve both
                out[mode][s], movement[s] = learner.evaluate_moved(m.params, s, m.mixture)
            else:
                out[mode][s] = learner.evaluate(m.params, s, m.mixture)
    return out | ({ADAPTER_MODE: movement} if any(movement.values()) else {})


def client_models(algorithm: Algorithm, server: Record, download: Record, state: Record) -> dict[str, ClientModel]:
    """The models a client is evaluated with, by mode: ``personal`` (its own) and, where the method has
    one, ``global`` (the shared model on the client's head)."""
    state = algorithm_state(state)
    models = {"personal": algorithm.client_model(download, state)}
    shared = algorithm.global_model(server, state)
    return models | ({"global": shared} if shared is not None else {})
