"""Daily series for significance and regimes, on hand-made predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from fedloom.runs.daily import daily_metrics, regime_breakdown


def _predictions():
    dates = np.array(["2024-01-02"] * 3 + ["2024-01-03"] * 3, dtype="datetime64[D]")
    return pd.DataFrame(
        {
            "client": ["a"] * 6,
            "row": range(6),
            "date": dates,
            "instrument": ["x", "y", "z"] * 2,
            "score": [1.0, 2.0, 3.0, 3.0, 1.0, 2.0],
            "target": [0.1, 0.3, 0.2, 0.0, 0.1, 0.2],
        }
    )


def test_daily_ic_is_the_within_client_cross_section_macro_over_clients():
    p = _predictions()
    b = p.assign(client="b", score=-p["score"])
    daily = daily_metrics(pd.concat([p, b]), "regression")
    first = pearsonr([1, 2, 3], [0.1, 0.3, 0.2]).statistic
    assert daily["ic"].iloc[0] == pytest.approx((first - first) / 2)  # client b is a's mirror image
    assert list(daily.columns) == ["ic", "rank_ic", "ic_pooled", "rank_ic_pooled", "mse", "mae"] and len(daily) == 2
    assert daily["ic_pooled"].iloc[0] == pytest.approx(pearsonr([1, 2, 3, -1, -2, -3], [0.1, 0.3, 0.2] * 2).statistic)
    day2 = [(3.0 - 0.0), (1.0 - 0.1), (2.0 - 0.2), (-3.0 - 0.0), (-1.0 - 0.1), (-2.0 - 0.2)]
    assert daily["mse"].iloc[1] == pytest.approx(np.mean(np.square(day2)))
    assert daily["mae"].iloc[1] == pytest.approx(np.mean(np.abs(day2)))
    assert list(daily_metrics(p, "ranking").columns) == ["ic", "rank_ic", "ic_pooled", "rank_ic_pooled"]  # no error


def test_daily_accuracy_is_pooled_per_date():
    p = _predictions().assign(score=[1, 0, 1, 1, 1, 1], target=[1, 0, 0, 1, 1, 0])
    daily = daily_metrics(p, "classification")
    assert daily["accuracy"].tolist() == pytest.approx([2 / 3, 2 / 3])


def test_regime_breakdown_uses_training_thresholds():
    days = pd.bdate_range("2020-01-01", periods=300)
    rng = np.random.default_rng(0)
    close = pd.Series(np.exp(np.cumsum(rng.normal(0, 0.01, len(days)))), index=days)
    daily = pd.Series(rng.normal(size=100), index=days[200:])
    out = regime_breakdown(daily, close, days[60:200].to_numpy())
    assert {"regime_std", "worst_regime_drop"} <= set(out)
    assert any(k.startswith("regime/") for k in out) and out["worst_regime_drop"] >= 0


def test_purity_by_hand_and_against_sklearn_for_perfect_clusters():
    from sklearn.metrics import adjusted_rand_score

    from fedloom.metrics.clustering import purity_score

    clusters = np.array([0, 0, 0, 1, 1, 2])
    labels = np.array(["a", "a", "b", "b", "b", "c"])
    assert purity_score(clusters, labels) == pytest.approx(5 / 6)
    assert purity_score(labels, labels) == 1.0 and adjusted_rand_score(labels, labels) == 1.0
