"""Paired block bootstrap over trading weeks: degenerate, null and against scipy's bootstrap; the paired
t-test over seeds against its formula."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from fedloom.metrics.cross_section import client_moments, daily_ic, moment_columns
from fedloom.metrics.significance import (
    minimum_detectable_effect,
    paired_block_bootstrap,
    paired_cluster_bootstrap,
    paired_pooled_bootstrap,
    paired_t_test,
    week_blocks,
)

DAYS = pd.bdate_range("2024-01-01", periods=200)  # 40 full Monday–Friday weeks


def test_weeks_are_monday_to_sunday_blocks():
    blocks = week_blocks(pd.DatetimeIndex(["2024-01-05", "2024-01-07", "2024-01-08"]))  # Fri, Sun, Mon
    assert blocks[0] == blocks[1] != blocks[2]


def test_constant_gap_is_certain():
    a = pd.Series(0.05, index=DAYS)
    out = paired_block_bootstrap(a, a - 0.005, n_boot=2000)
    assert out["mean_difference"] == pytest.approx(0.005)
    assert out["ci_low"] == pytest.approx(0.005) and out["ci_high"] == pytest.approx(0.005)
    assert out["p_value"] == pytest.approx(1 / 2001) and out["weeks"] == 40 and out["days"] == 200


def test_no_gap_is_not_significant():
    rng = np.random.default_rng(1)
    a = pd.Series(rng.normal(0, 0.05, len(DAYS)), index=DAYS)
    b = a + rng.normal(0, 0.05, len(DAYS))
    out = paired_block_bootstrap(a, b - (b - a).mean(), n_boot=4000)  # exactly zero mean difference
    assert out["ci_low"] < 0 < out["ci_high"] and out["p_value"] > 0.9


def test_equal_weeks_match_scipys_percentile_bootstrap_of_week_means():
    """With five days in every week, resampling weeks equals an iid bootstrap of weekly means."""
    rng = np.random.default_rng(2)
    d = pd.Series(rng.normal(0.004, 0.03, len(DAYS)), index=DAYS)
    ours = paired_block_bootstrap(d, pd.Series(0.0, index=DAYS), n_boot=20_000, seed=3)
    weekly = d.to_numpy().reshape(40, 5).mean(axis=1)
    ref = stats.bootstrap((weekly,), np.mean, n_resamples=20_000, method="percentile", random_state=4)
    assert ours["mean_difference"] == pytest.approx(weekly.mean())
    assert ours["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=4e-4)
    assert ours["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=4e-4)


def test_pairs_only_common_days():
    a = pd.Series([0.1, 0.2, 0.3], index=DAYS[:3])
    b = pd.Series([0.0, 0.0], index=DAYS[1:3])
    assert paired_block_bootstrap(a, b, n_boot=100)["days"] == 2
    with pytest.raises(ValueError, match="at least 2 paired days"):
        paired_block_bootstrap(a, b.iloc[:1], n_boot=10)


finite = st.floats(-1, 1, allow_nan=False)


@given(st.lists(st.tuples(finite, finite), min_size=2, max_size=8))
def test_the_seed_test_is_the_paired_t_test(pairs):
    a, b = (np.array(side) for side in zip(*pairs, strict=True))
    d = a - b
    assume(np.ptp(d) > 1e-6 * max(1.0, np.abs(d).max()))  # a spread scipy's t-statistic can resolve
    got = paired_t_test(a, b)
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))  # the paired t statistic, n - 1 degrees of freedom
    assert got["p_value"] == pytest.approx(2 * stats.t.sf(abs(t), len(d) - 1), rel=1e-6, abs=1e-12)
    assert got["mean_difference"] == pytest.approx(d.mean()) and got["n"] == len(a)


def test_the_seed_test_without_spread_or_seeds_says_so():
    assert paired_t_test([0.1, 0.2, 0.3], [0.1, 0.2, 0.3])["p_value"] == 1.0  # identical per seed
    assert np.isnan(paired_t_test([0.5, 0.75], [0.25, 0.5])["p_value"])  # the same offset on every seed
    assert np.isnan(paired_t_test([0.2], [0.1])["p_value"])  # one seed
    with pytest.raises(ValueError, match="pair up: 2 vs 3"):
        paired_t_test([0.1, 0.2], [0.1, 0.2, 0.3])


def test_the_minimum_detectable_effect_is_found_about_80_percent_of_the_time():
    """Simulate: a daily difference of exactly the MDE (weekly-correlated noise like a daily RankIC's) is
    significant at 5 % in roughly 80 % of series; a fifth of it rarely is. Against the formula too."""
    assert minimum_detectable_effect(1.0) == pytest.approx(stats.norm.ppf(0.975) + stats.norm.ppf(0.8))
    rng = np.random.default_rng(0)
    week = np.repeat(np.arange(len(DAYS) // 5), 5)

    def series(shift: float) -> tuple[pd.Series, pd.Series]:
        noise = rng.normal(0, 0.2, len(DAYS)) + rng.normal(0, 0.1, len(DAYS) // 5)[week]
        return pd.Series(noise + shift, index=DAYS), pd.Series(0.0, index=DAYS)

    mde = float(np.mean([paired_block_bootstrap(*series(0.0), n_boot=1000)["mde"] for _ in range(20)]))
    found = [paired_block_bootstrap(*series(mde), n_boot=1000)["p_value"] < 0.05 for _ in range(200)]
    small = [paired_block_bootstrap(*series(mde / 5), n_boot=1000)["p_value"] < 0.05 for _ in range(200)]
    assert 0.68 < np.mean(found) < 0.92  # 80 % up to the bootstrap's small-sample bias and 200 draws' noise
    assert np.mean(small) < 0.2


def cells(values: np.ndarray, days: pd.DatetimeIndex = DAYS) -> tuple[pd.Series, pd.Series]:
    """A clients × days array of differences as (date, client) cells, each client an equal share of its day."""
    n_clients = values.shape[0]
    index = pd.MultiIndex.from_product([days, [f"c{i}" for i in range(n_clients)]])
    return pd.Series(values.T.ravel(), index=index), pd.Series(1 / n_clients, index=index)


@settings(deadline=None, max_examples=25)
@given(st.integers(2, 6), st.integers(0, 10_000))
def test_the_cluster_bootstrap_estimates_the_mean_over_days_of_the_weighted_daily_difference(n_clients, seed):
    """With shares summing to 1 a day, the observed value is the week bootstrap's of the daily series."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0, 0.1, (n_clients, 20))
    shares = rng.uniform(0.1, 1, (n_clients, 20))
    shares /= shares.sum(axis=0)
    difference, _ = cells(d, DAYS[:20])
    weight = pd.Series(shares.T.ravel(), index=difference.index)
    daily = pd.Series((d * shares).sum(axis=0), index=DAYS[:20])
    ours = paired_cluster_bootstrap(difference, weight, n_boot=200)
    weeks = paired_block_bootstrap(daily, pd.Series(0.0, index=DAYS[:20]), n_boot=200)
    assert ours["mean_difference"] == pytest.approx(weeks["mean_difference"])
    assert (ours["clients"], ours["weeks"], ours["days"]) == (n_clients, 4, 20)


def test_every_cluster_draw_is_one_of_the_hand_enumerated_client_and_week_multisets():
    """Two clients, two weeks: a draw takes each client 2/1/0 times and each week 2/1/0 times (probabilities
    1/4, 1/2, 1/4 each); its value is Σ u_c v_w S_cw / Σ u_c v_w N_cw. The draws take exactly these values,
    the all-of-client-0-in-week-0 value about 1/16 of the time."""
    days = DAYS[:10]  # two full weeks
    d = np.array([[1.0] * 5 + [2.0] * 5, [3.0] * 5 + [5.0] * 5])  # client × day
    difference, weight = cells(d, days)
    s = np.array([[2.5, 5.0], [7.5, 12.5]])  # Σ weight·d per client and week (weight 1/2)
    n = np.full((2, 2), 2.5)
    multiplicities = [np.array(m, float) for m in ((2, 0), (1, 1), (0, 2))]
    values = {round(float(u @ s @ v / (u @ n @ v)), 9) for u in multiplicities for v in multiplicities}
    draws = paired_cluster_bootstrap(difference, weight, n_boot=20_000, seed=5)
    assert draws["mean_difference"] == pytest.approx(s.sum() / n.sum())
    ci = (round(draws["ci_low"], 9), round(draws["ci_high"], 9))
    assert set(ci) <= values and min(values) <= ci[0] <= ci[1] <= max(values)
    rng = np.random.default_rng(5)  # the same generator stream as the function's draws
    u = rng.multinomial(2, [0.5, 0.5], size=20_000)
    v = rng.multinomial(2, [0.5, 0.5], size=20_000)
    share = np.mean((u[:, 0] == 2) & (v[:, 0] == 2))
    assert share == pytest.approx(1 / 16, abs=0.006)


def test_a_gain_one_client_carries_passes_the_weeks_but_not_the_clients_and_weeks():
    """Four clients over 40 weeks: +0.4 on client 0 only moves every week's macro mean by +0.1, which the
    week bootstrap calls certain; resampling the clients too sees one owner carry it. A +0.1 gain on every
    client passes both."""
    rng = np.random.default_rng(7)
    noise = rng.normal(0, 0.05, (4, len(DAYS)))
    one = noise + np.array([[0.4], [0.0], [0.0], [0.0]])
    every = noise + 0.1
    for d, expected_cluster_p in ((one, "large"), (every, "small")):
        difference, weight = cells(d)
        daily = pd.Series(d.mean(axis=0), index=DAYS)
        weeks = paired_block_bootstrap(daily, pd.Series(0.0, index=DAYS), n_boot=4000)
        joint = paired_cluster_bootstrap(difference, weight, n_boot=4000)
        assert weeks["p_value"] < 0.001 and joint["mean_difference"] == pytest.approx(weeks["mean_difference"])
        if expected_cluster_p == "large":
            assert joint["p_value"] > 0.05 and joint["ci_low"] < 0 < joint["ci_high"]
        else:
            assert joint["p_value"] < 0.001 and joint["ci_low"] > 0


def test_the_cluster_bootstrap_needs_two_clients_and_two_weeks():
    with pytest.raises(ValueError, match="at least 2 clients and 2 weeks, got 1 and 40"):
        paired_cluster_bootstrap(*cells(np.zeros((1, len(DAYS)))), n_boot=10)
    with pytest.raises(ValueError, match="got 3 and 1"):
        paired_cluster_bootstrap(*cells(np.zeros((3, 5)), DAYS[:5]), n_boot=10)


def pooled_panel(informative: list[bool], seed: int, names: int = 5) -> tuple[np.ndarray, pd.Series]:
    """A clients × DAYS × moments array of ``ic_pooled`` for a row whose predictions carry the target on the
    ``informative`` clients' names (noise elsewhere), and its daily universe-wide IC."""
    rng = np.random.default_rng(seed)
    n_clients = len(informative)
    client = np.tile(np.repeat(np.arange(n_clients), names), len(DAYS))
    dates = np.repeat(DAYS.to_numpy(), n_clients * names)
    target = rng.normal(size=len(dates))
    score = np.where(np.asarray(informative)[client], target, 0) + rng.normal(size=len(dates))
    moments = client_moments(score, target, dates, client)[moment_columns("ic_pooled")]
    array = moments.to_numpy().reshape(len(DAYS), n_clients, 6).transpose(1, 0, 2)
    return array, daily_ic(score, target, dates)


def test_the_pooled_bootstrap_observes_the_mean_daily_difference_of_the_seed_mean_universe_ic():
    """Its observed value is the week bootstrap's on the seed-mean daily universe-wide IC series."""
    a = [pooled_panel([True, False, False], s) for s in (0, 1)]
    b = [pooled_panel([False, False, False], 10 + s) for s in (0, 1)]
    ours = paired_pooled_bootstrap([m for m, _ in a], [m for m, _ in b], DAYS, n_boot=200)
    seed_mean = [pd.concat([d for _, d in side], axis=1).mean(axis=1) for side in (a, b)]
    weeks = paired_block_bootstrap(*seed_mean, n_boot=200)
    assert ours["mean_difference"] == pytest.approx(weeks["mean_difference"])
    assert (ours["clients"], ours["weeks"], ours["days"]) == (3, 40, 200)


def test_a_universe_gain_one_client_carries_passes_the_weeks_but_not_the_clients_and_weeks():
    """Four clients of five names over 40 weeks: a row that predicts client 0's names only lifts the universe
    IC every week, which the week bootstrap calls certain; redrawing the owners sees one of them carry it (a
    draw without client 0 has no gain: about (3/4)^4 of them). Informative predictions on every client pass both."""
    noise, base = pooled_panel([False] * 4, 99)
    for informative, expected in (([True, False, False, False], "large"), ([True] * 4, "small")):
        row, daily = pooled_panel(informative, 1)
        weeks = paired_block_bootstrap(daily, base, n_boot=4000)
        joint = paired_pooled_bootstrap([row], [noise], DAYS, n_boot=4000)
        assert weeks["p_value"] < 0.001 and joint["mean_difference"] == pytest.approx(weeks["mean_difference"])
        if expected == "large":
            assert joint["p_value"] > 0.05 and joint["ci_low"] < 0.05 < joint["ci_high"]
        else:
            assert joint["p_value"] < 0.001 and joint["ci_low"] > 0


def test_the_pooled_bootstrap_needs_two_clients_two_weeks_and_the_same_seeds():
    one_client, _ = pooled_panel([True], 0)
    with pytest.raises(ValueError, match="at least 2 clients and 2 weeks, got 1 and 40"):
        paired_pooled_bootstrap([one_client], [one_client], DAYS, n_boot=10)
    two, _ = pooled_panel([True, False], 0)
    with pytest.raises(ValueError, match="the same seeds"):
        paired_pooled_bootstrap([two, two], [two], DAYS, n_boot=10)
