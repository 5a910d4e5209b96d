"""The sample table every financial loader produces, and the per-client view of it.

One row per (date, instrument) sample::

    date        instrument  group        text                                   mom5    vol20   target
    2022-03-01  TECH01      technology   "Nimbus Systems beats estimates ..."   0.012   0.018   0.0041
    2022-03-01  FINA02      financials   "Rates rise by 25bp ..."              -0.004   0.011  -0.0007

``text`` and the covariate columns are observable at ``date``; ``target`` is the next-period return
(or label) and is never used as an input. ``group`` (sector, industry, task) drives partitions.
Optional columns: ``split`` (``train`` / ``val`` / ``test``: the dataset's standard split, see
`fedloom.data.splits.table_splits`), ``return`` (the raw next-period return when ``target`` is a class
or a normalized label), ``target_date`` (the day the target is realized) and ``rule_group`` (the
SYNTHETIC market's planted rule group: an audit label, never a covariate).

Instruction tasks use `TextTable` instead: one row per example, the answer kept as text. Code that
takes either kind takes a `Table`, the protocol both satisfy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, Protocol

import numpy as np
import pandas as pd

from fedloom.data.reading import refuse_duplicates
from fedloom.errors import DataError

REQUIRED_COLUMNS = ("date", "instrument", "group", "text", "target")
TEXT_COLUMNS = ("id", "task", "split", "prompt", "response", "references", "label")
SPLITS = ("train", "val", "test")
AUDIT_COLUMNS = ("rule_group",)
TaskKind = Literal["regression", "classification", "ranking"]
Partition = Literal["sector", "dirichlet", "iid", "task_dirichlet"]


class Table(Protocol):
    """What every dataset the runtime can train on offers, whatever its kind (`SampleTable`, `TextTable`)."""

    @property
    def name(self) -> str: ...

    @property
    def frame(self) -> pd.DataFrame: ...

    @property
    def notes(self) -> tuple[str, ...]:
        """Caveats every report of this table carries."""

    @property
    def synthetic(self) -> bool:
        """Generated data, marked as such wherever it is reported."""

    @property
    def is_text(self) -> bool:
        """Rows are instruction examples answered in text, not dated (date, instrument) samples."""

    @property
    def group_column(self) -> str:
        """The column of the hidden per-row group reports label clients by: ``group`` (sector) or ``task``."""

    @property
    def audit_columns(self) -> tuple[str, ...]:
        """Hidden per-row labels kept for audits only, never an input (the synthetic market's planted
        ``rule_group``): reports measure how a method's client structure matches them."""

    @property
    def default_partition(self) -> Partition:
        """How clients are formed when ``data.partition`` is ``auto``."""

    @property
    def partition_columns(self) -> Mapping[str, str]:
        """The partitions besides ``iid`` this table can take → the column whose values they deal out."""

    @property
    def dates(self) -> np.ndarray | None:
        """Each row's date (datetime64[D]) for chronological splits; None when the rows are undated."""

    def overview(self) -> list[tuple[str, str]]:
        """(field, value) report lines on what the rows are."""

    def label_balance(self, rows: np.ndarray) -> str:
        """The labels of ``rows`` (indices) summarized in one report line."""

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class SampleTable:
    """A validated sample table; ``synthetic`` marks generated data wherever it is reported.

    ``task_kind`` says what ``target`` is: a return (``regression``), a class index in
    ``[0, num_classes)`` (``classification``; 0 = fall, 1 = rise for movement) or a cross-sectionally
    normalized label to rank by (``ranking``). ``default_partition`` is how clients are formed when the
    config says ``auto``: ``sector`` when ``group`` is real sector metadata, else ``dirichlet``.
    ``notes`` are caveats every report of this table should carry.
    """

    frame: pd.DataFrame
    covariates: tuple[str, ...]
    name: str
    synthetic: bool = False
    task_kind: TaskKind = "regression"
    num_classes: int | None = None
    default_partition: Partition = "sector"
    notes: tuple[str, ...] = ()
    audit_columns: tuple[str, ...] = ()
    is_text: ClassVar[bool] = False
    group_column: ClassVar[str] = "group"
    partition_columns: ClassVar[Mapping[str, str]] = {"sector": "group", "dirichlet": "instrument"}

    def __post_init__(self) -> None:
        missing = [c for c in (*REQUIRED_COLUMNS, *self.covariates) if c not in self.frame.columns]
        if missing:
            raise DataError(f"dataset {self.name!r}: missing columns {missing}; it has {list(self.frame.columns)}")
        audit = [c for c in self.covariates if c in AUDIT_COLUMNS]
        if audit:
            raise DataError(f"dataset {self.name!r}: {audit} are audit columns, never covariates")
        if self.frame.empty:
            raise DataError(f"dataset {self.name!r} has no rows")
        refuse_duplicates(self.frame, ("date", "instrument"), f"dataset {self.name!r}")
        target = self.frame["target"].to_numpy(dtype=float)
        bad = ~np.isfinite(target)
        if bad.any():
            rows = np.flatnonzero(bad)[:5].tolist()
            raise DataError(f"dataset {self.name!r}: {int(bad.sum())} non-finite targets (rows {rows} ...)")
        if self.task_kind == "classification":
            if self.num_classes is None or self.num_classes < 2:
                raise DataError(
                    f"dataset {self.name!r}: classification needs num_classes >= 2, got {self.num_classes}"
                )
            wrong = (target != np.round(target)) | (target < 0) | (target >= self.num_classes)
            if wrong.any():
                raise DataError(
                    f"dataset {self.name!r}: target must be a class index in [0, {self.num_classes}); "
                    f"row {int(np.flatnonzero(wrong)[0])} has {target[wrong][0]}"
                )
        if "split" in self.frame.columns:
            _check_splits(self.frame["split"], self.name)

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def targets(self) -> np.ndarray:
        return self.frame["target"].to_numpy(dtype=np.float32)

    @property
    def dates(self) -> np.ndarray:
        return self.frame["date"].to_numpy(dtype="datetime64[D]")

    def overview(self) -> list[tuple[str, str]]:
        """Task kind, date range, instruments and covariates."""
        frame, covariates = self.frame, self.covariates
        days = f"{frame['date'].min():%Y-%m-%d} … {frame['date'].max():%Y-%m-%d} ({frame['date'].nunique():,} days)"
        lines = [
            ("kind", self.task_kind + (" (SYNTHETIC)" if self.synthetic else "")),
            ("dates", days),
            ("instruments", f"{frame['instrument'].nunique():,} in {frame['group'].nunique()} groups"),
        ]
        if "rule_group" in frame.columns:  # the synthetic market's planted groups (audit only)
            members = frame.groupby("rule_group", sort=True)["group"].unique()
            text = "; ".join(f"{k} = {', '.join(v)}" for k, v in members.items())
            lines.append(("rule groups", f"{len(members)} planted (audit only): {text}"))
        return [
            *lines,
            ("covariates", f"{len(covariates)}: {', '.join(covariates[:8])}{' …' * (len(covariates) > 8)}"),
        ]

    def label_balance(self, rows: np.ndarray) -> str:
        """Class counts and shares for classification, else the mean and std of the targets."""
        part = self.frame.iloc[rows]
        if self.task_kind == "classification":
            counts = part["target"].astype(int).value_counts().sort_index()
            total = max(int(counts.sum()), 1)
            return ", ".join(f"class {k}: {v} ({v / total:.1%})" for k, v in counts.items())
        t = pd.Series(part["target"], dtype=float)
        return f"mean {t.mean():+.5f}, std {t.std():.5f}" if len(t) else "-"


