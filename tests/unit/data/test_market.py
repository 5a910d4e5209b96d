"""MASTER's inputs: the 63 market-status features on the real index bars, checked against the
formulas by hand, and lagged stock features that are exactly the same stock's earlier rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.data.market import MARKET_INDEXES, market_names, market_status, statistic_names
from fedloom.data.qlib_cn import QlibCnConfig, build_qlib_table, feature_names, load_bars
from fedloom.errors import DataError
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
FOLDER = SHARED_DATA / "qlib_cn"


@pytest.fixture(scope="module")
def index_daily() -> pd.DataFrame:
    return pd.read_csv(FOLDER / "index_daily.csv", parse_dates=["date"])


def test_names_are_masters_21_per_index() -> None:
    assert len(statistic_names()) == 21 and len(market_names()) == 63
    assert statistic_names()[:5] == ("RET0", "RETMEAN5", "RETSTD5", "VOLMEAN5", "VOLSTD5")
    assert market_names()[21] == f"MKT_{MARKET_INDEXES[1]}_RET0"


def test_market_status_matches_the_formulas_by_hand(index_daily: pd.DataFrame) -> None:
    bars = index_daily[index_daily["instrument"] == "SH000905"].sort_values("date").reset_index(drop=True)
    dates = pd.DatetimeIndex(bars["date"])
    status = market_status(index_daily, dates)
    close, volume = bars["close"].to_numpy(), bars["volume"].to_numpy(float)
    returns = close[1:] / close[:-1] - 1  # returns[j] is day j+1's
    for day in (100, 731, len(bars) - 1):
        row = status.loc[dates[day]]
        assert row["MKT_SH000905_RET0"] == pytest.approx(close[day] / close[day - 1] - 1, rel=1e-12)
        for d in (5, 30, 60):
            window = returns[day - d : day]
            assert row[f"MKT_SH000905_RETMEAN{d}"] == pytest.approx(window.mean(), rel=1e-9)
            assert row[f"MKT_SH000905_RETSTD{d}"] == pytest.approx(window.std(ddof=1), rel=1e-9)
            v = volume[day - d + 1 : day + 1]
            assert row[f"MKT_SH000905_VOLMEAN{d}"] == pytest.approx(v.mean() / volume[day], rel=1e-9)
            assert row[f"MKT_SH000905_VOLSTD{d}"] == pytest.approx(v.std(ddof=1) / volume[day], rel=1e-9)
    # a window longer than the history so far uses what there is (Qlib's min_periods=1)
    assert status.iloc[3]["MKT_SH000905_RETMEAN60"] == pytest.approx(returns[:3].mean(), rel=1e-12)
    assert np.isnan(status.iloc[0]["MKT_SH000905_RET0"])


def test_market_status_is_nan_off_the_index_calendar_and_refuses_a_missing_index(index_daily) -> None:
    status = market_status(index_daily, pd.DatetimeIndex(["2020-06-06"]))  # a Saturday
    assert status.isna().all(axis=None)
    with pytest.raises(DataError, match="SH000300"):
        market_status(index_daily[index_daily["instrument"] != "SH000300"], pd.DatetimeIndex(["2020-06-05"]))


def test_lags_are_the_same_stocks_earlier_rows_and_the_market_is_the_days(index_daily) -> None:
    bars = load_bars(FOLDER)
    keep = sorted(bars["instrument"].unique())[:12]
    small = bars[bars["instrument"].isin(keep)].reset_index(drop=True)
    intervals = pd.read_csv(FOLDER / "membership.csv.gz")
    industry = pd.read_csv(FOLDER / "industry_sw2021.csv")
    cfg = QlibCnConfig(feature_set="compact", step_len=3, market=True, feature_norm="none", cache=False)
    frame = build_qlib_table(small, intervals, industry, cfg, "csi300", index_daily)
    names = feature_names(cfg)
    assert list(frame.columns[4 : 4 + len(names)]) == list(names) and len(names) == 3 * 20 + 63
    assert names[0].endswith("@2") and names[20].endswith("@1") and "@" not in names[40]
    stock = frame[frame["instrument"] == keep[0]].set_index("date")
    calendar = pd.DatetimeIndex(sorted(small["date"].unique()))
    pairs = [(d, calendar[calendar.get_loc(d) - 2]) for d in stock.index[400:]]
    checked = [(d, e) for d, e in pairs if e in stock.index][:50]  # the stock has a row two trading days back
    assert len(checked) == 50
    for base in (names[40], names[59]):
        for d, e in checked:
            assert stock.loc[d, f"{base}@2"] == pytest.approx(stock.loc[e, base], rel=1e-6, nan_ok=True)
    day = checked[0][0]
    same_day = frame[frame["date"] == day]
    assert same_day[list(market_names())].nunique().max() == 1  # one market status per day
    expected = market_status(index_daily, pd.DatetimeIndex([day])).iloc[0]
    np.testing.assert_allclose(same_day.iloc[0][list(market_names())].to_numpy(float), expected.to_numpy(), rtol=1e-6)
    normalized = build_qlib_table(small, intervals, industry, cfg.model_copy(update={"feature_norm": "robust_zscore"}),
                                  "csi300", index_daily)  # fmt: skip
    x = normalized[list(names)].to_numpy()
    assert np.isfinite(x).all() and np.abs(x).max() <= 3.0
    with pytest.raises(DataError, match="index bars"):
        build_qlib_table(small, intervals, industry, cfg, "csi300")
