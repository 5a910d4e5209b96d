"""The in-process runtime: all clients in one process around one frozen backbone.

It owns the loop and nothing else: sampling, seeding, the wire (rounding and byte counts), timing,
failures and evaluation. What happens to the tensors is the algorithm's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from fedloom.algorithms.base import Algorithm, LocalContext, Record
from fedloom.metrics.federated import macro_mean, weighted_mean, worst_quartile_mean
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.communication import bytes_by_group, transmit, wire_dtype
from fedloom.runtime.sampling import sample_clients
from fedloom.runtime.seeding import derive_seed, generator
from fedloom.tasks.learner import Learner

HIGHER_IS_BETTER = {"ic": True, "rank_ic": True, "mse": False, "mae": False}


class FederationConfig(BaseModel):
    """How rounds run."""

    model_config = ConfigDict(extra="forbid")

    fraction: float = Field(1.0, gt=0, le=1, description="fraction of clients sampled each round")
    min_clients: int = Field(1, ge=1, description="fewest successful clients for a round to aggregate")
    eval_every: int = Field(1, ge=1, description="evaluate every N rounds (and always after the last)")
    wire_dtype: Literal["bfloat16", "float32"] = Field("bfloat16", description="dtype of floating tensors on the wire")


@dataclass
class RoundRecord:
    """Everything measured in one round (one line of ``metrics.jsonl``)."""

    round: int
    selected: list[str]
    train: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    download_bytes: dict[str, int] = field(default_factory=dict)
    upload_bytes: dict[str, int] = field(default_factory=dict)
    bytes_by_group: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    aggregated: bool = True
    evaluation: dict[str, dict[str, dict[str, float]]] | None = None
    summary: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class SimulationResult:
    server: Record
    clients: dict[str, Record]
    history: list[RoundRecord]


def _evaluate_clients(
    algorithm: Algorithm,
    server: Record,
    states: Mapping[str, Record],
    learners: Mapping[str, Learner],
    round: int,
) -> dict[str, dict[str, dict[str, float]]]:
    """Personalized evaluation: each client's own model on its own validation and test rows."""
    downloads = algorithm.configure(server, list(learners), round)
    out: dict[str, dict[str, dict[str, float]]] = {"val": {}, "test": {}}
    for cid, learner in learners.items():
        params = algorithm.client_model(downloads[cid], states[cid])
        for split in out:
            out[split][cid] = learner.evaluate(params, split)
    return out


def summarize(
    evaluation: Mapping[str, Mapping[str, Mapping[str, float]]], sizes: Mapping[str, dict[str, int]]
) -> dict:
    """``{split}/{metric}/{macro|weighted|worst25}`` over clients."""
    out: dict[str, float] = {}
    for split, per_client in evaluation.items():
        metrics = sorted({m for v in per_client.values() for m in v})
        for m in metrics:
            values = {c: v[m] for c, v in per_client.items() if m in v}
            out[f"{split}/{m}/macro"] = macro_mean(values)
            out[f"{split}/{m}/weighted"] = weighted_mean(values, sizes[split])
            out[f"{split}/{m}/worst25"] = worst_quartile_mean(values, HIGHER_IS_BETTER.get(m, True))
    return out


class InProcessRuntime:
    """Runs an algorithm over in-process clients; the embedded default runtime."""

    def __init__(
        self,
        algorithm: Algorithm,
        learners: Mapping[str, Learner],
        cfg: FederationConfig,
        seed: int,
        progress: Progress | None = None,
    ) -> None:
        self.algorithm = algorithm
        self.learners = dict(learners)
        self.cfg = cfg
        self.seed = seed
        self.wire = wire_dtype(cfg.wire_dtype)
        self.progress = progress or SilentProgress()
        self.sizes = {s: {c: len(lrn.data.split(s)) for c, lrn in learners.items()} for s in ("val", "test")}

    def initial_states(self, shared_init: Mapping[str, torch.Tensor]) -> tuple[Record, dict[str, Record]]:
        server = self.algorithm.init_server(shared_init)
        clients = {
            cid: self.algorithm.init_client(shared_init, lrn, generator(self.seed, "init", cid))
            for cid, lrn in self.learners.items()
        }
        return server, clients

    def run(
        self,
        shared_init: Mapping[str, torch.Tensor],
        rounds: int,
        on_round: Callable[[RoundRecord], None] | None = None,
    ) -> SimulationResult:
        server, states = self.initial_states(shared_init)
        history = []
        advance = self.progress.task(f"{self.algorithm.name}: rounds", rounds)
        for rnd in range(1, rounds + 1):
            server, record = self.run_round(rnd, server, states)
            if rnd % self.cfg.eval_every == 0 or rnd == rounds:
                t0 = time.perf_counter()
                record.evaluation = _evaluate_clients(self.algorithm, server, states, self.learners, rnd)
                record.summary = summarize(record.evaluation, self.sizes)
                record.seconds["evaluate"] = time.perf_counter() - t0
            history.append(record)
            if on_round is not None:
                on_round(record)
            advance(1)
        return SimulationResult(server, states, history)

    def run_round(self, rnd: int, server: Record, states: dict[str, Record]) -> tuple[Record, RoundRecord]:
        """One round: sample, download, local updates, upload, aggregate. Updates ``states`` in place
        and returns the new server state (unchanged when too few clients succeed)."""
        selected = sample_clients(list(self.learners), self.cfg.fraction, rnd, self.seed)
        record = RoundRecord(round=rnd, selected=selected)
        downloads = self.algorithm.configure(server, selected, rnd)
        uploads: dict[str, Record] = {}
        t0 = time.perf_counter()
        advance = self.progress.task(f"round {rnd}: local training", len(selected))
        for cid in selected:
            received = transmit(downloads[cid], self.wire)
            down = bytes_by_group(downloads[cid], self.wire)
            record.download_bytes[cid] = sum(down.values())
            torch.manual_seed(derive_seed(self.seed, "torch", rnd, cid))  # dropout masks
            ctx = LocalContext(self.learners[cid], rnd, generator(self.seed, "local", rnd, cid))
            try:
                update = self.algorithm.local_update(received, states[cid], ctx)
            except Exception as exc:  # a failing client is recorded and left out; the round goes on
                record.failures[cid] = f"{type(exc).__name__}: {exc}"
                advance(1)
                continue
            up = bytes_by_group(update.upload, self.wire)
            record.upload_bytes[cid] = sum(up.values())
            _accumulate(record.bytes_by_group, "download", down)
            _accumulate(record.bytes_by_group, "upload", up)
            states[cid] = update.state
            record.train[cid] = dict(update.metrics)
            uploads[cid] = transmit(update.upload, self.wire)
            advance(1)
        record.seconds["local"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        record.aggregated = len(uploads) >= self.cfg.min_clients
        new_server = self.algorithm.aggregate(server, uploads, rnd) if record.aggregated else server
        record.seconds["aggregate"] = time.perf_counter() - t0
        return new_server, record


def _accumulate(target: dict[str, dict[str, int]], direction: str, groups: Mapping[str, int]) -> None:
    bucket = target.setdefault(direction, {})
    for group, n in groups.items():
        bucket[group] = bucket.get(group, 0) + n


def mean_train_loss(record: RoundRecord) -> float:
    losses = [m["train_loss"] for m in record.train.values() if "train_loss" in m]
    return float(np.mean(losses)) if losses else float("nan")
