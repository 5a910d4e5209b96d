"""CSI300 / CSI800 on the real bundle: Qlib label, point-in-time membership, splits, no look-ahead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.data.qlib_cn import (
    QlibCnConfig,
    benchmark_close,
    build_qlib_table,
    cross_sectional,
    load_bars,
    load_qlib_cn,
    market_frame,
    robust_zscore,
)
from fedloom.errors import DataError
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
FOLDER = SHARED_DATA / "qlib_cn"


@pytest.fixture(scope="module")
def raw():
    bars = load_bars(FOLDER)
    intervals = pd.read_csv(FOLDER / "membership.csv.gz")
    industry = pd.read_csv(FOLDER / "industry_sw2021.csv")
    return bars, intervals, industry


def _subset(bars: pd.DataFrame, n: int = 25) -> pd.DataFrame:
    keep = sorted(bars["instrument"].unique())[:n]
    return bars[bars["instrument"].isin(keep)].reset_index(drop=True)


def test_label_is_qlib_convention_on_raw_closes(raw):
    bars, intervals, industry = raw
    small = _subset(bars)
    frame = build_qlib_table(small, intervals, industry, QlibCnConfig(max_instruments=None, cache=False), "csi300")
    row = frame.iloc[1234]
    closes = small[small["instrument"] == row["instrument"]].set_index("date")["close"]
    pos = closes.index.get_loc(row["date"])
    assert row["return"] == pytest.approx(closes.iloc[pos + 2] / closes.iloc[pos + 1] - 1, rel=1e-12)
    # training target by default (Qlib's benchmark workflows): the label's rank across the day's members
    day = frame[frame["date"] == row["date"]]
    np.testing.assert_allclose(day["target"], (day["return"].rank(pct=True) - 0.5) * 3.46)
    zscored = build_qlib_table(
        small, intervals, industry, QlibCnConfig(max_instruments=None, label_norm="cs_zscore", cache=False), "csi300"
    )
    day = zscored[zscored["date"] == row["date"]]
    assert day["target"].mean() == pytest.approx(0, abs=1e-9) and day["target"].std() == pytest.approx(1, rel=1e-9)


def test_membership_is_point_in_time_from_sqlib(raw):
    bars, intervals, industry = raw
    frame = build_qlib_table(bars, intervals, industry, QlibCnConfig(max_instruments=None, cache=False), "csi300")
    day = pd.Timestamp("2020-06-30")
    sq = intervals[(intervals["index"] == "CSI300") & (intervals["source"] == "sqlib")]
    members = set(sq[(pd.to_datetime(sq["start"]) <= day) & (pd.to_datetime(sq["end"]) >= day)]["instrument"])
    assert len(members) == 300
    got = set(frame[frame["date"] == day]["instrument"])
    assert got <= members and len(got) >= 280  # members without bars, suspended or unlabelled drop out
    per_day = frame.groupby("date").size()
    assert per_day.max() <= 300


def test_splits_warmup_and_suspensions(raw):
    bars, intervals, industry = raw
    frame = build_qlib_table(
        _subset(bars, 60), intervals, industry, QlibCnConfig(max_instruments=None, cache=False), "csi300"
    )
    spans = frame.groupby("split")["date"].agg(["min", "max"])
    assert spans.loc["train", "max"] < pd.Timestamp("2023-01-01") <= spans.loc["val", "min"]
    assert spans.loc["val", "max"] < pd.Timestamp("2024-01-01") <= spans.loc["test", "min"]
    calendar = np.sort(bars["date"].unique())
    assert frame["date"].min() == calendar[60]  # 60 warm-up days: every 60-day window is full
    suspended = bars[bars["close"].isna()][["date", "instrument"]]
    assert suspended.merge(frame, on=["date", "instrument"]).empty


@pytest.mark.parametrize(("norm", "cutoff"), [("none", "2020-06-30"), ("robust_zscore", "2023-06-30")])
def test_features_never_use_later_bars(raw, norm, cutoff):
    """Scramble every bar after the cutoff: features of earlier days must not move. (The robust
    normalizer is fitted on the training split, so the cutoff is after it in that case.)"""
    bars, intervals, industry = raw
    cfg = QlibCnConfig(max_instruments=None, feature_norm=norm, feature_set="all", cache=False)
    small = _subset(bars, 20)
    before = build_qlib_table(small, intervals, industry, cfg, "csi300")
    later = small["date"] > pd.Timestamp(cutoff)
    shaken = small.copy()
    rng = np.random.default_rng(0)
    for col in ("open", "high", "low", "close", "volume"):
        shaken.loc[later, col] = shaken.loc[later, col] * rng.uniform(0.5, 1.5, later.sum())
    after = build_qlib_table(shaken, intervals, industry, cfg, "csi300")
    features = list(before.columns[4:-3])
    early_b = before[before["date"] <= pd.Timestamp(cutoff)].reset_index(drop=True)
    early_a = after[after["date"] <= pd.Timestamp(cutoff)].reset_index(drop=True)
    pd.testing.assert_frame_equal(
        early_b[["date", "instrument", *features]], early_a[["date", "instrument", *features]]
    )
    assert not np.allclose(before[features].to_numpy(), after[features].to_numpy(), equal_nan=True)


def test_robust_zscore_matches_qlib_processor():
    x = np.array([[1.0, 10.0], [2.0, np.nan], [3.0, 30.0], [100.0, 20.0]])
    z = robust_zscore(x, np.array([0, 1, 2]))
    # column 0 fitted on 1, 2, 3: median 2, MAD 1 → scale 1.4826; 100 is clipped to 3
    np.testing.assert_allclose(z[:, 0], [-1 / 1.4826, 0, 1 / 1.4826, 3.0], rtol=1e-6)
    assert z[1, 1] == 0.0  # NaN → Fillna(0)


def test_cs_rank_norm():
    v = pd.Series([0.1, 0.3, 0.2, 5.0])
    d = pd.Series(["a", "a", "a", "b"])
    # day a ranks 0.1, 0.3, 0.2 at 1/3, 3/3, 2/3; day b's single member ranks 1
    want = [(1 / 3 - 0.5) * 3.46, 0.5 * 3.46, (2 / 3 - 0.5) * 3.46, 0.5 * 3.46]
    np.testing.assert_allclose(cross_sectional(v, d, "cs_rank"), want)


def test_csi800_and_loader(fedloom_cache):
    cfg = QlibCnConfig(max_instruments=10, feature_set="compact")
    table = load_qlib_cn(SHARED_DATA, cfg, "csi800")
    assert table.task_kind == "ranking" and len(table.covariates) == 20 and "CSI800" in " ".join(table.notes)
    assert list((fedloom_cache / "data").glob("qlib-csi800-*.parquet"))  # cached for the next load
    again = load_qlib_cn(SHARED_DATA, cfg, "csi800")
    pd.testing.assert_frame_equal(table.frame, again.frame)
    with pytest.raises(DataError, match="csi800 membership exists only in source 'sqlib'"):
        load_qlib_cn(SHARED_DATA, QlibCnConfig(max_instruments=10, membership="fr220574", cache=False), "csi800")


def test_market_frame_and_benchmark():
    market = market_frame(SHARED_DATA)
    assert {"date", "instrument", "close", "tradable", "factor"} <= set(market.columns)
    assert market["close"].notna().all()  # suspended days carry the last close
    assert not market["tradable"].all()  # suspensions and ±9.5 % limit days exist
    bench = benchmark_close(SHARED_DATA, "SH000300")
    assert bench.loc["2020-01-02"] == pytest.approx(4152.24, abs=0.01)  # from the bundle README


def test_volume_is_adjusted_like_qlibs(raw):
    """$volume = raw shares / factor (README: 600519 traded 1.481e7 shares on 2020-01-02, factor 6.49113)."""
    bars = raw[0]
    row = bars[(bars["instrument"] == "SH600519") & (bars["date"] == "2020-01-02")].iloc[0]
    assert row["volume"] == pytest.approx(1.481e7 / 6.49113, rel=1e-3)


def test_universe_is_chosen_on_the_training_period(raw):
    """A stock that joins the index only in the test period has many member days there, but no training
    member days: it never enters a capped universe (before, counting every split, it took a slot)."""
    bars, intervals, industry = raw
    small = _subset(bars, 12)
    names = sorted(small["instrument"].unique())
    late = names[0]
    # total member days: late ~357 (all in test) > names[2] ~180 (all in training)
    spans = [("2018-01-01", "2022-12-31"), ("2018-01-01", "2018-12-31"), ("2019-06-01", "2025-06-30")]
    planted = [
        {"index": "CSI300", "instrument": n, "start": a, "end": b, "source": "sqlib"}
        for n, (a, b) in zip(names[1:4], spans, strict=True)
    ] + [{"index": "CSI300", "instrument": late, "start": "2024-01-01", "end": "2025-06-30", "source": "sqlib"}]
    intervals = pd.DataFrame(planted)
    cfg = QlibCnConfig(max_instruments=3, cache=False)
    frame = build_qlib_table(small, intervals, industry, cfg, "csi300")
    assert set(frame["instrument"]) == set(names[1:4])  # the most training member days, late excluded


def test_a_split_past_the_membership_source_is_refused(raw):
    bars, intervals, industry = raw
    sq = intervals[intervals["source"] == "sqlib"].copy()
    sq["end"] = pd.to_datetime(sq["end"]).clip(upper=pd.Timestamp("2024-12-31")).dt.strftime("%Y-%m-%d")
    with pytest.raises(DataError, match=r"ends on 2024-12-31, but the split runs to 2025-06-30.*test_end"):
        build_qlib_table(_subset(bars), sq, industry, QlibCnConfig(max_instruments=None, cache=False), "csi300")


def test_the_cached_table_changes_with_the_feature_code(fedloom_cache, monkeypatch):
    from fedloom.data import qlib_cn

    load_qlib_cn(SHARED_DATA, QlibCnConfig(max_instruments=5), "csi300")
    monkeypatch.setattr(qlib_cn, "FEATURE_CODE", "changed-code")
    load_qlib_cn(SHARED_DATA, QlibCnConfig(max_instruments=5), "csi300")
    assert len(list((fedloom_cache / "data").glob("qlib-csi300-*.parquet"))) == 2  # a new key, a rebuild


def test_concepts_are_each_stocks_two_sw_industries_and_stay_zero_one(raw):
    """HIST's stand-in concepts: a stock is in its SW level-1 and level-2 industry (from its level-3
    code), none for a stock without an industry; the columns are not normalized like the features."""
    bars, intervals, industry = raw
    cfg = QlibCnConfig(feature_set="compact", concepts=True, cache=False)
    frame = build_qlib_table(_subset(bars, 40), intervals, industry, cfg, "csi300")
    concepts = [c for c in frame.columns if c.startswith("CONCEPT_")]
    assert concepts and set(np.unique(frame[concepts].to_numpy())) <= {0.0, 1.0}
    code = dict(zip(industry["instrument"], industry["sw_code"].astype(str), strict=True))
    for _, row in frame.drop_duplicates("instrument").iterrows():
        member = {c for c in concepts if row[c] == 1.0}
        sw = code.get(row["instrument"])
        assert member == (set() if sw is None else {f"CONCEPT_L1_{sw[:2]}", f"CONCEPT_L2_{sw[:4]}"})
    assert frame.columns.get_loc(concepts[-1]) < frame.columns.get_loc("return")
