"""A structured reference as a run: the same run directory as a federated method (config.yaml,
env.json, metrics.jsonl with one record, summary.json, daily.csv, portfolio, regimes, report.md), so
tables, bootstraps, suites and reports treat references and LLM methods alike.

A reference trains once: its "round 1" is the fitted model, evaluated like a method's personalized
models (each client's validation and test rows scored by the pooled model, or by its own)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from fedloom.algorithms.base import Record
from fedloom.data.registry import load_dataset
from fedloom.data.schema import ClientData, SampleTable
from fedloom.errors import ConfigError
from fedloom.progress import Progress
from fedloom.references.base import Objective, filled
from fedloom.references.federated import NetLearner, body_of, body_tensors
from fedloom.references.neural import NeuralReference
from fedloom.references.registry import REFERENCES
from fedloom.references.training import fit_and_score
from fedloom.runs.baseline import SPLITS, Owner, constant_baseline
from fedloom.runs.config import RunConfig
from fedloom.runs.outputs import finish_run, prediction_outputs, record_outputs
from fedloom.runs.rundir import RunDirectory
from fedloom.runs.summary import build_summary
from fedloom.runs.workspace import Workspace, data_owners
from fedloom.runtime.rounds import Evaluation, RoundRecord, SimulationResult, mean_train_loss, summarize
from fedloom.seeding import derive_seed, generator
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner
from fedloom.tasks.registry import make_task
from fedloom.tasks.regression import RegressionTask

EVALUATED = ("val", "test")


def reference_table(cfg: RunConfig) -> SampleTable:
    """The financial table a reference trains on; text data and tables without numeric features are refused."""
    table = load_dataset(cfg.dataset, cfg.data)
    if not isinstance(table, SampleTable):
        raise ConfigError(f"reference {cfg.method!r} needs a financial table; {cfg.dataset!r} is a text dataset")
    if not table.covariates:
        raise ConfigError(f"reference {cfg.method!r}: dataset {cfg.dataset!r} has no numeric features to train on")
    return table


def reference_owners(table: SampleTable, clients: list[ClientData], eval_targets: np.ndarray) -> list[Owner]:
    """The clients as the constant baseline sees them, each scored by its task on its own rows."""
    owners = []
    for c in clients:
        task = make_task(table.task_kind, table.targets[c.train], table.num_classes)
        assert not isinstance(task, GenerationTask)  # a SampleTable's task

        def score(predictions: np.ndarray, split: str, c: ClientData = c, task: Any = task) -> dict[str, float]:
            rows = c.split(split)
            return task.evaluate(predictions, eval_targets[rows], table.dates[rows])

        owners.append(Owner(c.client_id, task, table.targets[c.train], {s: len(c.split(s)) for s in SPLITS}, score))
    return owners


def reference_train_losses(
    owners: list[Owner], clients: list[ClientData], scores: np.ndarray
) -> dict[str, dict[str, float]]:
    """Each client's loss on its own training rows in the LLM rows' units: ½·MSE of the standardized targets
    (`RegressionTask.loss`; ranking targets are standardized already), what "train loss const" is the
    constant's. Classification references predict classes, not probabilities: no cross-entropy, no entry."""
    out = {}
    for c, owner in zip(clients, owners, strict=True):
        if isinstance(owner.task, RegressionTask) and len(c.train):
            residual = (scores[c.train] - owner.train_targets) / owner.task.target_std
            out[c.client_id] = {"train_loss": float(0.5 * np.mean(residual.astype(np.float64) ** 2))}
    return out


def evaluate_scores(owners: list[Owner], clients: list[ClientData], scores: np.ndarray) -> Evaluation:
    """``personal`` → split → client → the task's metrics of its scored rows (what a method's round logs)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for split in EVALUATED:
        for c, owner in zip(clients, owners, strict=True):
            rows = c.split(split)
            if len(rows):
                out.setdefault(split, {})[c.client_id] = owner.score(scores[rows], split)
    return {"personal": out}


def federated_workspace(cfg: RunConfig) -> Workspace:
    """A federated reference's workspace: its network (initialized from the run seed, as every party's
    adapter is) without the output layer as the shared tensors, and one `NetLearner` per client."""
    t0 = time.perf_counter()
    table = reference_table(cfg)
    objective = _objective(table)
    reference = REFERENCES[cfg.method].build(cfg.references, objective, table.covariates, cfg.seed)
    if not isinstance(reference, NeuralReference) or reference.schedule.sampling == "days":
        row_wise = ", ".join(n for n, r in REFERENCES.items() if r.reads in ("rows", "series") and n != "gat")
        raise ConfigError(f"references.mode=federated trains a network that scores one row at a time ({row_wise} "
                          f"— {cfg.method} is not one); use pooled or local")  # fmt: skip
    outputs = objective.num_classes if objective.classes else 1
    body, width = body_of(reference.network(len(table.covariates), outputs, generator(cfg.seed, "adapter-init")))
    x = torch.from_numpy(filled(table.frame[list(table.covariates)].to_numpy(np.float32)))
    eval_targets = table.frame["return"].to_numpy(np.float32) if table.task_kind == "ranking" else None
    head_seed = derive_seed(cfg.seed, "head") if cfg.train.head_init == "shared" else None
    learners: dict[str, Learner] = {}
    for c in data_owners(cfg, table):
        task = make_task(table.task_kind, table.targets[c.train], table.num_classes)
        learners[c.client_id] = NetLearner(body, width, x, table.targets, table.dates, c, task, eval_targets,
                                           head_seed=head_seed)  # fmt: skip
    return Workspace(None, table, learners, body_tensors(body), {"data": time.perf_counter() - t0})


def reference_inputs(
    cfg: RunConfig, table: SampleTable, progress: Progress | None = None
) -> tuple[list[str], np.ndarray]:
    """The columns a one-pass reference reads and their names: the table's covariates, and for the ridge
    probe (``references.ridge_probe.inputs``: state / both) the frozen LLM's pooled state of every row."""
    covariates = table.frame[list(table.covariates)].to_numpy(np.float32)
    inputs = cfg.references.ridge_probe.inputs if cfg.method == "ridge-probe" else "covariates"
    if inputs == "covariates":
        return list(table.covariates), covariates
    state = frozen_state(cfg, table, progress)
    names = [f"state_{i}" for i in range(state.shape[1])]
    if inputs == "state":
        return names, state
    return [*table.covariates, *names], np.concatenate([covariates, state], axis=1)


