"""Chronological splits: every training date precedes every validation date precedes every test date.

A dataset with a standard split carries it in a ``split`` column (set from `SplitDates` by its
loader); any other table is split by date fractions. Financial data is never split at random.
"""

from __future__ import annotations

import datetime as dt
from itertools import pairwise
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedloom.data.schema import SPLITS, SampleTable, Table
from fedloom.errors import DataError


class SplitDates(BaseModel):
    """A standard split by date: train ``[train_start, val_start)``, val ``[val_start, test_start)``,
    test ``[test_start, test_end]`` (``test_end`` inclusive; None = to the end of the data)."""

    model_config = ConfigDict(extra="forbid")

    train_start: dt.date = Field(description="first training date")
    val_start: dt.date = Field(description="first validation date (end of training, exclusive)")
    test_start: dt.date = Field(description="first test date (end of validation, exclusive)")
    test_end: dt.date | None = Field(None, description="last test date, inclusive; null = end of data")

    @model_validator(mode="after")
    def _ordered(self) -> SplitDates:
        bounds = [self.train_start, self.val_start, self.test_start] + ([self.test_end] if self.test_end else [])
        if any(a >= b for a, b in pairwise(bounds)):
            raise ValueError(f"split dates must increase: {[str(b) for b in bounds]}")
        return self

    def label(self, dates: pd.Series | np.ndarray) -> np.ndarray:
        """``'train'`` / ``'val'`` / ``'test'`` per date, ``''`` outside every range.

        >>> s = SplitDates(train_start="2020-01-01", val_start="2020-02-01", test_start="2020-03-01")
        >>> s.label(pd.to_datetime(["2019-12-31", "2020-01-05", "2020-02-05", "2021-01-01"])).tolist()
        ['', 'train', 'val', 'test']
        """
        d = pd.to_datetime(np.asarray(dates)).to_numpy(dtype="datetime64[D]")
        b = [np.datetime64(x, "D") for x in (self.train_start, self.val_start, self.test_start)]
        end = np.datetime64(self.test_end, "D") if self.test_end else np.datetime64("9999-12-31")
        out = np.full(len(d), "", dtype=object)
        out[(d >= b[0]) & (d < b[1])] = "train"
        out[(d >= b[1]) & (d < b[2])] = "val"
        out[(d >= b[2]) & (d <= end)] = "test"
        return out


def chronological_split(dates: np.ndarray, fractions: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Split row indices by *unique dates* in order, so no date appears in two splits.

    >>> d = np.array(["2022-01-03", "2022-01-03", "2022-01-04", "2022-01-05"], dtype="datetime64[D]")
    >>> {k: v.tolist() for k, v in chronological_split(d, (0.34, 0.33, 0.33)).items()}
    {'train': [0, 1], 'val': [2], 'test': [3]}
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    unique = np.unique(dates)
    if len(unique) < 3:
        raise DataError(f"a chronological split needs at least 3 distinct dates, got {len(unique)}")
    n_train = max(1, round(fractions[0] * len(unique)))
    n_val = max(1, round(fractions[1] * len(unique)))
    n_train = min(n_train, len(unique) - 2)
    n_val = min(n_val, len(unique) - n_train - 1)
    val_start, test_start = unique[n_train], unique[n_train + n_val]
    return {
        "train": np.flatnonzero(dates < val_start),
        "val": np.flatnonzero((dates >= val_start) & (dates < test_start)),
        "test": np.flatnonzero(dates >= test_start),
    }


def table_splits(table: Table, fractions: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Row indices per split: the table's ``split`` column when it has one (a standard split), else
    the chronological split of its dates by ``fractions``."""
    if "split" in table.frame.columns:
        split = table.frame["split"].to_numpy()
        return {name: np.flatnonzero(split == name) for name in SPLITS}
    dates = table.dates
    if dates is None:
        raise DataError(f"dataset {table.name!r} has no 'split' column and no dates to split by")
    return chronological_split(dates, fractions)


def with_split_column(table: SampleTable, fractions: tuple[float, float, float]) -> pd.DataFrame:
    """The table's frame with a ``split`` column (kept if present, else chronological by fractions)."""
    if "split" in table.frame.columns:
        return table.frame
    split = np.full(len(table), "", dtype=object)
    for name, rows in chronological_split(table.dates, fractions).items():
        split[rows] = name
    return table.frame.assign(split=split)


def thin_dates(
    frame: pd.DataFrame, max_dates: int | None, max_test_dates: int | None = None,
    max_val_dates: int | Literal["all"] | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Keep at most ``max_dates`` evenly spaced dates in the train and val splits and ``max_test_dates``
    in the test split (None: every date), whole cross-sections, order kept. ``max_val_dates`` caps the val
    split on its own (None: as ``max_dates``; ``all``: every date).

    A CPU-sized view of a long panel for training: every kept date keeps all its instruments, so daily IC
    and backtests still see full cross-sections, and the kept dates span each split's whole period. The
    test split stays whole by default: a mean over a handful of dates cannot tell methods apart.

    >>> f = pd.DataFrame({"date": pd.to_datetime(["2020-01-0%d" % d for d in range(1, 8)]), "split": "train"})
    >>> thin_dates(f, 3)["date"].dt.day.tolist()
    [1, 4, 7]
    >>> thin_dates(f.assign(split="test"), 3)["date"].dt.day.tolist()
    [1, 2, 3, 4, 5, 6, 7]
    """
    val = max_dates if max_val_dates is None else (None if max_val_dates == "all" else max_val_dates)
    for name, value in (
        ("max_dates_per_split", max_dates),
        ("max_test_dates", max_test_dates),
        ("max_val_dates", val),
    ):
        if value is not None and value < 1:
            raise DataError(f"{name} must be at least 1, got {value}")
    caps = {"test": max_test_dates, "val": val}
    keep = []
    for split, part in frame.groupby("split", sort=False):
        dates = np.sort(part["date"].unique())
        cap = caps.get(str(split), max_dates)
        cap = len(dates) if cap is None else min(cap, len(dates))
        picked = dates[np.unique(np.linspace(0, len(dates) - 1, cap).round().astype(int))]
        keep.append(part.index[part["date"].isin(picked)])
    index = np.sort(np.concatenate(keep)) if keep else np.array([], dtype=int)
    return frame.loc[index].reset_index(drop=True)
