"""The round loop every runtime shares, and the client pool it drives.

The loop owns what happens on the server: sampling, downloads, byte counts, upload validation,
failures, aggregation, timing, evaluation and checkpoints. Where client work happens is the pool's
business: in this process (`fedloom.runtime.simulation`) or on Flower nodes
(`fedloom.runtime.flower`). What happens to the tensors is the algorithm's business.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from fedloom.algorithms.base import Algorithm, Record
from fedloom.algorithms.participation import participation_rate, sample_size
from fedloom.errors import ConfigError, UploadError
from fedloom.metrics.federated import higher_is_better, macro_mean, weighted_mean, worst_quartile_mean
from fedloom.progress import Progress, SilentProgress
from fedloom.runtime.checkpoint import Checkpoint, CheckpointStore
from fedloom.runtime.communication import bytes_by_group, transmit
from fedloom.runtime.config import FederationConfig
from fedloom.runtime.sampling import select_clients
from fedloom.runtime.secure import masked_bytes
from fedloom.runtime.validation import validate_upload
from fedloom.tasks.intercept import FederationMean, MeanSums

EVAL_SPLITS = ("val", "test")
Evaluation = dict[str, dict[str, dict[str, dict[str, float]]]]  # mode → split → client → metric → value


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
    evaluation: Evaluation | None = None
    summary: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SimulationResult:
    """Final server state, the client states the runtime holds (none on Flower) and the round log."""

    server: Record
    clients: dict[str, Record]
    history: list[RoundRecord]


@dataclass(frozen=True)
class ClientResult:
    """What came back from one client: its upload as received, or why there is none."""

    upload: Record | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    failure: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class SecureRound:
    """A round under secure aggregation: each client's metrics or failure (no individual uploads)
    and the sample-weighted mean of the secure-form uploads, None if the protocol did not finish."""

    clients: dict[str, ClientResult]
    mean: Record | None


class ClientPool(Protocol):
    """Where client work happens. Downloads and uploads cross the wire inside the pool."""

    ids: list[str]
    sizes: dict[str, dict[str, int]]  # split → client → rows (for weighted summaries)

    def start(self, shared_init: Mapping[str, torch.Tensor], resume: Mapping[str, Record] | None) -> None:
        """Initialize (or, on resume, restore) every client's private state."""

    def train(self, rnd: int, downloads: Mapping[str, Record]) -> dict[str, ClientResult]:
        """Local work of the clients in ``downloads``; one result per client."""

    def secure_train(self, rnd: int, downloads: Mapping[str, Record]) -> SecureRound:
        """`train` under secure aggregation: the server gets only the weighted mean of the uploads."""

    def evaluate(
        self, rnd: int, server: Record, downloads: Mapping[str, Record], splits: Sequence[str] = EVAL_SPLITS
    ) -> Evaluation:
        """Personalized (and, where the method has one, global) metrics of every client on ``splits``."""

    def states(self) -> dict[str, Record]:
        """The private states this pool holds for checkpoints (none where nodes keep their own)."""

    def mean_sums(self) -> dict[str, MeanSums]:
        """Each reachable client's five sums of its training mean (``train.head_intercept: shrunk``)."""

    def share_federation_mean(self, federation: FederationMean) -> None:
        """Give every client the federation's (μ, τ²) before its head starts."""


def summarize(per_mode: Evaluation, sizes: Mapping[str, Mapping[str, int]]) -> dict[str, float]:
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


def quorum_problem(cfg: FederationConfig, num_clients: int) -> str | None:
    """Why ``min_clients`` can never be met with ``num_clients`` clients and this sampling, if it cannot."""
    per_round = sample_size(participation_rate(cfg.fraction, cfg.clients_per_round, num_clients), num_clients)
    if cfg.min_clients > num_clients:
        return (f"federation.min_clients={cfg.min_clients}, but the partition has only {num_clients} clients: "
                "no round could aggregate; lower min_clients")  # fmt: skip
    if cfg.min_clients > per_round:
        return (f"federation.min_clients={cfg.min_clients}, but each round samples {per_round} of {num_clients} "
                "clients (federation.fraction / clients_per_round): no round could aggregate")  # fmt: skip
    return None