def frozen_state(cfg: RunConfig, table: SampleTable, progress: Progress | None = None) -> np.ndarray:
    """[len(table), H]: the frozen backbone's mean-pooled final hidden state of every row's prompt (eq. 5
    without adapters: what an LLM row's head reads at round 0) — the feature cache's frozen embedding,
    computed once per dataset and backbone and shared with every probe and router that reads it."""
    from fedloom.runs.workspace import prepare_workspace

    ws = prepare_workspace(cfg, progress)
    if len(ws.table) != len(table):
        raise ConfigError(
            f"{cfg.dataset}: the workspace's table has {len(ws.table)} rows, the reference's {len(table)}"
        )
    return next(iter(ws.learners.values())).features.embedding.numpy().astype(np.float32, copy=False)


def _objective(table: SampleTable) -> Objective:
    if table.task_kind == "classification":
        return Objective("classification", table.num_classes or 2)
    return Objective("regression")


def run_reference(cfg: RunConfig, out: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Fit ``cfg.method`` (a reference, pooled or local) on ``cfg.dataset``'s clients in one pass and
    write its run directory (trained round by round, ``references.mode=federated`` is a run of its own
    kind: `fedloom.runs.kinds`)."""
    t0 = time.perf_counter()
    table = reference_table(cfg)
    clients = data_owners(cfg, table)
    frame, options = table.frame, cfg.references
    features, x = reference_inputs(cfg, table, progress)
    setup = time.perf_counter() - t0
    objective = _objective(table)
    t0 = time.perf_counter()
    scores, fit_info = fit_and_score(cfg.method, options, objective, features, x, table.targets,
                                     table.dates, clients, cfg.seed, progress)  # fmt: skip
    wall = time.perf_counter() - t0
    eval_targets = frame["return"].to_numpy(np.float32) if table.task_kind == "ranking" else table.targets

    owners = reference_owners(table, clients, eval_targets)
    evaluation = evaluate_scores(owners, clients, scores)
    sizes = {s: {c.client_id: len(c.split(s)) for c in clients} for s in ("train", *EVALUATED)}
    metrics = summarize(evaluation, sizes)
    ids = [c.client_id for c in clients]
    train = reference_train_losses(owners, clients, scores)
    record = RoundRecord(1, ids, train=train, seconds={"fit": wall}, diagnostics={"fit": fit_info},
                         evaluation=evaluation, summary=metrics)  # fmt: skip
    rundir = RunDirectory(out)
    rundir.write_config(cfg)
    rundir.write_env({"runtime": "reference", "mode": options.mode, "setup_seconds": {"data": setup}})
    rundir.start_metrics([])
    rundir.append_metrics(record)
    primary = make_task(table.task_kind, table.targets[:1], table.num_classes).primary_metric
    result = SimulationResult(Record({}), {}, [record])
    summary = build_summary(cfg, result, wall, str(out), primary, table.synthetic, {})
    summary["reference"]["fits"] = fit_info
    if train:  # beside the constant's "train loss const", like a method's last round
        summary["metrics"]["train_loss/final_round"] = mean_train_loss(record)
    summary["baseline"] = constant_baseline(owners)
    test = np.concatenate([c.test for c in clients])
    owner = np.concatenate([[c.client_id] * len(c.test) for c in clients])
    predictions = pd.DataFrame({"client": owner, "row": test, "date": frame["date"].to_numpy()[test],
                                "instrument": frame["instrument"].to_numpy()[test], "score": scores[test],
                                "target": eval_targets[test]})  # fmt: skip
    train_dates = table.dates[np.concatenate([c.train for c in clients])]
    summary |= record_outputs(rundir, prediction_outputs(cfg, table.task_kind, predictions, train_dates))
    summary["outputs_round"] = 1
    finish_run(rundir, summary)
    return summary
