"""The workspace of a run: backbone → data → tokens → frozen features → one learner per client.

It depends on the data and adapter configuration but not on the method, so several methods run in
one process on one workspace, and a Flower node builds the same one from the run's configuration.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from fedloom.algorithms.base import Audit
from fedloom.backbone.features import FrozenFeatures, Ragged, cached_features, cached_ragged
from fedloom.backbone.loading import load_backbone
from fedloom.backbone.model import AdaptedLM
from fedloom.backbone.peft_io import import_peft
from fedloom.data.partition import client_views, configured_partition
from fedloom.data.prompts import tokenize_instructions, tokenize_prompts, uses_numeric_side_channel
from fedloom.data.registry import Table, load_dataset
from fedloom.data.schema import ClientData, SampleTable, TextTable
from fedloom.data.splits import table_splits
from fedloom.errors import ConfigError
from fedloom.metrics.heterogeneity import heterogeneity_scores
from fedloom.paths import cache_root
from fedloom.progress import Progress, SilentProgress
from fedloom.runs.config import RunConfig
from fedloom.seeding import derive_seed, generator
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner
from fedloom.tasks.registry import make_task
from fedloom.tasks.side_channel import SideChannel


@dataclass
class Workspace:
    """Everything method-independent: one backbone, one feature cache, one learner per client
    (a federated reference has no backbone: ``lm`` None, its network in the learners)."""

    lm: AdaptedLM | None
    table: Table
    learners: dict[str, Learner]
    shared_init: dict[str, Tensor]
    setup_seconds: dict[str, float]

    def audit(self) -> Audit:
        """What end-of-run reports may read: learners, each client's group, hidden tasks (text data)."""
        tasks = self.table.frame[self.table.group_column].to_numpy(str) if self.table.is_text else None
        labels = {column: majority(self, column) for column in self.table.audit_columns}
        return Audit(self.learners, client_groups(self), tasks, labels)


def load_adapted(cfg: RunConfig) -> AdaptedLM:
    """The frozen backbone with the configured adapter layout (what a Flower server needs, no data)."""
    backbone = load_backbone(cfg.backbone, cfg.model.dtype, cfg.model.device)
    return AdaptedLM(backbone, cfg.adapter.spec(backbone.num_layers))


def shared_init(cfg: RunConfig, lm: AdaptedLM) -> dict[str, Tensor]:
    """The adapter initialization every party derives from the run seed alone, or reads from the
    PEFT adapter ``adapter.init_from`` (every party needs the same directory)."""
    if cfg.adapter.init_from is not None:
        return import_peft(Path(cfg.adapter.init_from).expanduser(), lm.layout)
    return lm.layout.init_slot(generator(cfg.seed, "adapter-init"))


