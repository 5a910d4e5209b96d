"""MASTER's market status (Li et al., AAAI 2024, §"Market-Guided Gating"): 21 numbers per index per day,
the same for every stock of that day, that MASTER's gate reads to rescale the stock features.

For an index with close c and volume v, r_t = c_t / c_{t-1} − 1 and, for d in 5, 10, 20, 30, 60::

    RET0            r_t
    RETMEAN{d}      Mean(r, d)            RETSTD{d}   Std(r, d)
    VOLMEAN{d}      Mean(v, d) / v_t      VOLSTD{d}   Std(v, d) / v_t

(the expressions of MASTER's Qlib handler ``marketDataHandler``, examples/benchmarks/MASTER of
zhiyuan5986/qlib; Qlib operators: windows of up to d days, at least one value, Std with ddof 1).
MASTER reads CSI300, CSI100 (SH000903) and CSI500; the bundle has no CSI100, so CSI800 (SH000906)
takes its place — a labelled substitution."""

from __future__ import annotations

import pandas as pd

from fedloom.errors import DataError

MARKET_INDEXES = ("SH000300", "SH000905", "SH000906")  # MASTER: SH000300, SH000903, SH000905 (see above)
WINDOWS = (5, 10, 20, 30, 60)
PREFIX = "MKT_"


def statistic_names() -> tuple[str, ...]:
    """The 21 statistics of one index, in MASTER's order."""
    per_window = [(f"RETMEAN{d}", f"RETSTD{d}", f"VOLMEAN{d}", f"VOLSTD{d}") for d in WINDOWS]
    return ("RET0", *(name for group in per_window for name in group))


def market_names(indexes: tuple[str, ...] = MARKET_INDEXES) -> tuple[str, ...]:
    """Column names ``MKT_<index>_<statistic>``: 21 per index (63 for MASTER's three)."""
    return tuple(f"{PREFIX}{code}_{stat}" for code in indexes for stat in statistic_names())


def index_status(close: pd.Series, volume: pd.Series) -> pd.DataFrame:
    """The 21 statistics of one index over its dates (rows: dates, columns: `statistic_names`)."""
    ret = close / close.shift(1) - 1
    out = {"RET0": ret}
    for d in WINDOWS:
        r, v = ret.rolling(d, min_periods=1), volume.rolling(d, min_periods=1)
        out |= {f"RETMEAN{d}": r.mean(), f"RETSTD{d}": r.std(), f"VOLMEAN{d}": v.mean() / volume,
                f"VOLSTD{d}": v.std() / volume}  # fmt: skip
    return pd.DataFrame(out)[list(statistic_names())]


def market_status(index_daily: pd.DataFrame, dates: pd.DatetimeIndex,
                  indexes: tuple[str, ...] = MARKET_INDEXES) -> pd.DataFrame:  # fmt: skip
    """[dates × 63] market features from long ``instrument, date, close, volume`` index bars, computed on
    each index's own calendar and then read on ``dates`` (a date the index did not trade is NaN)."""
    parts = []
    for code in indexes:
        rows = index_daily[index_daily["instrument"] == code].sort_values("date")
        if rows.empty:
            raise DataError(f"index_daily.csv has no rows for {code!r}: MASTER's market status needs {indexes}")
        status = index_status(rows.set_index("date")["close"].astype(float),
                              rows.set_index("date")["volume"].astype(float))  # fmt: skip
        status.columns = [f"{PREFIX}{code}_{c}" for c in status.columns]
        parts.append(status.reindex(dates))
    return pd.concat(parts, axis=1)
