"""The in-process runtime: all clients in one process around one frozen backbone.

It owns the loop and nothing else: sampling, seeding, the wire (rounding and byte counts), upload
validation, failures, timing, evaluation and checkpoints. What happens to the tensors is the
algorithm's business.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from fedloom.algorithms.base import Algorithm, ClientUpdate, LocalContext, Record
from fedloom.errors import UploadError
from fedloom.metrics.federated import macro_mean, weighted_mean, worst_quartile_mean
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.checkpoint import Checkpoint, CheckpointStore
from fedloom.runtime.communication import bytes_by_group, transmit, wire_dtype
from fedloom.runtime.sampling import select_clients
from fedloom.runtime.seeding import derive_seed, generator
from fedloom.runtime.validation import validate_upload
from fedloom.tasks.learner import Learner

LOWER_IS_BETTER = ("mse", "mae", "loss")  # every other metric (IC, accuracy, MCC, score...) is higher-better


def higher_is_better(metric: str) -> bool:
    """Direction of a metric name, also for per-task names such as ``gsm8k/loss``."""
    return metric.rsplit("/", 1)[-1] not in LOWER_IS_BETTER


EVAL_SPLITS = ("val", "test")


class FederationConfig(BaseModel):
    """How rounds run."""

    model_config = ConfigDict(extra="forbid")

    fraction: float = Field(1.0, gt=0, le=1, description="fraction of clients sampled each round")
    clients_per_round: int | None = Field(None, ge=1, description="sample this many clients (overrides fraction)")
    min_clients: int = Field(1, ge=1, description="fewest accepted uploads for a round to aggregate")
    eval_every: int = Field(1, ge=1, description="evaluate every N rounds (and always after the last)")
    wire_dtype: Literal["bfloat16", "float32"] = Field("bfloat16", description="dtype of floating tensors on the wire")
    max_update_norm: float | None = Field(None, gt=0, description="reject uploads whose update L2 norm exceeds this")
    checkpoint_every: int = Field(1, ge=0, description="checkpoint every N rounds (0: never)")


@dataclass
class RoundRecord:
    """Everything measured in one round (one line of ``metrics.jsonl``)."""

    round: int
    selected: list[str]
    train: dict[str, dict[str, float]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)
    download_bytes: dict[str, int] = field(default_factory=dict)
    upload_bytes: dict[str, int] = field(default_factory=dict)
    bytes_by_group: dict[str, dict[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    aggregated: bool = True
    diagnostics: dict[str, Any] = field(default_factory=dict)
    evaluation: dict[str, dict[str, dict[str, dict[str, float]]]] | None = None
    summary: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SimulationResult:
    server: Record
    clients: dict[str, Record]
    history: list[RoundRecord]


def summarize(per_mode: Mapping[str, Mapping[str, Mapping[str, Mapping[str, float]]]], sizes: Mapping) -> dict:
    """``{mode}/{split}/{metric}/{macro|weighted|worst25}`` over clients; mode is personal or global."""
    out: dict[str, float] = {}
    for mode, per_split in per_mode.items():
        for split, per_client in per_split.items():
            for m in sorted({m for v in per_client.values() for m in v}):
                values = {c: v[m] for c, v in per_client.items() if m in v}
                key = f"{mode}/{split}/{m}"
                out[f"{key}/macro"] = macro_mean(values)
                out[f"{key}/weighted"] = weighted_mean(values, sizes[split])
                out[f"{key}/worst25"] = worst_quartile_mean(values, higher_is_better(m))
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
        self.sizes = {s: {c: len(lrn.data.split(s)) for c, lrn in learners.items()} for s in EVAL_SPLITS}

    def initial_states(self, shared_init: Mapping[str, torch.Tensor]) -> tuple[Record, dict[str, Record]]:
        server = self.algorithm.init_server(shared_init, list(self.learners))
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
        checkpoints: CheckpointStore | None = None,
        config_digest: str = "",
        resume_from: Checkpoint | None = None,
    ) -> SimulationResult:
        """Rounds ``1..rounds``, or ``resume_from.round + 1..rounds`` continuing a checkpoint exactly."""
        if resume_from is None:
            server, states = self.initial_states(shared_init)
            history: list[RoundRecord] = []
        else:
            server, states = resume_from.server, dict(resume_from.clients)
            history = [RoundRecord(**r) for r in resume_from.history]
        start = len(history) + 1
        advance = self.progress.task(f"{self.algorithm.name}: rounds", rounds - start + 1)
        for rnd in range(start, rounds + 1):
            server, record = self.run_round(rnd, server, states)
            if rnd % self.cfg.eval_every == 0 or rnd == rounds:
                t0 = time.perf_counter()
                record.evaluation = self.evaluate(server, states, rnd)
                record.summary = summarize(record.evaluation, self.sizes)
                record.seconds["evaluate"] = time.perf_counter() - t0
            history.append(record)
            every = self.cfg.checkpoint_every
            if checkpoints is not None and every and (rnd % every == 0 or rnd == rounds):
                checkpoints.save(Checkpoint(rnd, server, states, [r.to_json() for r in history], config_digest))
            if on_round is not None:
                on_round(record)
            advance(1)
        return SimulationResult(server, states, history)

    def sample(self, rnd: int) -> list[str]:
        return select_clients(sorted(self.learners), self.cfg.fraction, self.cfg.clients_per_round, rnd, self.seed)

    def run_round(self, rnd: int, server: Record, states: dict[str, Record]) -> tuple[Record, RoundRecord]:
        """One round: sample, download, local updates, validate, aggregate. Updates ``states`` in place
        and returns the new server state (unchanged when too few uploads are accepted)."""
        start = time.perf_counter()
        selected = self.sample(rnd)
        record = RoundRecord(round=rnd, selected=selected, seconds={"local": 0.0})
        downloads = self.algorithm.configure(server, selected, rnd)
        uploads: dict[str, Record] = {}
        advance = self.progress.task(f"round {rnd}: local training", len(selected))
        for cid in selected:
            update = self._local_update(rnd, cid, downloads[cid], states, record)
            advance(1)
            if update is None:
                continue
            received = transmit(update, self.wire)
            try:
                validate_upload(received, self.algorithm.upload_spec(downloads[cid], cid), downloads[cid],
                                self.cfg.max_update_norm)  # fmt: skip
            except UploadError as exc:  # rejected: logged, never aggregated
                record.rejected[cid] = str(exc)
                continue
            uploads[cid] = received
        t0 = time.perf_counter()
        record.aggregated = len(uploads) >= self.cfg.min_clients
        new_server = self.algorithm.aggregate(server, uploads, rnd) if record.aggregated else server
        record.seconds["aggregate"] = time.perf_counter() - t0
        if record.aggregated:
            record.diagnostics = self.algorithm.diagnostics(server, uploads, new_server)
        # everything but client compute: sampling, downloads, wire, byte counts, validation, aggregation
        record.seconds["server"] = time.perf_counter() - start - record.seconds["local"]
        return new_server, record

    def _local_update(
        self, rnd: int, cid: str, download: Record, states: dict[str, Record], record: RoundRecord
    ) -> Record | None:
        """Run one client; on success store its state and bytes and return its upload."""
        down = bytes_by_group(download, self.wire)
        record.download_bytes[cid] = sum(down.values())
        _accumulate(record.bytes_by_group, "download", down)
        t0 = time.perf_counter()
        try:
            update = client_round(self.algorithm, self.learners[cid], transmit(download, self.wire), states[cid],
                                  self.seed, rnd)  # fmt: skip
        except Exception as exc:  # a failing client is recorded and left out; the round goes on
            record.failures[cid] = f"{type(exc).__name__}: {exc}"
            return None
        finally:
            record.seconds["local"] = record.seconds.get("local", 0.0) + time.perf_counter() - t0
        up = bytes_by_group(update.upload, self.wire)
        record.upload_bytes[cid] = sum(up.values())
        _accumulate(record.bytes_by_group, "upload", up)
        states[cid] = update.state
        record.train[cid] = dict(update.metrics)
        return update.upload

    def evaluate(self, server: Record, states: Mapping[str, Record], rnd: int) -> dict:
        """Personalized (each client's own model) and, where the method has one, global evaluation,
        on every client's validation and test rows."""
        downloads = self.algorithm.configure(server, list(self.learners), rnd)
        out: dict[str, dict[str, dict[str, dict[str, float]]]] = {"personal": {s: {} for s in EVAL_SPLITS}}
        for cid, learner in self.learners.items():
            models = {"personal": self.algorithm.client_model(downloads[cid], states[cid])}
            shared = self.algorithm.global_model(server, states[cid])
            if shared is not None:
                models["global"] = shared
            for mode, model in models.items():
                per_split = out.setdefault(mode, {s: {} for s in EVAL_SPLITS})
                for split in EVAL_SPLITS:
                    per_split[split][cid] = learner.evaluate(model.params, split, model.mixture)
        return out


def client_round(
    algorithm: Algorithm, learner: Learner, download: Record, state: Record, seed: int, rnd: int
) -> ClientUpdate:
    """One client's local work in round ``rnd``, seeded from (seed, round, client) alone, so every
    runtime (in-process, Flower simulation, deployment) computes the same update."""
    cid = learner.client_id
    torch.manual_seed(derive_seed(seed, "torch", rnd, cid))  # dropout masks
    return algorithm.local_update(download, state, LocalContext(learner, rnd, generator(seed, "local", rnd, cid)))


def _accumulate(target: dict[str, dict[str, int]], direction: str, groups: Mapping[str, int]) -> None:
    bucket = target.setdefault(direction, {})
    for group, n in groups.items():
        bucket[group] = bucket.get(group, 0) + n


def mean_train_loss(record: RoundRecord) -> float:
    losses = [m["train_loss"] for m in record.train.values() if "train_loss" in m]
    return float(np.mean(losses)) if losses else float("nan")