class Runtime:
    """Runs an algorithm's rounds over a client pool."""

    def __init__(
        self,
        algorithm: Algorithm,
        pool: ClientPool,
        cfg: FederationConfig,
        seed: int,
        progress: Progress | None = None,
        shrink_intercepts: bool = False,
    ) -> None:
        """``shrink_intercepts``: before round 1 the clients' heads get the federation's mean of their training
        means (``train.head_intercept: shrunk``, `fedloom.tasks.intercept`)."""
        self.algorithm, self.pool, self.cfg, self.seed = algorithm, pool, cfg, seed
        self.shrink_intercepts = shrink_intercepts
        self.secure = cfg.secure_aggregation.enabled
        if self.secure and not algorithm.summable:
            raise ConfigError(
                f"{algorithm.name} cannot run with secure aggregation: its server step needs each client's "
                "upload, not only their weighted sum (README: secure aggregation lists the methods that can)"
            )
        if self.secure and cfg.max_update_norm is not None:
            raise ConfigError(
                "federation.max_update_norm checks each upload, which secure aggregation hides; "
                "bound the updates on the clients instead (privacy.clip)"
            )
        problem = quorum_problem(cfg, len(pool.ids))
        if problem:
            raise ConfigError(problem)
        self.wire = cfg.wire
        # with test_rounds=chosen the caller evaluates the test split of the chosen and last rounds afterwards
        self.round_splits = EVAL_SPLITS if cfg.test_rounds == "all" else ("val",)
        self.progress = progress or SilentProgress()

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
            server = self.algorithm.init_server(shared_init, self.pool.ids)
            history: list[RoundRecord] = []
        else:
            server = resume_from.server
            history = [RoundRecord(**r) for r in resume_from.history]
        # before any head starts; again on resume (a node may start its client's head in any round), but
        # counted once, in round 1, so that a resumed run's log is the uninterrupted one's
        setup = self.share_federation_mean() if self.shrink_intercepts else None
        setup = setup if resume_from is None else None
        self.pool.start(shared_init, None if resume_from is None else resume_from.clients)
        start = len(history) + 1
        advance = self.progress.task(f"{self.algorithm.name}: rounds", rounds - start + 1)
        for rnd in range(start, rounds + 1):
            server, record = self.run_round(rnd, server)
            if setup is not None:  # the exchange's cost and result go into the first round's record
                setup(record)
                setup = None
            if rnd % self.cfg.eval_every == 0 or rnd == rounds:
                t0 = time.perf_counter()
                record.evaluation = self.evaluate(server, rnd, self.round_splits)
                record.summary = summarize(record.evaluation, self.pool.sizes)
                record.seconds["evaluate"] = time.perf_counter() - t0
            history.append(record)
            every = self.cfg.checkpoint_every
            if checkpoints is not None and every and (rnd % every == 0 or rnd == rounds):
                states = self.pool.states()
                checkpoints.save(Checkpoint(rnd, server, states, [r.to_json() for r in history], config_digest))
            if on_round is not None:
                on_round(record)
            advance(1)
        return SimulationResult(server, self.pool.states(), history)

    def share_federation_mean(self) -> Callable[[RoundRecord], None]:
        """Collect the clients' `MeanSums`, add them (a sum: secure aggregation would pass it unchanged),
        share (μ, τ²) with every client; returns what records the exchange in the first round's record. A
        method whose clients share nothing (Local-only) exchanges nothing: its clients keep their own means."""
        if not self.algorithm.communicates:  # τ² = ∞, no information: every client keeps its own mean
            self.pool.share_federation_mean(FederationMean(0.0, math.inf))
            return lambda rec: None
        sums = self.pool.mean_sums()
        federation = sum(sums.values(), MeanSums()).federation_mean()
        self.pool.share_federation_mean(federation)
        up, down = len(MeanSums().as_tuple()) * 8, 2 * 8  # float64 numbers

        def record(rec: RoundRecord) -> None:
            for cid in sums:
                rec.upload_bytes[cid] = rec.upload_bytes.get(cid, 0) + up
                rec.download_bytes[cid] = rec.download_bytes.get(cid, 0) + down
            _accumulate(rec.bytes_by_group, "upload", {"mean_sums": up * len(sums)})
            _accumulate(rec.bytes_by_group, "download", {"federation_mean": down * len(sums)})
            tau2 = None if math.isinf(federation.tau2) else federation.tau2  # JSON has no inf
            rec.diagnostics |= {"federation_mean/mean": federation.mean, "federation_mean/tau2": tau2,
                                "federation_mean/clients": len(sums)}  # fmt: skip

        return record

    def sample(self, rnd: int) -> list[str]:
        return select_clients(sorted(self.pool.ids), self.cfg.fraction, self.cfg.clients_per_round, rnd, self.seed)

    def run_round(self, rnd: int, server: Record) -> tuple[Record, RoundRecord]:
        """One round: sample, download, local updates, validate, aggregate. Returns the new server
        state (unchanged when too few uploads are accepted) and the round's record."""
        start = time.perf_counter()
        selected = self.algorithm.participants(server, self.sample(rnd), sorted(self.pool.ids))
        record = RoundRecord(round=rnd, selected=selected, seconds={"local": 0.0})
        downloads = self.algorithm.configure(server, selected, rnd)
        for cid in selected:
            down = bytes_by_group(downloads[cid], self.wire)
            record.download_bytes[cid] = sum(down.values())
            _accumulate(record.bytes_by_group, "download", down)
        t0 = time.perf_counter()
        sent = {c: downloads[c] for c in selected}
        secure = self.pool.secure_train(rnd, sent) if self.secure else None
        results = secure.clients if secure is not None else self.pool.train(rnd, sent)
        record.seconds["local"] = time.perf_counter() - t0
        record.seconds["client_compute"] = sum(r.seconds for r in results.values())
        for cid in selected:  # a failing client is recorded and left out; the round goes on
            result = results.get(cid, ClientResult(failure="no reply"))
            if result.failure is not None or (result.upload is None and secure is None):
                record.failures[cid] = result.failure or "no upload"
            else:
                record.train[cid] = {**result.metrics, "seconds": result.seconds}
        t0 = time.perf_counter()
        if secure is not None:
            new_server = self._aggregate_secure(server, secure.mean, record, rnd)
        else:
            new_server = self._aggregate(server, results, downloads, record, rnd)
        record.seconds["aggregate"] = time.perf_counter() - t0
        # everything but client work: sampling, downloads, byte counts, validation, aggregation
        record.seconds["server"] = time.perf_counter() - start - record.seconds["local"]
        return new_server, record

    def _aggregate(
        self, server: Record, results: Mapping[str, ClientResult], downloads: Mapping[str, Record],
        record: RoundRecord, rnd: int,
    ) -> Record:  # fmt: skip
        """Count, validate and aggregate the uploads of the clients in ``record.train``."""
        uploads = {}
        for cid in record.train:
            upload = results[cid].upload
            assert upload is not None  # record.train holds the clients that uploaded
            up = bytes_by_group(upload, self.wire)
            record.upload_bytes[cid] = sum(up.values())
            _accumulate(record.bytes_by_group, "upload", up)
            received = transmit(upload, self.wire)  # idempotent where the pool already rounded
            try:
                validate_upload(received, self.algorithm.upload_spec(downloads[cid], cid), downloads[cid],
                                self.cfg.max_update_norm)  # fmt: skip
            except UploadError as exc:  # rejected: logged, never aggregated
                record.rejected[cid] = str(exc)
                continue
            uploads[cid] = received
        record.aggregated = len(uploads) >= self.cfg.min_clients
        if not record.aggregated:
            return server
        new_server = self.algorithm.aggregate(server, uploads, rnd)
        record.diagnostics = self.algorithm.diagnostics(server, uploads, new_server)
        return new_server

    def _aggregate_secure(self, server: Record, mean: Record | None, record: RoundRecord, rnd: int) -> Record:
        """The server step from the securely aggregated mean; each contributor sent masked entries."""
        if mean is not None:
            masked = masked_bytes(mean)
            for cid in record.train:
                record.upload_bytes[cid] = masked
                _accumulate(record.bytes_by_group, "upload", {"masked": masked})
            if not all(bool(torch.isfinite(t).all()) for t in mean.tensors.values()):
                record.rejected["mean"], mean = "the securely aggregated mean is not finite", None
        record.aggregated = mean is not None and len(record.train) >= self.cfg.min_clients
        if mean is None or not record.aggregated:
            return server
        new_server = self.algorithm.aggregate_mean(server, mean, rnd)
        record.diagnostics = self.algorithm.diagnostics(server, {}, new_server)  # no individual uploads
        return new_server

    def evaluate(self, server: Record, rnd: int, splits: Sequence[str] = EVAL_SPLITS) -> Evaluation:
        """Personalized and, where the method has one, global evaluation on every client's ``splits`` rows."""
        return self.pool.evaluate(rnd, server, self.algorithm.configure(server, self.pool.ids, rnd), splits)


def empty_evaluation(modes: Sequence[str] = ("personal",), splits: Sequence[str] = EVAL_SPLITS) -> Evaluation:
    return {mode: {s: {} for s in splits} for mode in modes}


def _accumulate(target: dict[str, dict[str, int]], direction: str, groups: Mapping[str, int]) -> None:
    bucket = target.setdefault(direction, {})
    for group, n in groups.items():
        bucket[group] = bucket.get(group, 0) + n


TRAINABLE_PARAMS = "trainable_params"  # a round's train metric: elements of the tensors a client trained


def mean_train_loss(record: RoundRecord) -> float:
    losses = [m["train_loss"] for m in record.train.values() if "train_loss" in m]
    return float(np.mean(losses)) if losses else float("nan")
