"""Posts land on the first trading row whose 16:00 New York close follows them; windows look back only."""

from __future__ import annotations

import pandas as pd

from fedloom.data.posts import assign_rows, session_days, utc_to_market, window_texts


def test_close_boundary_and_daylight_saving():
    # 20:59 UTC in January is 15:59 EST (before the close); 21:01 UTC is after it.
    # 19:59 UTC in July is 15:59 EDT; 20:01 UTC is after the close.
    utc = pd.Series(["2015-01-05T20:59:00Z", "2015-01-05T21:01:00Z", "2015-07-06T19:59:00Z", "2015-07-06T20:01:00Z"])
    days = session_days(utc_to_market(utc)).astype(str).tolist()
    assert days == ["2015-01-05", "2015-01-06", "2015-07-06", "2015-07-07"]


def test_weekend_and_after_last_row():
    rows = pd.DataFrame(
        {"instrument": ["A", "A", "A"], "date": pd.to_datetime(["2015-01-02", "2015-01-05", "2015-01-06"])}
    )
    posts = pd.DataFrame(
        {
            "instrument": ["A", "A", "A", "B"],
            "day": pd.to_datetime(["2015-01-03", "2015-01-02", "2015-01-07", "2015-01-02"]),
        }
    )
    assert assign_rows(posts, rows).tolist() == [1, 0, -1, -1]  # Saturday → Monday; beyond; unknown ticker


def test_window_texts_lag_cap_dedupe_order():
    posts = pd.DataFrame(
        {
            "instrument": ["A"] * 6,
            "row": [0, 1, 1, 1, 2, 3],
            "time": [1, 2, 3, 4, 5, 6],
            "text": ["old", "x", "x", "y", "today", "future"],
        }
    )
    samples = pd.DataFrame({"instrument": ["A", "A"], "row": [2, 0]})
    texts = window_texts(posts, samples, lag=2, max_per_row=5, dedupe=True)
    assert texts == ["x\ny\ntoday", "old"]  # row 3 (after the sample) never appears
    capped = window_texts(posts, samples, lag=2, max_per_row=1, dedupe=False)
    assert capped[0] == "y\ntoday"  # the latest post of each row is kept
