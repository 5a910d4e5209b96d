"""The sample table every financial loader produces, and the per-client view of it.

One row per (date, instrument) sample::

    date        instrument  group        text                                   mom5    vol20   target
    2022-03-01  TECH01      technology   "Nimbus Systems beats estimates ..."   0.012   0.018   0.0041
    2022-03-01  FINA02      financials   "Rates rise by 25bp ..."              -0.004   0.011  -0.0007

``text`` and the covariate columns are observable at ``date``; ``target`` is the next-period return
(or label) and is never used as an input. ``group`` (sector, industry, task) drives partitions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedloom.errors import DataError

REQUIRED_COLUMNS = ("date", "instrument", "group", "text", "target")


@dataclass(frozen=True)
class SampleTable:
    """A validated sample table; ``synthetic`` marks generated data wherever it is reported."""

    frame: pd.DataFrame
    covariates: tuple[str, ...]
    name: str
    synthetic: bool = False

    def __post_init__(self) -> None:
        missing = [c for c in (*REQUIRED_COLUMNS, *self.covariates) if c not in self.frame.columns]
        if missing:
            raise DataError(f"dataset {self.name!r}: missing columns {missing}; it has {list(self.frame.columns)}")
        bad = ~np.isfinite(self.frame["target"].to_numpy(dtype=float))
        if bad.any():
            rows = np.flatnonzero(bad)[:5].tolist()
            raise DataError(f"dataset {self.name!r}: {int(bad.sum())} non-finite targets (rows {rows} ...)")
        if self.frame.empty:
            raise DataError(f"dataset {self.name!r} has no rows")

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def targets(self) -> np.ndarray:
        return self.frame["target"].to_numpy(dtype=np.float32)

    @property
    def dates(self) -> np.ndarray:
        return self.frame["date"].to_numpy(dtype="datetime64[D]")


@dataclass(frozen=True)
class ClientData:
    """Indices of one client's rows, per split, into the shared sample table and feature cache."""

    client_id: str
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray

    def split(self, name: str) -> np.ndarray:
        if name not in ("train", "val", "test"):
            raise DataError(f"unknown split {name!r}; expected train, val or test")
        return getattr(self, name)

    @property
    def num_train(self) -> int:
        return len(self.train)
