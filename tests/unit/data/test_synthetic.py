"""The SYNTHETIC market: deterministic, chronological, sector-heterogeneous, no look-ahead; planted rule groups."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from fedloom.data.config import DataConfig
from fedloom.data.registry import load_dataset
from fedloom.data.schema import SampleTable
from fedloom.data.splits import chronological_split
from fedloom.data.summary import describe
from fedloom.data.synthetic import _MACRO, _RULES, SyntheticMarketConfig, make_synthetic_market
from fedloom.errors import DataError

# sha256 of the default table as generated before planted rule groups existed
DEFAULT_SHA256 = "400ccc5256dac8309986c0f9bdbea7bd32bbaab7af9efa59d0753481487e9632"


def _digest(frame: pd.DataFrame) -> str:
    return hashlib.sha256(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes()).hexdigest()


def _effects(frame: pd.DataFrame, groups: pd.Series) -> pd.DataFrame:
    """Mean target net of its day's cross-sectional mean, by event (rows) and group (columns)."""
    net = frame["target"] - frame.groupby("date")["target"].transform("mean")
    return net.groupby([frame["event"], groups]).mean().unstack()


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


def test_without_sector_effects_sectors_react_alike():
    """``sector_effects=False``: no sector-only events, and a rate hike moves financials and technology alike."""
    cfg = SyntheticMarketConfig(days=400, macro_probability=0.5, seed=3, sector_effects=False)
    t = make_synthetic_market(cfg).frame
    assert not t["event"].isin(["trial_success", "trial_failure", "data_breach", "discovery"]).any()
    hike = t[t["macro"] == "rate_hike"]
    fin = hike[hike["group"] == "financials"]["target"].mean()
    tech = hike[hike["group"] == "technology"]["target"].mean()
    assert abs(fin - tech) < 0.004  # 1.8 % apart with sector effects (the test above)


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


def test_default_table_is_unchanged_bit_for_bit():
    """Planted groups are opt-in: the default config still gives the table it gave before them."""
    assert _digest(make_synthetic_market(SyntheticMarketConfig()).frame) == DEFAULT_SHA256


def test_rule_strength_zero_is_todays_table_with_group_labels():
    base = make_synthetic_market(SyntheticMarketConfig()).frame
    labelled = make_synthetic_market(SyntheticMarketConfig(rule_groups=2, rule_strength=0)).frame
    assert labelled.drop(columns="rule_group").equals(base)


def test_planted_groups_give_the_same_headline_opposite_effects():
    """Group 1 flips earnings and lawsuit / buyback, keeps guidance, and reverses analyst news on volatile days."""
    f = make_synthetic_market(SyntheticMarketConfig(days=600, rule_groups=2)).frame
    e = _effects(f, f["rule_group"])
    for event, sign in {"earnings_beat": 1, "earnings_miss": -1, "lawsuit": -1, "buyback": 1}.items():
        assert sign * e.loc[event, 0] > 0.002 and sign * e.loc[event, 1] < -0.002, event
    for event, sign in {"guidance_raise": 1, "guidance_cut": -1}.items():
        assert sign * e.loc[event, 0] > 0.005 and sign * e.loc[event, 1] > 0.005, event
    volatile, calm = f[f["regime"] == "volatile"], f[f["regime"] != "volatile"]
    ev, ec = _effects(volatile, volatile["rule_group"]), _effects(calm, calm["rule_group"])
    assert ev.loc["upgrade", 0] > 0.003 and ev.loc["upgrade", 1] < -0.005
    assert ev.loc["downgrade", 0] < -0.003 and ev.loc["downgrade", 1] > 0.005
    assert ec.loc["upgrade", 1] > 0.003 and ec.loc["downgrade", 1] < -0.003


def test_iid_control_has_no_split():
    """Without planted groups the same round-robin halves agree on every shared event."""
    f = make_synthetic_market(SyntheticMarketConfig(days=600)).frame
    half = f["group"].map({s: k % 2 for k, s in enumerate(f["group"].unique())})
    e = _effects(f, half).loc[list(_RULES)]
    assert (np.sign(e[0]) == np.sign(e[1])).all()
    assert (e[0] - e[1]).abs().max() < 0.003


def test_rule_group_is_an_audit_column_only():
    base = make_synthetic_market(SyntheticMarketConfig()).frame
    planted = make_synthetic_market(SyntheticMarketConfig(rule_groups=2))
    f = planted.frame
    assert "rule_group" not in base.columns and "rule_group" not in planted.covariates
    assert pd.api.types.is_integer_dtype(f["rule_group"])
    assert f["rule_group"].value_counts().to_dict() == {0: 720, 1: 720}
    assert f.groupby("group")["rule_group"].nunique().eq(1).all()
    assert f["text"].equals(base["text"]) and f["event"].equals(base["event"])  # same headlines
    with pytest.raises(DataError, match="audit columns, never covariates"):
        SampleTable(f, ("mom5", "rule_group"), name="leaky")


def test_planted_generation_is_deterministic_and_validated():
    cfg = SyntheticMarketConfig(rule_groups=3, days=30)
    assert make_synthetic_market(cfg).frame.equals(make_synthetic_market(cfg).frame)
    assert sorted(make_synthetic_market(cfg).frame["rule_group"].unique()) == [0, 1, 2]
    with pytest.raises(ValidationError, match="cannot exceed sectors"):
        SyntheticMarketConfig(sectors=2, rule_groups=3)
    with pytest.raises(ValidationError):
        SyntheticMarketConfig(sectors=8, rule_groups=5)


def test_data_info_prints_the_planted_groups():
    cfg = DataConfig(synthetic=SyntheticMarketConfig(rule_groups=2))
    lines = dict(describe(load_dataset("synthetic", cfg), cfg))
    assert lines["rule groups"] == (
        "2 planted (audit only): 0 = technology, energy, consumer; 1 = financials, healthcare, industrials"
    )
    assert "rule groups" not in dict(describe(load_dataset("synthetic", DataConfig()), DataConfig()))


@pytest.mark.parametrize("stock_betas", [True, False])
def test_stock_betas_are_the_only_persistent_per_company_effect(stock_betas):
    """Each stock's slope on the day's mean return is its market beta: spread over U(0.7, 1.3) by default,
    1 for every stock with ``stock_betas=False`` (so company names carry no ranking to memorize)."""
    cfg = SyntheticMarketConfig(days=400, seed=5, news_probability=0.0, macro_probability=0.0,
                                sector_effects=False, stock_betas=stock_betas)  # fmt: skip
    t = make_synthetic_market(cfg).frame
    wide = t.pivot(index="date", columns="instrument", values="target")
    market = wide.mean(axis=1)
    slopes = wide.apply(lambda r: np.polyfit(market, r, 1)[0])
    if stock_betas:
        assert slopes.max() - slopes.min() > 0.3
    else:
        assert (slopes - 1).abs().max() < 0.1
