"""Metrics against independent references (scikit-learn, scipy) and hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import pearsonr, spearmanr
from sklearn import metrics as skm

from fedloom.metrics.cross_section import (
    client_moments,
    daily_ic,
    daily_rank_ic,
    ic_summary,
    information_ratio,
    moment_columns,
    pooled_correlation,
)
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


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 10_000), st.integers(2, 5), st.booleans())
def test_the_clients_moments_give_the_universe_wide_ic_and_rank_ic_of_any_multiset_of_clients(seed, n_clients, ties):
    """Issue 43: summed over every client, the moments are scipy's Pearson / Spearman correlation of the day's
    whole cross-section; weighted by a multiset of clients they are the Pearson correlation of those clients'
    rows repeated as often as drawn (of the universe's ranks, for rank_ic) — what the pooled bootstrap needs."""
    rng = np.random.default_rng(seed)
    n = 12
    score = rng.normal(size=n).round(0 if ties else 6)  # rounding to integers makes ties in the ranks
    target = rng.normal(size=n)
    client = np.concatenate([np.arange(n_clients), rng.integers(0, n_clients, n - n_clients)]).astype(str)
    dates = np.full(n, np.datetime64("2024-01-02"))
    moments = client_moments(score, target, dates, client)
    for column, reference in (("ic_pooled", pearsonr), ("rank_ic_pooled", spearmanr)):
        summed = moments[moment_columns(column)].to_numpy().sum(axis=0)
        expected = reference(score, target).statistic if np.ptp(score) > 0 else np.nan
        assert pooled_correlation(summed) == pytest.approx(expected, nan_ok=True, abs=1e-12)
    u = rng.integers(0, 3, n_clients).astype(float)
    if u.sum() == 0:
        u[0] = 1
    repeat = u[client.astype(int)].astype(int)
    x, y = np.repeat(score, repeat), np.repeat(target, repeat)
    drawn = u @ moments[moment_columns("ic_pooled")].to_numpy()  # clients in order "0", "1", ...
    ok = len(x) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0
    assert pooled_correlation(drawn) == pytest.approx(pearsonr(x, y).statistic if ok else np.nan, nan_ok=True)


def test_pooled_correlation_is_undefined_below_two_rows_or_for_a_constant_side():
    one = np.array([1.0, 0.5, 0.2, 0.25, 0.04, 0.1])
    constant = np.array([3.0, 3.0, 1.0, 3.0, 2.0, 1.0])  # x = 1, 1, 1: Σx² · n = (Σx)²
    assert np.isnan(pooled_correlation(one)) and np.isnan(pooled_correlation(constant))
