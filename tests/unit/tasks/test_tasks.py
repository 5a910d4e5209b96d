"""Classification and ranking tasks against hand-computed cases and reference libraries."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import accuracy_score, matthews_corrcoef

from fedloom.errors import ConfigError
from fedloom.tasks.classification import ClassificationTask
from fedloom.tasks.ranking import RankingTask
from fedloom.tasks.registry import make_task
from fedloom.tasks.regression import HEAD_BIAS, HEAD_WEIGHT, RegressionTask


def test_classification_loss_is_cross_entropy_and_predicts_argmax():
    task = ClassificationTask(2)
    head = {HEAD_WEIGHT: torch.tensor([[1.0, 0.0], [0.0, 1.0]]), HEAD_BIAS: torch.tensor([0.0, 0.5])}
    h = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    logits = torch.tensor([[2.0, 0.5], [0.0, 1.5]])
    y = torch.tensor([0.0, 0.0])
    assert task.loss(head, h, y).item() == pytest.approx(F.cross_entropy(logits, y.long()).item())
    assert task.predict(head, h).tolist() == [0.0, 1.0]
    assert task.init_head(8, torch.Generator().manual_seed(0))[HEAD_WEIGHT].shape == (2, 8)


def test_classification_metrics_match_sklearn():
    rng = np.random.default_rng(0)
    y, p = rng.integers(0, 2, 50), rng.integers(0, 2, 50)
    out = ClassificationTask(2).evaluate(p.astype(float), y.astype(float), np.zeros(50))
    assert out["accuracy"] == pytest.approx(accuracy_score(y, p))
    assert out["mcc"] == pytest.approx(matthews_corrcoef(y, p))


def test_ranking_reports_qlib_signal_metrics_and_is_affine_invariant_per_date():
    rng = np.random.default_rng(1)
    dates = np.repeat(np.arange(5).astype("datetime64[D]"), 8)
    raw, score = rng.normal(size=40), rng.normal(size=40)
    z = raw.copy()
    for d in np.unique(dates):
        m = dates == d
        z[m] = (raw[m] - raw[m].mean()) / raw[m].std()
    a, b = RankingTask().evaluate(score, raw, dates), RankingTask().evaluate(score, z, dates)
    assert set(a) == {"ic", "icir", "rank_ic", "rank_icir"}
    assert a == pytest.approx(b)
    assert RankingTask.primary_metric == "rank_ic"


def test_make_task():
    assert isinstance(make_task("regression", np.array([1.0, 3.0])), RegressionTask)
    assert make_task("classification", np.array([0, 1]), 3).num_classes == 3
    assert isinstance(make_task("ranking", np.zeros(3)), RankingTask)
    with pytest.raises(ConfigError, match="unknown task kind 'generation'"):
        make_task("generation", np.zeros(1))
