"""Daily series for significance and regimes, on hand-made predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from fedloom.metrics.cross_section import CLIENT_WEIGHTS, moment_columns, pooled_correlation
from fedloom.runs.daily import client_daily_metrics, daily_metrics, regime_breakdown


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


@pytest.mark.parametrize("task_kind", ["regression", "ranking", "classification"])
def test_each_clients_daily_values_average_back_to_the_daily_series(task_kind):
    """clients.csv: per client and date its rows and its own value; weighted as CLIENT_WEIGHTS says (an equal
    share per client with a value, or the client's share of the day's rows) they give daily.csv's columns."""
    rng = np.random.default_rng(3)
    dates = np.repeat(pd.bdate_range("2024-01-01", periods=6).to_numpy(), 7)
    client = np.tile(["a", "a", "a", "b", "b", "c", "c"], 6)  # 3, 2 and 2 names a day
    score = rng.normal(size=len(dates))
    target = rng.normal(size=len(dates))
    if task_kind == "classification":
        score, target = (score > 0).astype(int), (target > 0).astype(int)
    p = pd.DataFrame({"client": client, "row": range(len(dates)), "date": dates, "instrument": "x",
                      "score": score, "target": target})  # fmt: skip
    daily, per_client = daily_metrics(p, task_kind), client_daily_metrics(p, task_kind)
    columns = [c for c in daily.columns if c in CLIENT_WEIGHTS]
    pooled = [c for c in daily.columns if c.endswith("_pooled")]  # none for classification
    moments = [m for c in pooled for m in moment_columns(c)]
    assert columns and list(per_client.columns) == ["client", "rows", *columns, *moments]
    assert len(per_client) == 18 and per_client.groupby("client")["rows"].first().to_dict() == {"a": 3, "b": 2, "c": 2}
    for column in columns:
        values = per_client.dropna(subset=[column])
        share = 1.0 if CLIENT_WEIGHTS[column] == "clients" else values["rows"]
        weights = pd.Series(share, index=values.index)
        back = (values[column] * weights).groupby(level=0).sum() / weights.groupby(level=0).sum()
        pd.testing.assert_series_equal(back, daily[column], check_names=False, check_freq=False)
    for column in pooled:  # the universe-wide correlations: the clients' moments summed over the day
        summed = per_client.groupby(level=0)[moment_columns(column)].sum()
        back = pd.Series(pooled_correlation(summed.to_numpy()), index=summed.index)
        pd.testing.assert_series_equal(back, daily[column], check_names=False, check_freq=False)


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
