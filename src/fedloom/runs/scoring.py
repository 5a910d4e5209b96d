"""The test split of the rounds a run reports, evaluated after the rounds (``federation.test_rounds: chosen``).

Only two models' test numbers are ever reported: the round chosen on validation and the last. With
``test_rounds: chosen`` the round loop evaluates validation alone, and this module evaluates the test
split of those two from their checkpoints, the same numbers an every-round test pass gives at a
fraction of the cost. On financial data one pass gives both the metrics and the predictions behind
daily.csv and the portfolio.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from fedloom.algorithms.base import Algorithm, Record
from fedloom.runs.daily import test_predictions
from fedloom.runs.rundir import RunDirectory
from fedloom.runtime.rounds import Evaluation, RoundRecord, SimulationResult, summarize
from fedloom.runtime.simulation import client_models
from fedloom.tasks.learner import Learner


@dataclass(frozen=True)
class RoundModels:
    """The models after one round: the server state and every client's private state."""

    round: int
    server: Record
    clients: Mapping[str, Record]


@dataclass(frozen=True)
class RoundTest:
    """One round's test metrics (mode → ``test`` → client → metric) and, for sample tables, the predictions."""

    evaluation: Evaluation
    predictions: pd.DataFrame | None


def round_models(result: SimulationResult, rundir: RunDirectory, rnd: int) -> RoundModels | None:
    """The last round's models from ``result``, an earlier round's from its checkpoint (None without one)."""
    if rnd == result.history[-1].round:
        return RoundModels(rnd, result.server, result.clients)
    checkpoint = rundir.checkpoints.load(restore_random_state=False, round=rnd)
    return None if checkpoint is None else RoundModels(rnd, checkpoint.server, checkpoint.clients)


def round_test(
    algorithm: Algorithm, learners: Mapping[str, Learner], models: RoundModels, frame: pd.DataFrame | None
) -> RoundTest:
    """Every client's test metrics of its personalized model and, where the method has one, the global
    model; with a sample ``frame`` the personalized metrics come from the predictions kept for daily.csv."""
    predictions = None
    predicted = {}
    if frame is not None:
        predictions = test_predictions(algorithm, models.server, models.clients, learners, frame, models.round)
        predicted = {str(cid): part["score"].to_numpy() for cid, part in predictions.groupby("client", sort=False)}
    downloads = algorithm.configure(models.server, list(learners), models.round)
    evaluation: Evaluation = {}
    for cid, learner in learners.items():
        for mode, model in client_models(algorithm, models.server, downloads[cid], models.clients[cid]).items():
            scores = predicted.get(cid) if mode == "personal" else None
            values = (
                learner.metrics(scores, "test")
                if scores is not None
                else learner.evaluate(model.params, "test", model.mixture)
            )
            evaluation.setdefault(mode, {"test": {}})["test"][cid] = values
    return RoundTest(evaluation, predictions)


def complete_test(record: RoundRecord, passed: RoundTest, sizes: Mapping[str, Mapping[str, int]]) -> None:
    """Put a round's deferred test metrics into its record (evaluation and summary)."""
    assert record.evaluation is not None, f"round {record.round} was not evaluated"
    for mode, per_split in passed.evaluation.items():
        record.evaluation.setdefault(mode, {})["test"] = per_split["test"]
    record.summary = summarize(record.evaluation, sizes)
