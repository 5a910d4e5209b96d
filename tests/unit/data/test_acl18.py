"""ACL18 / StockNet on the real files: the paper's samples and labels, GLT's features, tweet timing, no look-ahead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.data.acl18 import Acl18Config, build_acl18
from fedloom.data.glt import GLT_FEATURES, PLACEHOLDER
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
FOLDER = SHARED_DATA / "acl18"


@pytest.fixture(scope="module")
def raw():
    prices = pd.read_csv(FOLDER / "prices.csv", parse_dates=["date"])
    tweets = pd.read_json(FOLDER / "tweets.jsonl", lines=True, dtype=False)
    return prices, tweets, pd.read_csv(FOLDER / "sectors.csv")


@pytest.fixture(scope="module")
def table(raw):
    return build_acl18(*raw, Acl18Config())


def test_samples_and_labels_are_the_papers(table):
    """26,614 samples with exactly the label of every row of StockNet's derived labels.csv."""
    labels = pd.read_csv(FOLDER / "labels.csv", parse_dates=["date"])
    labels = labels[labels["price_window_ok"] == 1]
    merged = labels.merge(table.frame, left_on=["ticker", "date"], right_on=["instrument", "target_date"], how="outer")
    assert len(table) == len(labels) == 26_614 and merged["target"].notna().all() and merged["label"].notna().all()
    assert (merged["label"] == merged["target"]).all() and (
        merged["split_x"] == merged["split_y"].replace("val", "dev")
    ).all()
    counts = pd.crosstab(table.frame["split"], table.frame["target"])
    assert counts.loc["train"].tolist() == [10_021, 10_318]  # README: train 20,339 = 10,318 rise / 10,021 fall
    assert counts.loc["val"].tolist() == [1_416, 1_139] and counts.loc["test"].tolist() == [1_812, 1_908]
    assert table.task_kind == "classification" and table.num_classes == 2
    assert sorted(table.frame["group"].unique())[0] == "Basic Materials" and table.frame["group"].nunique() == 9


def test_covariates_equal_glt_features_of_the_previous_day(table):
    """Recomputed from prices.csv, the 11 features of day p equal GLT's features.csv (6 decimals)."""
    glt = pd.read_csv(FOLDER / "features.csv.gz", parse_dates=["date"])
    glt = glt[~(glt[list(GLT_FEATURES)] == PLACEHOLDER).any(axis=1)]
    merged = table.frame.merge(glt, left_on=["instrument", "date"], right_on=["ticker", "date"], suffixes=("", "_glt"))
    assert len(merged) > 26_000
    for col in GLT_FEATURES:
        np.testing.assert_allclose(merged[col], merged[f"{col}_glt"], atol=1e-6, err_msg=col)
    assert (table.frame["date"] < table.frame["target_date"]).all()


def test_inputs_never_use_later_information(raw):
    """Scramble prices after a cutoff and every tweet posted after its close: earlier samples keep
    their text and covariates; their targets may change (they are realized after the date)."""
    prices, tweets, sectors = raw
    cutoff = pd.Timestamp("2015-03-02")
    close_utc = pd.Timestamp("2015-03-02 16:00", tz="America/New_York").tz_convert("UTC")
    shaken_prices = prices.copy()
    later = shaken_prices["date"] > cutoff
    shaken_prices.loc[later, ["open", "high", "low", "close", "adj_close"]] *= 1.37
    shaken_tweets = tweets.copy()
    late = pd.to_datetime(shaken_tweets["created_at"], utc=True) >= close_utc
    shaken_tweets.loc[late, "text"] = "FUTURE " + shaken_tweets.loc[late, "text"]
    cfg = Acl18Config(target="return")
    before, after = (
        build_acl18(prices, tweets, sectors, cfg).frame,
        build_acl18(shaken_prices, shaken_tweets, sectors, cfg).frame,
    )
    inputs = ["date", "instrument", "text", *GLT_FEATURES]
    early_b = before[before["date"] <= cutoff][inputs].reset_index(drop=True)
    early_a = after[after["date"] <= cutoff][inputs].reset_index(drop=True)
    pd.testing.assert_frame_equal(early_b, early_a)
    assert after[after["date"] > cutoff]["text"].str.contains("FUTURE").any()


