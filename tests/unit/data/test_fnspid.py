"""FNSPID sample on the real files: corrected news times, next-day target, covariates from the past only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.data.fnspid import COVARIATES, FnspidConfig, build_fnspid, news_local_time
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
FOLDER = SHARED_DATA / "fnspid"
AA = FnspidConfig(tickers=["AA", "AAPL"])


@pytest.fixture(scope="module")
def raw():
    prices = pd.read_csv(FOLDER / "prices_sentiment.csv.gz", parse_dates=["date"])
    return prices, pd.read_json(FOLDER / "news.jsonl", lines=True, dtype=False)


def test_publication_times_reproduce_the_corrected_dates(raw):
    """The bundle's ``date`` column is the corrected (US/Eastern) day: our local times agree on all rows."""
    _, news = raw
    assert (news_local_time(news).dt.strftime("%Y-%m-%d") == news["date"]).all()


def test_target_is_next_day_return_and_sentiment_is_lagged(raw):
    prices, news = raw
    f = build_fnspid(prices, news, AA).frame
    aa = prices[prices["ticker"] == "AA"].sort_values("date").reset_index(drop=True)
    row = f[(f["instrument"] == "AA")].iloc[100]
    k = aa.index[aa["date"] == row["date"]][0]
    assert row["target"] == pytest.approx(aa["adj_close"][k + 1] / aa["adj_close"][k] - 1)
    assert row["sentiment_prev"] == pytest.approx(aa["sentiment_gpt"][k - 1])
    assert row["ret5"] == pytest.approx(aa["adj_close"][k] / aa["adj_close"][k - 5] - 1)


def test_news_after_the_close_counts_for_the_next_trading_day(raw):
    prices, news = raw
    f = build_fnspid(prices, news, AA).frame.set_index(["instrument", "date"])
    local = news_local_time(news)
    late = news[
        (news["ticker"] == "AA") & (local.dt.hour >= 17) & (local.dt.day_of_week < 4) & (local.dt.year == 2020)
    ].iloc[0]
    day = pd.Timestamp(late["date"])
    headline = late["headline"]
    assert headline not in f.loc[("AA", day), "text"]
    next_day = f.loc["AA"].index[f.loc["AA"].index > day][0]
    assert headline in f.loc[("AA", next_day), "text"]


def test_inputs_never_use_later_information(raw):
    prices, news = raw
    cutoff = pd.Timestamp("2019-06-28")
    shaken_p, shaken_n = prices.copy(), news.copy()
    later = shaken_p["date"] > cutoff
    shaken_p.loc[later, ["open", "high", "low", "close", "adj_close", "volume", "sentiment_gpt"]] *= 1.9
    late = news_local_time(shaken_n) >= cutoff + pd.Timedelta(hours=16)
    shaken_n.loc[late, "headline"] = "FUTURE"
    before, after = build_fnspid(prices, news, AA).frame, build_fnspid(shaken_p, shaken_n, AA).frame
    inputs = ["date", "instrument", "text", *COVARIATES]
    pd.testing.assert_frame_equal(
        before[before["date"] <= cutoff][inputs].reset_index(drop=True),
        after[after["date"] <= cutoff][inputs].reset_index(drop=True),
    )
    assert after[after["date"] > cutoff]["text"].str.contains("FUTURE").any()


def test_full_table_shape(raw):
    table = build_fnspid(*raw, FnspidConfig())
    f = table.frame
    assert f["instrument"].nunique() == 51 and table.default_partition == "dirichlet"
    assert np.isfinite(f[list(COVARIATES)].to_numpy()).all()
    assert set(f.loc[f["text"] != "", "instrument"]) == {"AA"}  # AAPL's articles postdate its prices