def prepare_workspace(cfg: RunConfig, progress: Progress | None = None) -> Workspace:
    progress = progress or SilentProgress()
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    done = progress.task(f"loading {cfg.backbone} (the first use of a GGUF model converts it once)", 1)
    lm = load_adapted(cfg)
    done(1)
    seconds["backbone"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    table = load_dataset(cfg.dataset, cfg.data)
    tokens, text_task = _tokens(cfg, table, lm)
    seconds["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    features = cached_features(
        lm,
        tokens,
        cache_root() / "features" if cfg.data.feature_cache else None,
        batch_size=cfg.model.feature_batch_size,
        progress=progress.task("frozen features (once per dataset)", len(tokens)) if lm.start_layer else None,
    )
    seconds["features"] = time.perf_counter() - t0

    learners = {c.client_id: _learner(cfg, table, lm, features, c, text_task) for c in data_owners(cfg, table)}
    return Workspace(lm, table, learners, shared_init(cfg, lm), seconds)


def data_owners(cfg: RunConfig, table: Table) -> list[ClientData]:
    """The clients of a run: the configured partition of ``table``, each cut by the table's split."""
    splits = table_splits(table, cfg.data.split)
    return client_views(configured_partition(table, cfg.data, splits["train"]), splits)


def _tokens(cfg: RunConfig, table: Table, lm: AdaptedLM) -> tuple[Ragged, GenerationTask | None]:
    """Token ids of every row, cached by content; for instruction data prompt + response, and the one
    generation task all clients share (the rows' tasks, references and where generation starts)."""
    tokenizer, cache = lm.backbone.tokenizer, cache_root() / "tokens" if cfg.data.feature_cache else None
    key = token_key(table, lm.backbone.identity, cfg)
    if isinstance(table, SampleTable):
        samples = table
        return cached_ragged(cache, key, lambda: tokenize_prompts(samples, tokenizer, cfg.data.prompt)), None
    assert isinstance(table, TextTable)
    text, limit = table, cfg.data.prompt.max_tokens
    both = functools.cache(lambda: tokenize_instructions(text, tokenizer, limit))  # once, on a cache miss
    prompts = cached_ragged(cache, key + "|prompts", lambda: both()[0])
    responses = cached_ragged(cache, key + "|responses", lambda: both()[1])
    rows = [torch.cat([prompts.row(i), responses.row(i)]) for i in range(len(table))]
    task = GenerationTask.of(table, prompts.lengths, cfg.generation.max_new_tokens)
    return Ragged.from_rows(rows, torch.int64), task


def _learner(
    cfg: RunConfig, table: Table, lm: AdaptedLM, features: FrozenFeatures, client: ClientData,
    text_task: GenerationTask | None,
) -> Learner:  # fmt: skip
    """One client's learner: its rows, the task its targets define and, if configured, its numeric inputs."""
    head_seed = derive_seed(cfg.seed, "head") if cfg.train.head_init == "shared" else None
    keeps = cfg.train.optimizer_state == "keep"
    if text_task is not None:
        none = np.zeros(len(table), dtype=np.float32)
        return Learner(lm, features, none, none.astype("datetime64[D]"), client, text_task,
                       keeps_optimizer=keeps, train_loss=cfg.train.train_loss)  # fmt: skip
    assert isinstance(table, SampleTable)
    numeric = None
    if uses_numeric_side_channel(cfg.data.prompt):
        if not table.covariates:
            raise ConfigError(f"prompt.inputs=text+numeric needs covariates; dataset {table.name!r} has none")
        numeric = table.frame[list(table.covariates)].to_numpy(np.float64)
    return Learner(
        lm,
        features,
        table.targets,
        table.dates,
        client,
        task=make_task(table.task_kind, table.targets[client.train], table.num_classes),
        eval_targets=table.frame["return"].to_numpy(np.float32) if table.task_kind == "ranking" else None,
        side_channel=None if numeric is None else SideChannel.fitted(numeric, client.train),
        head_seed=head_seed,
        head_start=cfg.train.head_start,
        head_input=cfg.train.head_input,
        head_intercept=cfg.train.head_intercept,
        head_update=cfg.train.head_update,
        step_alpha=cfg.train.step_alpha,
        alpha_choice=cfg.train.alpha_choice,
        train_loss=cfg.train.train_loss,
        keeps_optimizer=keeps,
    )


def token_key(table: Table, backbone: str, cfg: RunConfig) -> str:
    """Identity of a dataset's token ids: the rows' content, the tokenizer and the prompt settings."""
    content = pd.util.hash_pandas_object(table.frame.astype(str), index=False).to_numpy()
    digest = hashlib.sha256(content.tobytes()).hexdigest()
    return f"{backbone}|{cfg.data.prompt.model_dump_json()}|{table.name}|{digest}"


def client_groups(ws: Workspace) -> dict[str, str]:
    """Each client's most common group (its sector, or its main task) — the label of report rows."""
    return majority(ws, ws.table.group_column)


def majority(ws: Workspace, column: str) -> dict[str, str]:
    """Each client's most common value of ``column`` over its training rows."""
    groups = ws.table.frame[column].astype(str).to_numpy()
    out = {}
    for cid, learner in ws.learners.items():
        values, counts = np.unique(groups[learner.data.train], return_counts=True)
        out[cid] = str(values[np.argmax(counts)])
    return out


def client_heterogeneity(ws: Workspace) -> dict[str, float]:
    """Seed 000 eq. 26 per client, from its training targets and covariates (financial tables only)."""
    table = ws.table
    if not isinstance(table, SampleTable) or not table.covariates:
        return {}
    covariates = table.frame[list(table.covariates)].to_numpy(float)
    targets = {c: table.targets[lrn.data.train] for c, lrn in ws.learners.items()}
    bins = None if table.task_kind == "classification" else 10
    return heterogeneity_scores(targets, {c: covariates[lrn.data.train] for c, lrn in ws.learners.items()}, bins)
