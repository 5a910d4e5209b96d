"""Metrics against independent references (scikit-learn, scipy) and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr
from sklearn import metrics as skm

from fedloom.metrics.cross_section import daily_ic, daily_rank_ic, ic_summary, information_ratio
from fedloom.metrics.federated import macro_mean, weighted_mean, worst_quartile_mean
from fedloom.metrics.regression import mean_absolute_error, mean_squared_error

floats = st.floats(-1e3, 1e3, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(floats, floats), min_size=1, max_size=30))
def test_regression_errors_match_sklearn(pairs):
    y, p = map(np.array, zip(*pairs, strict=True))
    assert mean_squared_error(y, p) == pytest.approx(skm.mean_squared_error(y, p), rel=1e-9, abs=1e-9)
    assert mean_absolute_error(y, p) == pytest.approx(skm.mean_absolute_error(y, p), rel=1e-9, abs=1e-9)


def test_regression_error_shapes():
    with pytest.raises(ValueError, match="of one shape"):
        mean_squared_error(np.zeros(2), np.zeros(3))


def test_daily_ic_matches_scipy_per_date():
    rng = np.random.default_rng(0)
    dates = np.repeat(np.array(["2022-01-03", "2022-01-04", "2022-01-05"], dtype="datetime64[D]"), 6)
    pred, y = rng.normal(size=18), rng.normal(size=18)
    ic, ric = daily_ic(pred, y, dates), daily_rank_ic(pred, y, dates)
    for k, d in enumerate(np.unique(dates)):
        m = dates == d
        assert ic.iloc[k] == pytest.approx(pearsonr(pred[m], y[m]).statistic)
        assert ric.iloc[k] == pytest.approx(spearmanr(pred[m], y[m]).statistic)
    assert information_ratio(ic) == pytest.approx(ic.mean() / ic.std(ddof=1))


def test_degenerate_dates_are_skipped():
    dates = np.array(["2022-01-03", "2022-01-04", "2022-01-04", "2022-01-05", "2022-01-05"], dtype="datetime64[D]")
    pred = np.array([1.0, 1.0, 2.0, 3.0, 3.0])  # one row; ok; constant prediction
    y = np.array([0.1, 0.2, 0.1, 0.3, 0.4])
    ic = daily_ic(pred, y, dates)
    assert len(ic) == 1 and ic.iloc[0] == pytest.approx(-1.0)


def test_federated_summaries_by_hand():
    values = {"a": 0.1, "b": 0.3, "c": -0.2, "d": 0.0, "e": float("nan")}
    assert macro_mean(values) == pytest.approx(0.05)
    assert weighted_mean(values, {"a": 1, "b": 3, "c": 0, "d": 4, "e": 9}) == pytest.approx((0.1 + 0.9) / 8)
    assert worst_quartile_mean(values, higher_is_better=True) == pytest.approx(-0.2)
    assert worst_quartile_mean({f"c{i}": float(i) for i in range(8)}, higher_is_better=False) == pytest.approx(6.5)


def test_ic_summary_is_qlibs_signal_table():
    rng = np.random.default_rng(1)
    dates = np.repeat(np.arange("2022-01-03", "2022-01-13", dtype="datetime64[D]"), 8)
    y = rng.normal(size=len(dates))
    pred = y + rng.normal(scale=2, size=len(dates))
    got = ic_summary(pred, y, dates)
    ic, ric = daily_ic(pred, y, dates), daily_rank_ic(pred, y, dates)
    assert got == pytest.approx(
        {
            "ic": ic.mean(),
            "icir": ic.mean() / ic.std(ddof=1),
            "rank_ic": ric.mean(),
            "rank_icir": ric.mean() / ric.std(ddof=1),
        }
    )
