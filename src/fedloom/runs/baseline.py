"""The trivial predictor beside every run (sanity before tables), scored like the run's models on the same rows.

Financial runs: each client's training mean (regression and ranking: scikit-learn's ``DummyRegressor``) or
majority class (classification: ``DummyClassifier(strategy="most_frequent")``), and its training loss in the
run's own units (½ on standardized targets: what a head must beat on its training rows).
Instruction tasks (seed 002): per client and task the most frequent training answer (ARC-C's letter, TweetEval's
sentiment, GSM8K's final number), and for the editing tasks the input returned unchanged (the identity edit,
grammatical error correction's trivial baseline); it has no teacher-forced loss.

summary.json's ``baseline`` entry holds ``{split}/{metric}/{macro|weighted|worst25}`` and, for financial runs,
``train_loss``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fedloom.data.schema import ClientData, TextTable
from fedloom.runtime.rounds import Evaluation, summarize
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner
from fedloom.tasks.registry import Task

SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Owner:
    """What the constant needs of one client: its task, its training targets, how many rows each split
    holds and how the run scores predictions of a split's rows (``score(predictions, split)``)."""

    client_id: str
    task: Task
    train_targets: np.ndarray
    sizes: Mapping[str, int]
    score: Callable[[np.ndarray, str], dict[str, float]]


def learner_owners(learners: Mapping[str, Learner]) -> list[Owner]:
    """An LLM run's clients as `Owner` s: scored by `Learner.metrics`, like the run's own predictions."""
    owners = []
    for cid, lrn in learners.items():
        sizes = {s: len(lrn.data.split(s)) for s in SPLITS}
        owners.append(Owner(cid, lrn.task, lrn.targets[lrn.data.train].numpy(), sizes, lrn.metrics))
    return owners


def constant_baseline(owners: Iterable[Owner]) -> dict[str, float]:
    """The trivial predictor's scores over the clients (empty for text tasks): an LLM run's clients are
    `learner_owners`, a reference's are built from its table."""
    from sklearn.dummy import DummyClassifier, DummyRegressor  # on use: a run's start-up stays light

    clients = list(owners)
    sizes = {split: {c.client_id: c.sizes[split] for c in clients} for split in SPLITS}
    evaluation: Evaluation = {"personal": {split: {} for split in SPLITS}}
    losses = []
    for c in clients:
        task, y = c.task, c.train_targets
        if isinstance(task, GenerationTask):
            return {}
        dummy = DummyClassifier(strategy="most_frequent") if isinstance(task, ClassificationTask) else DummyRegressor()
        dummy.fit(np.zeros((len(y), 1)), y)
        for split in SPLITS:
            if c.sizes[split]:
                constant = dummy.predict(np.zeros((c.sizes[split], 1)))
                evaluation["personal"][split][c.client_id] = c.score(constant, split)
        losses.append(_train_loss(task, y))
    summary = {key.removeprefix("personal/"): value for key, value in summarize(evaluation, sizes).items()}
    return {"train_loss": float(np.mean(losses)), **summary}


def _train_loss(task: object, y: np.ndarray) -> float:
    """The task loss of the best constant on the training targets: ½ the variance of the standardized
    targets (regression: ½ exactly), or the entropy of the class frequencies (cross-entropy of the prior)."""
    if isinstance(task, ClassificationTask):
        p = np.bincount(y.astype(int), minlength=task.num_classes) / len(y)
        return float(-(p[p > 0] * np.log(p[p > 0])).sum())
    standardized = (y - getattr(task, "target_mean", 0.0)) / getattr(task, "target_std", 1.0)
    return float(0.5 * standardized.var())


def text_baseline(table: TextTable, owners: Sequence[ClientData]) -> dict[str, float]:
    """The trivial predictor of the instruction tasks over the clients (``owners``' rows index ``table``):
    per client and task its training rows' most frequent label (the federation's where the client has
    none of that task), or the row's ``source`` where the task has no label (editing), scored by
    `GenerationTask.evaluate_text` like the run's generations."""
    frame, task = table.frame, GenerationTask.of(table)
    names, labels = frame["task"].to_numpy(str), frame["label"].to_numpy(str)
    sources = frame["source"].to_numpy(str) if "source" in frame.columns else np.full(len(frame), "")
    pooled = _majorities(names, labels, np.concatenate([c.train for c in owners]))
    evaluation: Evaluation = {"personal": {split: {} for split in SPLITS}}
    for c in owners:
        answer = {**pooled, **_majorities(names, labels, c.train)}
        for split in SPLITS:
            rows = c.split(split)
            if len(rows):
                guesses = [answer.get(names[r]) or sources[r] for r in rows]
                scores = task.evaluate_text(guesses, rows, np.zeros(len(rows)))
                evaluation["personal"][split][c.client_id] = {k: v for k, v in scores.items() if "loss" not in k}
    sizes = {split: {c.client_id: len(c.split(split)) for c in owners} for split in SPLITS}
    return {key.removeprefix("personal/"): value for key, value in summarize(evaluation, sizes).items()}


def _majorities(names: np.ndarray, labels: np.ndarray, rows: np.ndarray) -> dict[str, str]:
    """Each task's most frequent non-empty label over ``rows`` (ties: the smallest, like ``DummyClassifier``)."""
    counts: dict[str, Counter[str]] = {}
    for r in rows:
        if labels[r]:
            counts.setdefault(str(names[r]), Counter())[str(labels[r])] += 1
    return {name: min(c, key=lambda label: (-c[label], label)) for name, c in counts.items()}
