"""GATs attends across one day's stocks only, and trains one day per step."""

from __future__ import annotations

import numpy as np
import torch

from fedloom.references.base import Fold, Objective
from fedloom.references.config import GATConfig
from fedloom.references.graph import StockAttention, gat_reference
from fedloom.references.neural import Schedule, batches, day_rows


def test_attention_rows_are_distributions_over_the_days_stocks() -> None:
    torch.manual_seed(0)
    net = StockAttention(2, 1, GATConfig(hidden_size=8, dropout_rate=0.0)).eval()
    hidden = torch.randn(5, 8)
    weights = net.weights(hidden)
    assert weights.shape == (5, 5) and torch.all(weights >= 0)
    torch.testing.assert_close(weights.sum(dim=1), torch.ones(5))


def test_a_stock_is_scored_from_its_own_day_only() -> None:
    """Changing another day's stock leaves a score alone; changing a same-day stock moves it."""
    x = np.random.default_rng(0).standard_normal((12, 6)).astype(np.float32)
    y = x.sum(axis=1)
    days = np.repeat(np.array(["2024-01-02", "2024-01-03", "2024-01-04"], dtype="datetime64[D]"), 4)
    model = gat_reference(GATConfig(hidden_size=8, max_epochs=2, dropout_rate=0.0), Objective("regression"),
                          ["A2", "A1", "A0", "B2", "B1", "B0"], seed=0)  # fmt: skip
    model.fit(Fold(x, y, days), Fold(x, y, days))
    base = model.predict(x, days)
    other_day, same_day = x.copy(), x.copy()
    other_day[8] += 5.0  # day 3
    same_day[1] += 5.0  # day 1
    np.testing.assert_allclose(model.predict(other_day, days)[:4], base[:4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(model.predict(same_day, days)[[0, 2, 3]], base[[0, 2, 3]])


def test_day_batches_hold_exactly_one_days_rows() -> None:
    days = np.array([3, 1, 3, 2, 1, 3])
    assert [r.tolist() for r in day_rows(days)] == [[1, 4], [3], [0, 2, 5]]
    steps = list(batches(6, Schedule(1, 2, None, 1, 0.1, sampling="days"), torch.Generator().manual_seed(0), days))
    assert len(steps) == 6 and [last for _, last in steps] == [False] * 5 + [True]
    for rows, _ in steps:
        assert len(set(days[rows.numpy()])) == 1
    assert sorted(len(r) for r, _ in steps[:3]) == [1, 2, 3]  # each pass covers every day once
