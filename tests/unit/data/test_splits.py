"""Standard splits by date, split selection, and the CPU-sized date cap."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from fedloom.data.schema import SampleTable
from fedloom.data.splits import SplitDates, table_splits, thin_dates, with_split_column


def _table(dates: list[str], split: list[str] | None = None) -> SampleTable:
    frame = pd.DataFrame({"date": pd.to_datetime(dates), "instrument": "X", "group": "g", "text": "", "target": 0.0})
    if split is not None:
        frame["split"] = split
    return SampleTable(frame, (), "t")


def test_split_dates_label_and_order():
    s = SplitDates(train_start="2014-01-01", val_start="2015-08-01", test_start="2015-10-01", test_end="2015-12-31")
    got = s.label(pd.to_datetime(["2013-12-31", "2015-07-31", "2015-08-01", "2015-12-31", "2016-01-01"]))
    assert got.tolist() == ["", "train", "val", "test", ""]
    with pytest.raises(ValidationError, match="split dates must increase"):
        SplitDates(train_start="2020-01-01", val_start="2019-01-01", test_start="2021-01-01")


def test_table_splits_prefers_the_standard_split():
    dates = ["2020-01-01", "2020-01-02", "2020-01-03", "2020-01-04"]
    standard = table_splits(_table(dates, ["train", "test", "train", "val"]), (0.5, 0.25, 0.25))
    assert {k: v.tolist() for k, v in standard.items()} == {"train": [0, 2], "val": [3], "test": [1]}
    chrono = table_splits(_table(dates), (0.5, 0.25, 0.25))
    assert {k: v.tolist() for k, v in chrono.items()} == {"train": [0, 1], "val": [2], "test": [3]}
    assert with_split_column(_table(dates), (0.5, 0.25, 0.25))["split"].tolist() == ["train", "train", "val", "test"]


@settings(max_examples=40, deadline=None)
@given(
    days=st.integers(3, 60),
    per_day=st.integers(1, 4),
    cap=st.none() | st.integers(1, 30),
    test_cap=st.none() | st.integers(1, 30),
    val_cap=st.none() | st.just("all") | st.integers(1, 30),
)
def test_thin_dates_keeps_whole_days_spread_over_each_split(days, per_day, cap, test_cap, val_cap):
    dates = np.repeat(pd.bdate_range("2021-01-04", periods=days), per_day)
    third = np.arange(len(dates)) * 3 // len(dates)
    split = np.array(["train", "val", "test"])[third]
    frame = pd.DataFrame({"date": dates, "split": split, "v": np.arange(len(dates))})
    out = thin_dates(frame, cap, test_cap, val_cap)
    # the test split has its own cap (none by default); val follows the train cap unless set, "all" = none
    limits = {
        "train": cap,
        "test": test_cap,
        "val": cap if val_cap is None else (None if val_cap == "all" else val_cap),
    }
    for name, part in out.groupby("split"):
        full = frame[frame["split"] == name]
        kept = part["date"].unique()
        limit = limits[str(name)]
        assert len(kept) == min(limit or days, full["date"].nunique())
        if len(kept) > 1:  # the first and last day of the split are always kept
            assert kept.min() == full["date"].min() and kept.max() == full["date"].max()
        # every kept date keeps all of its rows (whole cross-sections)
        assert len(part) == full["date"].isin(kept).sum()
    assert out["v"].is_monotonic_increasing
