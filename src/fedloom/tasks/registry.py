"""The task a dataset implies: regression (returns), classification (movement) or ranking."""

from __future__ import annotations

import numpy as np

from fedloom.errors import ConfigError
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.generation import GenerationTask
from fedloom.tasks.ranking import RankingTask
from fedloom.tasks.regression import RegressionTask

Task = RegressionTask | ClassificationTask | RankingTask | GenerationTask


def make_task(kind: str, train_targets: np.ndarray, num_classes: int | None = None) -> Task:
    """The task of one client: regression standardizes with the client's own training targets."""
    if kind == "regression":
        return RegressionTask.fitted(train_targets)
    if kind == "classification":
        return ClassificationTask(num_classes or 2)
    if kind == "ranking":
        return RankingTask()
    raise ConfigError(f"unknown task kind {kind!r}; expected regression, classification or ranking")
