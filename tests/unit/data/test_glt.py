"""GLT-format movement sets: BigData22's standard split and labels, placeholder rows, any same-format folder."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from fedloom.data.glt import GLT_FEATURES, PLACEHOLDER, GltConfig, build_glt, load_glt
from fedloom.errors import DataError
from tests.conftest import SHARED_DATA

shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")


@shared
def test_bigdata22_split_and_labels_match_the_readme():
    table = load_glt(SHARED_DATA, GltConfig())
    counts = pd.crosstab(table.frame["split"], table.frame["target"])
    # README: train 2,658 rise / 2,487 fall, valid 959 / 1,019, test 930 / 813
    assert counts.loc["train"].tolist() == [2_487, 2_658]
    assert counts.loc["val"].tolist() == [1_019, 959] and counts.loc["test"].tolist() == [813, 930]
    f = table.frame
    assert f["target_date"].max() <= pd.Timestamp("2020-07-02") and (f["date"] < f["target_date"]).all()
    np.testing.assert_array_equal(f["target"], (f["return"] >= 0.0055).astype(int))
    assert table.default_partition == "dirichlet" and (f["group"] == f["instrument"]).all()
    assert (f["text"] != "").mean() > 0.9


@shared
def test_inputs_never_use_later_rows():
    prices = pd.read_csv(SHARED_DATA / "bigdata22" / "prices.csv")
    tweets = pd.read_json(SHARED_DATA / "bigdata22" / "tweets.jsonl.gz", lines=True, dtype=False)
    cutoff = "2020-01-15"
    shaken_p, shaken_t = prices.copy(), tweets.copy()
    shaken_p.loc[shaken_p["date"] > cutoff, list(GLT_FEATURES)] *= -3
    shaken_t.loc[shaken_t["date"] > cutoff, "text"] = "FUTURE"
    cfg = GltConfig(target="return")
    before, after = (
        build_glt(prices, tweets, None, cfg, "b").frame,
        build_glt(shaken_p, shaken_t, None, cfg, "b").frame,
    )
    inputs = ["date", "instrument", "text", *GLT_FEATURES]
    early = pd.Timestamp(cutoff)
    pd.testing.assert_frame_equal(
        before[before["date"] <= early][inputs].reset_index(drop=True),
        after[after["date"] <= early][inputs].reset_index(drop=True),
    )
    assert (after[after["date"] > early]["text"].str.contains("FUTURE")).any()


@shared
def test_acl18_features_file_loads_as_glt_and_placeholders_are_dropped():
    """ACL18's features.csv.gz is GLT format with 758 placeholder rows (-123321): none may leak in."""
    cfg = GltConfig(
        folder="acl18",
        prices_file="features.csv.gz",
        tweets_file="tweets.jsonl",
        sectors_file="sectors.csv",
        split_dates={
            "train_start": "2014-01-01",
            "val_start": "2015-08-01",
            "test_start": "2015-10-01",
            "test_end": "2015-12-31",
        },
    )
    table = load_glt(SHARED_DATA, cfg, name="acl18-glt")
    assert not (table.frame[list(GLT_FEATURES)] == PLACEHOLDER).any().any()
    assert table.frame["group"].nunique() == 9 and table.default_partition == "sector"
    # placeholder days of BABA / AGFS are gone, so their first real day has no previous row and no sample
    assert table.frame[table.frame["instrument"] == "BABA"]["date"].min() > pd.Timestamp("2014-09-19")


def test_any_folder_in_the_format_loads(tmp_path):
    folder = tmp_path / "mymarket"
    folder.mkdir()
    dates = pd.bdate_range("2021-01-04", periods=8).strftime("%Y-%m-%d")
    rows = []
    for t, moves in {
        "XX": [0.1, 1.0, -0.8, 0.6, 0.0, -1.2, 2.0, 0.3],
        "YY": [0.2, -0.9, 0.7, 0.1, -0.6, 0.9, -2.0, 1.1],
    }.items():
        for d, mv in zip(dates, moves, strict=True):
            label = 1 if mv >= 0.55 else (-1 if mv <= -0.5 else 0)
            rows.append(
                {
                    "ticker": t,
                    "date": d,
                    **dict.fromkeys(GLT_FEATURES, 0.5),
                    "n_adj_close": mv,
                    "label": label,
                    "closing_price_for_label": 10.0,
                }
            )
    pd.DataFrame(rows).to_csv(folder / "prices.csv", index=False)
    with gzip.open(folder / "tweets.jsonl.gz", "wt") as f:
        f.write(json.dumps({"ticker": "XX", "date": dates[2], "text": "xx up"}) + "\n")
    pd.DataFrame({"ticker": ["XX", "YY"], "sector": ["Tech", "Energy"]}).to_csv(folder / "sectors.csv", index=False)
    cfg = GltConfig(
        folder="mymarket",
        sectors_file="sectors.csv",
        lag_days=2,
        split_dates={"train_start": "2021-01-04", "val_start": "2021-01-08", "test_start": "2021-01-12"},
    )
    table = load_glt(tmp_path, cfg, name="mymarket")
    f = table.frame.set_index(["instrument", "target_date"])
    assert len(table) == 11 and set(table.frame["group"]) == {"Tech", "Energy"}
    assert f.loc[("XX", pd.Timestamp(dates[3])), "text"] == "xx up"  # posted on p = dates[2]
    assert f.loc[("XX", pd.Timestamp(dates[5])), "text"] == ""  # outside the 2-day window
    assert f.loc[("XX", pd.Timestamp(dates[3])), "n_adj_close"] == -0.8  # features of the previous row
    windowed = load_glt(tmp_path, cfg.model_copy(update={"feature_window": 3}), name="mymarket")
    w = windowed.frame.set_index(["instrument", "target_date"])
    assert len(windowed.covariates) == 33 and len(windowed) == 11
    assert w.loc[("XX", pd.Timestamp(dates[5])), ["n_adj_close_2", "n_adj_close_1", "n_adj_close_0"]].tolist() == [
        -0.8, 0.6, 0.0
    ]  # the 3 rows up to p = dates[4], oldest first  # fmt: skip
    assert w.loc[("XX", pd.Timestamp(dates[1])), "n_adj_close_2"] == 0.0  # before the history: no move


def test_bad_label_names_file_and_row(tmp_path):
    prices = pd.DataFrame({"ticker": ["X"], "date": ["2021-01-04"], **{c: [0.0] for c in GLT_FEATURES}, "label": [2]})
    with pytest.raises(DataError, match=r"p.csv: column 'label' must be -1, 0 or 1; row 0 has 2"):
        build_glt(prices, pd.DataFrame(columns=["ticker", "date", "text"]), None, GltConfig(), "x", source="p.csv")


def test_dates_outside_the_split_name_the_span_and_the_keys(tmp_path):
    dates = ["2021-01-04", "2021-01-05", "2021-01-06"]
    prices = pd.DataFrame({"ticker": "X", "date": dates, **{c: [0.6] * 3 for c in GLT_FEATURES}, "label": [1, 1, -1]})
    tweets = pd.DataFrame(columns=["ticker", "date", "text"])
    with pytest.raises(DataError, match=r"p\.csv: its target days run 2021-01-04 to 2021-01-06, outside .*"
                       r"\(2019-07-05 to 2020-07-02\); set data\.bigdata22\.split_dates\.train_start"):  # fmt: skip
        build_glt(prices, tweets, None, GltConfig(), "x", source="p.csv")
