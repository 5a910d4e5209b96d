"""The SYNTHETIC market: deterministic, chronological, sector-heterogeneous, no look-ahead."""

from __future__ import annotations

import numpy as np
import pytest

from fedloom.data import SyntheticMarketConfig, chronological_split, make_synthetic_market
from fedloom.data.synthetic import _MACRO


def test_same_config_same_table_and_seed_changes_it():
    a = make_synthetic_market(SyntheticMarketConfig())
    b = make_synthetic_market(SyntheticMarketConfig())
    c = make_synthetic_market(SyntheticMarketConfig(seed=1))
    assert a.frame.equals(b.frame)
    assert not np.allclose(a.targets, c.targets)
    assert a.synthetic and a.name == "synthetic"


def test_shape_sectors_and_dates():
    cfg = SyntheticMarketConfig(sectors=3, stocks_per_sector=2, days=12)
    t = make_synthetic_market(cfg)
    assert len(t) == 3 * 2 * 12
    assert sorted(t.frame["group"].unique()) == ["energy", "financials", "technology"]
    assert t.frame.groupby("date").size().eq(6).all()
    assert (t.frame.groupby("instrument")["date"].apply(lambda d: d.is_monotonic_increasing)).all()


def test_covariates_use_only_the_past():
    """mom5 at date t is the sum of the stock's last five realized targets (returns up to t)."""
    t = make_synthetic_market(SyntheticMarketConfig(sectors=2, stocks_per_sector=2, days=30))
    for _, g in t.frame.groupby("instrument"):
        g = g.sort_values("date")
        realized = g["target"].shift(1)  # the return realized at date t is the target of row t-1
        rolled = realized.rolling(5).sum()
        ok = rolled.notna()
        np.testing.assert_allclose(g["mom5"][ok], rolled[ok], atol=1e-12)


def test_text_to_return_map_differs_by_sector():
    """A rate hike lifts financials and sinks technology: one shared map cannot fit both clients."""
    t = make_synthetic_market(SyntheticMarketConfig(days=400, macro_probability=0.5, seed=3)).frame
    hike = t[t["macro"] == "rate_hike"]
    fin = hike[hike["group"] == "financials"]["target"].mean()
    tech = hike[hike["group"] == "technology"]["target"].mean()
    assert fin - tech > 0.01 > 0  # ~1.8 % apart by construction (0.8 vs -1.0 units of 1 %)
    assert _MACRO["rate_hike"][0]["financials"] > 0 > _MACRO["rate_hike"][0]["technology"]


def test_news_is_predictive_within_a_sector():
    t = make_synthetic_market(SyntheticMarketConfig(days=300)).frame
    good = t[t["event"].isin(["earnings_beat", "guidance_raise"])]["target"].mean()
    bad = t[t["event"].isin(["earnings_miss", "guidance_cut"])]["target"].mean()
    assert good - bad > 0.01


def test_chronological_split_has_no_overlap():
    t = make_synthetic_market(SyntheticMarketConfig())
    s = chronological_split(t.dates, (0.6, 0.2, 0.2))
    d = t.dates
    assert d[s["train"]].max() < d[s["val"]].min() <= d[s["val"]].max() < d[s["test"]].min()
    assert sorted(np.concatenate(list(s.values())).tolist()) == list(range(len(t)))


@pytest.mark.parametrize("bad", [(0.5, 0.5, 0.0), (0.6, 0.3, 0.3), (1.0,)])
def test_bad_split_fractions(bad):
    from fedloom.errors import DataError

    with pytest.raises(DataError, match="three positive numbers summing to 1"):
        chronological_split(np.array(["2022-01-03"] * 3, dtype="datetime64[D]"), bad)
