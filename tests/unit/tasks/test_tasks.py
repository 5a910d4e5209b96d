"""Classification and ranking tasks against hand-computed cases and reference libraries."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.metrics import accuracy_score, balanced_accuracy_score, matthews_corrcoef

from fedloom.errors import ConfigError
from fedloom.runs.methods import method_context
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
    assert out["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, p))


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


def test_side_channel_standardizes_on_train_rows_and_feeds_the_head():
    from fedloom.tasks.side_channel import SIDE_WEIGHT, SideChannel

    cov = np.array([[1.0, 10.0], [3.0, 10.0], [100.0, 0.0]])
    side = SideChannel.fitted(cov, np.array([0, 1]), width=3)
    torch.testing.assert_close(side.inputs[:2], torch.tensor([[-1.0, 0.0], [1.0, 0.0]]))  # train mean/std, std 0 → 1
    head = side.init(torch.Generator().manual_seed(0))
    head = {k: v.requires_grad_(True) for k, v in head.items()}
    feats = side.features(head, torch.zeros(2, 5), np.array([0, 2]))
    assert feats.shape == (2, 8) and torch.equal(feats[:, :5], torch.zeros(2, 5))
    feats.sum().backward()
    assert head[SIDE_WEIGHT].grad is not None


def test_text_plus_numeric_runs_with_covariates_only_in_the_head():
    from fedloom.algorithms.registry import build_algorithm
    from fedloom.runs.workspace import prepare_workspace
    from fedloom.runtime.config import FederationConfig
    from fedloom.runtime.simulation import InProcessRuntime
    from tests.conftest import small_config

    cfg = small_config(**{"prompt.inputs": "text+numeric"})
    ws = prepare_workspace(cfg)
    learner = next(iter(ws.learners.values()))
    text = ws.lm.backbone.tokenizer.decode(learner.features.tokens.row(0))
    assert "Data:" not in text and "mom5" not in text
    head = learner.init_head(torch.Generator().manual_seed(0))
    assert head["head.side.weight"].shape == (32, 3) and head["head.weight"].shape == (1, 64 + 32)
    algo = build_algorithm("fedavg", method_context(cfg, ws.lm.layout.slot()))
    hist = InProcessRuntime(algo, ws.learners, FederationConfig(), 0).run(ws.shared_init, 1).history
    assert not hist[0].failures and not any(k.startswith("head") for k in hist[0].bytes_by_group["upload"])
