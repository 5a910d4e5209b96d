"""Paired block bootstrap over trading weeks: degenerate, null and against scipy's bootstrap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedloom.metrics.significance import paired_block_bootstrap, week_blocks

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
