"""Social-media and news posts aligned to trading days, and the lag-window text of each sample.

A post belongs to the first trading row of its instrument whose close comes after it: posted at
15:59 New York time on a trading day → that day; at 16:01, on a weekend or a holiday → the next
trading row. A sample dated ``p`` then sees the posts of its last ``lag`` rows up to and including
``p`` — all published before ``p``'s close, so nothing after the sample's date leaks in::

    posts                                  rows of AAPL        window text (lag 2) of the 01-06 sample
    AAPL  2015-01-05 14:00  "beats ..."    2015-01-02  row 0   "beats ...\\nlate note ..."
    AAPL  2015-01-05 20:00  "late note"    2015-01-05  row 1
                                           2015-01-06  row 2   (20:00 on 01-05 is after 01-05's close)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MARKET_TZ = "America/New_York"
CLOSE_HOUR = 16


def session_days(local_times: pd.Series) -> np.ndarray:
    """Calendar day whose close first follows each post, from naive New York local times."""
    day = local_times.dt.normalize()
    after_close = local_times >= day + pd.Timedelta(hours=CLOSE_HOUR)
    return (day + pd.to_timedelta(after_close.astype(int), unit="D")).to_numpy(dtype="datetime64[D]")


def utc_to_market(times: pd.Series) -> pd.Series:
    """UTC timestamps (aware or naive) → naive New York local time, daylight saving included."""
    t = pd.to_datetime(times, utc=True)
    return t.dt.tz_convert(MARKET_TZ).dt.tz_localize(None)


def assign_rows(posts: pd.DataFrame, rows: pd.DataFrame) -> pd.Series:
    """Row position (within its instrument) of each post: the first row dated on or after ``day``.

    ``posts`` has ``instrument`` and ``day`` (session day); ``rows`` has ``instrument`` and ``date``
    sorted per instrument. Posts after an instrument's last row, or of unknown instruments, get -1.
    """
    out = pd.Series(-1, index=posts.index, dtype=np.int64)
    calendars = {k: g.to_numpy(dtype="datetime64[D]") for k, g in rows.groupby("instrument")["date"]}
    for inst, group in posts.groupby("instrument"):
        cal = calendars.get(inst)
        if cal is None:
            continue
        pos = np.searchsorted(cal, group["day"].to_numpy(dtype="datetime64[D]"), side="left")
        out.loc[group.index] = np.where(pos < len(cal), pos, -1)
    return out


def window_texts(posts: pd.DataFrame, samples: pd.DataFrame, lag: int, max_per_row: int, dedupe: bool) -> list[str]:
    """Text of each sample: posts of rows ``row - lag + 1 … row`` of its instrument, oldest first.

    ``posts`` has ``instrument``, ``row``, ``time`` and ``text``; ``samples`` has ``instrument`` and
    ``row``. Within a row, repeated texts are kept once (``dedupe``; retweets) and only the latest
    ``max_per_row`` posts stay. Posts are joined by newlines, so a token budget that cuts from the
    start keeps the most recent ones.
    """
    p = posts[posts["row"] >= 0].sort_values(["instrument", "row", "time"], kind="stable")
    if dedupe:
        p = p.drop_duplicates(["instrument", "row", "text"], keep="last")
    p = p.groupby(["instrument", "row"], sort=False).tail(max_per_row)
    daily = p.groupby(["instrument", "row"], sort=False)["text"].agg("\n".join).to_dict()
    out = []
    for inst, row in zip(samples["instrument"], samples["row"], strict=True):
        parts = [daily.get((inst, r)) for r in range(row - lag + 1, row + 1)]
        out.append("\n".join(t for t in parts if t))
    return out
