"""The algorithm protocol every federated method implements, and the record type it trades in.

An algorithm is pure: hyperparameters in the constructor, state passed in and returned as values,
no I/O and no knowledge of the runtime. One round, for both runtimes (in-process and Flower)::

    server state ─configure─► downloads ─► local_update(download, client state, context)
                                         ─► (upload, new client state)
    uploads ─aggregate─► new server state

`Record` (named tensors + scalars) is the currency of downloads, uploads and states; it maps one to
one onto Flower's ArrayRecord + ConfigRecord and onto safetensors + JSON checkpoints.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fedloom.algorithms.config import LocalTrainingConfig
from fedloom.backbone.layout import TensorLayout
from fedloom.tasks.learner import HEAD_PREFIX, SINGLE, Learner, Mixture, Optimization, ParamGroup

Scalar = int | float | str | bool
NUM_EXAMPLES = "num_examples"


@dataclass(frozen=True)
class Record:
    """Named tensors plus scalars: a payload or a state."""

    tensors: Mapping[str, Tensor] = field(default_factory=dict)
    scalars: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True)
class UploadSpec:
    """What a well-formed upload contains: exactly these tensors, and these scalars.

    ``repeated`` admits any number of groups ``<name><int>/<key>`` laid out like ``repeated.layout``
    (FedWeave's per-bucket warmup adapters, whose count only the client knows).
    """

    tensors: TensorLayout
    scalars: tuple[str, ...] = (NUM_EXAMPLES,)
    repeated: tuple[str, TensorLayout] | None = None


@dataclass(frozen=True)
class ClientUpdate:
    """Result of one client's local work: what it sends, what it keeps, and telemetry for the run log."""

    upload: Record
    state: Record
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class ClientModel:
    """A model to evaluate: adapter + head tensors, and how adapter slots are mixed."""

    params: Mapping[str, Tensor]
    mixture: Mixture = SINGLE


@dataclass(frozen=True)
class Heatmap:
    """A [0, 1] matrix a method asks to have drawn: one row per label, columns ``<prefix>0, <prefix>1…``."""

    matrix: Sequence[Sequence[float]]
    rows: Sequence[str]
    column_prefix: str
    column_label: str
    value_label: str
    title: str
    cmap: str = "viridis"


@dataclass(frozen=True)
class RunReport:
    """A method's end-of-run outputs: JSON files (name → content), heatmaps (name → figure) and entries
    for summary.json; the composition layer writes them, so no method does I/O."""

    files: Mapping[str, Any] = field(default_factory=dict)
    heatmaps: Mapping[str, Heatmap] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Audit:
    """What an end-of-run report may read besides the states, never used in training: the learners,
    each client's most common group, the hidden task of every row (instruction data only) and each
    client's most common value of every audit-only column (the synthetic market's planted groups)."""

    learners: Mapping[str, Learner]
    client_groups: Mapping[str, str]
    tasks: np.ndarray | None = None
    client_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # audit column → client → label


@dataclass(frozen=True)
class LocalContext:
    """What a client step may use besides its state: its learner, the round and a seeded generator."""

    learner: Learner
    round: int
    generator: torch.Generator


class Algorithm(ABC):
    """Server and client halves of one federated method."""

    name: str  # each subclass sets it on the class; FedAvg may override it per instance
    communicates: bool = True  # False: the clients share nothing, not even the intercepts' sums (Local-only)

    def __init__(self, local: LocalTrainingConfig) -> None:
        self.local = local

    # server half
    @abstractmethod
    def init_server(self, shared_init: Mapping[str, Tensor], clients: Sequence[str]) -> Record:
        """Initial server state, from the adapter initialization every party derives from the run seed
        and the ids of all clients of the federation."""

    def participants(self, server: Record, sampled: Sequence[str], everyone: Sequence[str]) -> list[str]:
        """Who takes part this round: the runtime's sample, unless the method's stage needs more
        (FedWeave's one-off prototype discovery runs on every client)."""
        return list(sampled)

    @abstractmethod
    def configure(self, server: Record, clients: Sequence[str], round: int) -> dict[str, Record]:
        """The download of each listed client (also what personalized evaluation starts from)."""

    @abstractmethod
    def aggregate(self, server: Record, uploads: Mapping[str, Record], round: int) -> Record:
        """New server state from the uploads of the clients that succeeded this round."""

    # secure aggregation: the server sees only the sample-weighted mean of the uploads
    summable: bool = False  # True where `aggregate_mean` of the secure-form uploads is the whole server step

    def secure_upload(self, upload: Record) -> Record:
        """The client's upload in the form whose sample-weighted mean over clients is all the server
        step needs (the upload itself for FedAvg-like methods)."""
        return upload

    def aggregate_mean(self, server: Record, mean: Record, round: int) -> Record:
        """New server state from the sample-weighted mean of the secure-form uploads; by default the
        ordinary rule on that mean as one upload, which is exact when the rule is a weighted mean."""
        return self.aggregate(server, {"mean": mean}, round)

    def diagnostics(self, before: Record, uploads: Mapping[str, Record], after: Record) -> dict[str, Any]:
        """Server-side per-round diagnostics for the run log (routes, loads, norms...); none by default."""
        return {}

    def final_report(self, server: Record, clients: Mapping[str, Record], audit: Audit) -> RunReport:
        """End-of-run artifacts (RPA's routes, FedWeave's alignment audit); none by default."""
        return RunReport()

    def upload_spec(self, download: Record, client: str) -> UploadSpec:
        """The upload the server accepts from ``client``; by default the downloaded tensors + sample count."""
        return UploadSpec(TensorLayout.of(download.tensors))

    # client half
    @abstractmethod
    def init_client(self, shared_init: Mapping[str, Tensor], learner: Learner, generator: torch.Generator) -> Record:
        """Initial private state of one client (heads, local adapters...)."""

    @abstractmethod
    def local_update(self, download: Record, state: Record, ctx: LocalContext) -> ClientUpdate:
        """Local work of one client: its upload and its new private state."""

    @abstractmethod
    def client_model(self, download: Record, state: Record) -> ClientModel:
        """The client's personalized model for evaluation."""

    def global_model(self, server: Record, state: Record) -> ClientModel | None:
        """The shared model with the client's private head, when it differs from the personalized one.

        None (the default) means the method has no global model, or that it equals the personalized
        model (FedAvg with private heads), so global evaluation would repeat personalized evaluation.
        """
        return None

    # helpers shared by subclasses
    def param_groups(self, keys: Sequence[str]) -> list[ParamGroup]:
        """Adapter tensors at ``lr`` with weight decay, head tensors at ``head_lr``."""
        head = tuple(k for k in keys if k.startswith(HEAD_PREFIX))
        adapter = tuple(k for k in keys if not k.startswith(HEAD_PREFIX))
        groups = [ParamGroup(adapter, self.local.lr, self.local.weight_decay)] if adapter else []
        return groups + ([ParamGroup(head, self.local.head_lr)] if head else [])

    def optimization(self, keys: Sequence[str], extra: Sequence[ParamGroup] = ()) -> Optimization:
        """How ``keys`` train locally: `param_groups` (then ``extra`` groups), the batch size and gradient clip
        of the ``train`` section."""
        groups = [*self.param_groups(keys), *extra]
        return Optimization(groups, self.local.batch_size, self.local.grad_clip, self.local.length_buckets)
