"""HIST splits a stock's encoding into predefined-concept, hidden-concept and individual parts, reads
only its own day, and stops early on the validation IC. Data here is SYNTHETIC."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

from fedloom.errors import ConfigError
from fedloom.metrics.cross_section import daily_ic
from fedloom.references.base import Fold, Objective
from fedloom.references.config import HISTConfig
from fedloom.references.hist import HIST, concept_attention, cosine, hidden_concepts, hist_layout, hist_reference

SERIES = ["A2", "A1", "A0", "B2", "B1", "B0"]  # 2 fields x 3 days
NAMES = [*SERIES, "CONCEPT_L1_11", "CONCEPT_L1_22", "CONCEPT_L2_1101"]
SMALL = HISTConfig(hidden_size=16, max_epochs=30, early_stop=5, learning_rate=3e-3)


def test_layout_splits_the_series_from_the_concepts() -> None:
    fields, series, concepts = hist_layout(NAMES)
    assert fields == 2 and series.tolist() == list(range(6)) and concepts.tolist() == [6, 7, 8]
    with pytest.raises(ConfigError, match="concepts=true"):
        hist_layout(SERIES)


def test_cosine_and_concept_attention_by_hand() -> None:
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    torch.testing.assert_close(cosine(a, a), torch.tensor([[1.0, 2**-0.5], [2**-0.5, 1.0]]), atol=1e-5, rtol=0)
    c = torch.tensor([[2.0, 0.0], [0.0, 3.0]])
    w = torch.softmax(torch.tensor([1.0, 0.0]), dim=0)  # stock 0 is aligned with concept 0, orthogonal to 1
    torch.testing.assert_close(concept_attention(a[:1], c), (w @ c)[None], atol=1e-5, rtol=0)


def test_hidden_concepts_pair_each_stock_with_its_most_similar_other() -> None:
    """Stocks 0 and 1 point one way, stock 2 another: 0 and 1 choose each other, 2 chooses whichever of
    them is nearer; the chosen stocks become concepts of their choosers plus themselves."""
    r = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    concepts = hidden_concepts(r)
    s = cosine(r, r)
    expected_1 = s[0, 1] * r[0] + s[2, 1] * r[2] + s[1, 1] * r[1]  # chosen by 0 and 2 (1 is nearer to 2 than 0)
    expected_0 = s[1, 0] * r[1] + s[0, 0] * r[0]  # chosen by 1
    assert concepts.shape == (2, 2)
    torch.testing.assert_close(concepts[0], expected_0, atol=1e-5, rtol=0)
    torch.testing.assert_close(concepts[1], expected_1, atol=1e-5, rtol=0)


def test_scores_follow_a_permutation_of_the_days_stocks() -> None:
    torch.manual_seed(0)
    fields, series, concepts = hist_layout(NAMES)
    net = HIST(fields, series, concepts, 1, SMALL).eval()
    x = torch.randn(8, len(NAMES))
    x[:, 6:] = torch.tensor([[1, 0, 1], [0, 1, 0]] * 4, dtype=torch.float32)
    order = torch.randperm(8)
    with torch.no_grad():
        torch.testing.assert_close(net(x[order]), net(x)[order], rtol=1e-4, atol=1e-5)


def concept_market(days: int, stocks: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SYNTHETIC: two concepts; a stock's target is its own A0 plus its concept's mean B0 that day."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((days * stocks, len(NAMES))).astype(np.float32)
    day = np.repeat(np.arange(days), stocks)
    member = rng.integers(0, 2, len(day))
    x[:, 6], x[:, 7], x[:, 8] = member == 0, member == 1, member == 0
    y = x[:, 2].copy()
    for d in range(days):
        for g in (0, 1):
            rows = (day == d) & (member == g)
            y[rows] += 2 * x[rows, 5].mean()
    return x, y + 0.1 * rng.standard_normal(len(day)).astype(np.float32), day


def test_hist_learns_a_concept_level_signal_and_stops_on_the_validation_ic() -> None:
    x, y, days = concept_market(90, 20, seed=1)
    train, valid, test = days < 60, (days >= 60) & (days < 75), days >= 75
    model = hist_reference(SMALL, Objective("regression"), NAMES, seed=0)
    info = model.fit(Fold(x[train], y[train], days[train]), Fold(x[valid], y[valid], days[valid]))
    assert 0 < info["best_step"] <= info["steps"] and np.isfinite(info["val_ic"])
    score = model.predict(x[test], days[test])
    assert pearsonr(score, y[test]).statistic > 0.85
    ic = float(daily_ic(score, y[test], days[test]).mean())  # what early stopping watches on validation
    by_day = [pearsonr(score[days[test] == d], y[test][days[test] == d]).statistic for d in range(75, 90)]
    assert ic == pytest.approx(float(np.mean(by_day)), rel=1e-4)
