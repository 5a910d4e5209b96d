"""The trivial predictor beside every financial run (sanity before tables): each client's training mean
(regression and ranking: scikit-learn's ``DummyRegressor``) or majority class (classification:
``DummyClassifier(strategy="most_frequent")``), scored like the run's models on the same rows, and its
training loss in the run's own units (½ on standardized targets: what a head must beat on its training rows).

summary.json's ``baseline`` entry holds ``train_loss`` and ``{split}/{metric}/{macro|weighted|worst25}``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fedloom.runtime.rounds import Evaluation, summarize
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.learner import Learner

SPLITS = ("train", "val", "test")


def constant_baseline(learners: Mapping[str, Learner]) -> dict[str, float]:
    """The trivial predictor's scores over the clients (empty for text tasks)."""
    from sklearn.dummy import DummyClassifier, DummyRegressor  # on use: a run's start-up stays light

    sizes = {split: {cid: len(lrn.data.split(split)) for cid, lrn in learners.items()} for split in SPLITS}
    evaluation: Evaluation = {"personal": {split: {} for split in SPLITS}}
    losses = []
    for cid, learner in learners.items():
        task = learner.task
        if isinstance(task, GenerationTask):
            return {}
        y = learner.targets[learner.data.train].numpy()
        dummy = DummyClassifier(strategy="most_frequent") if isinstance(task, ClassificationTask) else DummyRegressor()
        dummy.fit(np.zeros((len(y), 1)), y)
        for split in SPLITS:
            rows = learner.data.split(split)
            if len(rows):
                evaluation["personal"][split][cid] = learner.metrics(dummy.predict(np.zeros((len(rows), 1))), split)
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
