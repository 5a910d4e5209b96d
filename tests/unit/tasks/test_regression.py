"""The regression head: eq. 6–7 on standardized targets, predictions in return units."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedloom.tasks.regression import HEAD_BIAS, HEAD_WEIGHT, RegressionTask


def test_loss_is_half_mean_squared_error_of_standardized_targets():
    task = RegressionTask(target_mean=0.01, target_std=0.02)
    head = {HEAD_WEIGHT: torch.tensor([[1.0, -1.0]]), HEAD_BIAS: torch.tensor([0.5])}
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    y = torch.tensor([0.03, -0.01])  # standardized: 1, -1
    scores = torch.tensor([1.5, -1.5])
    assert task.loss(head, h, y).item() == pytest.approx(0.5 * ((1.5 - 1) ** 2 + (-1.5 + 1) ** 2) / 2)
    torch.testing.assert_close(task.predict(head, h), scores * 0.02 + 0.01)


def test_fitted_uses_train_statistics_and_guards_constant_targets():
    t = RegressionTask.fitted(np.array([1.0, 3.0]))
    assert (t.target_mean, t.target_std) == (2.0, 1.0)
    assert RegressionTask.fitted(np.array([5.0, 5.0])).target_std == 1.0


def test_evaluate_reports_errors_and_daily_correlations():
    dates = np.array(["2022-01-03"] * 3 + ["2022-01-04"] * 3, dtype="datetime64[D]")
    y = np.array([0.01, 0.02, 0.03, 0.03, 0.02, 0.01])
    out = RegressionTask().evaluate(y * 2, y, dates)
    assert out["ic"] == pytest.approx(1.0) and out["rank_ic"] == pytest.approx(1.0)
    assert out["mae"] == pytest.approx(np.abs(y).mean())


def test_head_init_is_seeded():
    a = RegressionTask().init_head(8, torch.Generator().manual_seed(1))
    b = RegressionTask().init_head(8, torch.Generator().manual_seed(1))
    assert torch.equal(a[HEAD_WEIGHT], b[HEAD_WEIGHT]) and a[HEAD_WEIGHT].shape == (1, 8)
    assert a[HEAD_WEIGHT].abs().max() <= 8**-0.5