def test_tweets_count_from_their_timestamp_not_their_file_day():
    """A tweet at 17:30 New York time (filed under the next UTC day or not) belongs to the next session."""
    dates = pd.bdate_range("2015-01-01", periods=12)
    prices = pd.DataFrame(
        {
            "ticker": "AAA",
            "date": dates,
            "open": 10.0,
            "high": 10.5,
            "low": 9.5,
            "close": 10.0,
            "adj_close": 10.0 * 1.01 ** np.arange(12),
            "volume": 1e6,
        }
    )
    tweets = pd.DataFrame(
        {
            "ticker": "AAA",
            "date": ["2015-01-13", "2015-01-13"],
            "created_at": ["2015-01-13T20:00:00Z", "2015-01-13T22:30:00Z"],  # 15:00 and 17:30 EST
            "text": ["before close", "after close"],
        }
    )
    sectors = pd.DataFrame({"ticker": ["AAA"], "sector": ["Tech"], "company": ["A"]})
    cfg = Acl18Config(
        target="return",
        lag_days=1,
        split_dates={"train_start": "2015-01-01", "val_start": "2015-01-15", "test_start": "2015-01-16"},
    )
    frame = build_acl18(prices, tweets, sectors, cfg).frame.set_index("date")
    assert frame.loc["2015-01-13", "text"] == "before close"
    assert frame.loc["2015-01-14", "text"] == "after close"
    stocknet = build_acl18(prices, tweets, sectors, cfg.model_copy(update={"tweet_time": "file_date"})).frame
    assert stocknet.set_index("date").loc["2015-01-13", "text"] == "before close\nafter close"


def test_return_target_keeps_every_day(raw):
    table = build_acl18(*raw, Acl18Config(target="return"))
    assert table.task_kind == "regression" and len(table) > 30_000
    np.testing.assert_allclose(table.frame["target"], table.frame["return"])


def test_a_feature_window_lays_out_the_last_days_oldest_first_for_the_sequence_references(raw, table):
    """``feature_window: 5``: the 11 features of the 5 days up to p, field by field, lags descending (what the
    LSTM / Transformer references read as [T = 5, F = 11]); day p's own columns equal the plain table's, and
    lag 1 of a sample is lag 0 of the same ticker's sample a row earlier."""
    from fedloom.references.sequence import sequence_layout

    windowed = build_acl18(*raw, Acl18Config(feature_window=5))
    names = list(windowed.covariates)
    assert len(names) == 55 and names[:5] == [f"c_open_{k}" for k in (4, 3, 2, 1, 0)]
    assert sequence_layout(names) == (11, 5)
    w, plain = windowed.frame, table.frame
    assert (
        len(w) == len(plain)
        and (w[["instrument", "date"]].to_numpy() == plain[["instrument", "date"]].to_numpy()).all()
    )
    for f in GLT_FEATURES:
        np.testing.assert_array_equal(w[f"{f}_0"].to_numpy(), plain[f].to_numpy())
    prices = raw[0].sort_values(["ticker", "date"])
    aapl = prices[prices["ticker"] == "AAPL"].reset_index(drop=True)
    position = {d: i for i, d in enumerate(aapl["date"])}
    samples = w[w["instrument"] == "AAPL"]
    row = samples[samples["date"].map(position) >= 40].iloc[0]  # a sample deep enough into the history
    p = position[row["date"]]
    expected = 100 * (aapl["close"] / aapl["close"].shift(1) - 1)  # n_close, 100 (close_t / close_t-1 - 1)
    got = [row[f"n_close_{k}"] for k in (4, 3, 2, 1, 0)]
    np.testing.assert_allclose(got, expected.iloc[p - 4 : p + 1].to_numpy(), rtol=1e-9)