@dataclass(frozen=True)
class TextTable:
    """Instruction examples of one or more text tasks (seed 002, section 4), one row per example::

        id                    task           split  prompt                        response        references  label
        gsm8k-train-17        gsm8k          train  "Solve … Natalia sold …"      "… #### 72"     ("… #### 72",)  "72"
        arc_challenge-test-3  arc_challenge  test   "Answer … ?\\nA. …\\nB. …"    "B"             ("B",)      "B"

    ``prompt`` is the user turn (wrapped in the backbone's chat template when tokenized), ``response``
    the target completion, ``references`` every acceptable answer text (ROUGE takes the best match) and
    ``label`` the short answer that exact-match metrics compare (empty for free-form editing). An optional
    ``source`` column holds the text an editing task rewrites (empty for the other tasks): what the trivial
    predictor returns unchanged (`fedloom.runs.baseline`).
    """

    frame: pd.DataFrame
    name: str
    notes: tuple[str, ...] = ()
    synthetic: ClassVar[bool] = False
    audit_columns: ClassVar[tuple[str, ...]] = ()
    is_text: ClassVar[bool] = True
    group_column: ClassVar[str] = "task"
    default_partition: ClassVar[Partition] = "task_dirichlet"
    partition_columns: ClassVar[Mapping[str, str]] = {"task_dirichlet": "task"}
    dates: ClassVar[None] = None

    def __post_init__(self) -> None:
        missing = [c for c in TEXT_COLUMNS if c not in self.frame.columns]
        if missing:
            raise DataError(f"dataset {self.name!r}: missing columns {missing}; it has {list(self.frame.columns)}")
        if self.frame.empty:
            raise DataError(f"dataset {self.name!r} has no rows")
        _check_splits(self.frame["split"], self.name)
        empty = self.frame["prompt"].str.strip().eq("") | self.frame["response"].str.strip().eq("")
        if empty.any():
            row = int(np.flatnonzero(empty.to_numpy())[0])
            raise DataError(
                f"dataset {self.name!r}: row {row} ({self.frame['id'].iloc[row]}) has an empty prompt or response"
            )

    def __len__(self) -> int:
        return len(self.frame)

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(sorted(self.frame["task"].unique()))

    def overview(self) -> list[tuple[str, str]]:
        """The tasks the examples come from."""
        return [("tasks", ", ".join(self.tasks))]

    def label_balance(self, rows: np.ndarray) -> str:
        """Examples per task, and per sentiment label for TweetEval."""
        part = self.frame.iloc[rows]
        counts = part.groupby("task").size()
        labels = part.loc[part["task"] == "tweeteval", "label"].value_counts()
        text = ", ".join(f"{k} {v}" for k, v in counts.items())
        return text + ("; tweeteval " + ", ".join(f"{k} {v}" for k, v in labels.items()) if len(labels) else "")


def _check_splits(split: pd.Series, name: str) -> None:
    unknown = sorted(set(split.unique()) - set(SPLITS))
    if unknown:
        raise DataError(f"dataset {name!r}: column 'split' has {unknown}; expected only {list(SPLITS)}")


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
