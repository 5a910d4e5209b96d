"""A user's own table (CSV or JSON lines) mapped onto the sample schema by column names in the config.

    data:
      generic:
        path: my_panel.csv            # relative to the data dir (or the working directory)
        columns: {date: day, instrument: ticker, group: sector, text: headline, target: ret_next}
        covariates: [mom5, vol20]
        split_column: null            # or a column holding train / val / test

Each row must already satisfy the schema's contract: ``text`` and covariates observable at ``date``,
``target`` realized after it. Problems are reported with the file, the column and the first bad row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.files import DataPath, resolve_data_dir
from fedloom.data.reading import read_csv, read_jsonl
from fedloom.data.schema import SampleTable, TaskKind
from fedloom.errors import DataError

ROLES = ("date", "instrument", "group", "text", "target")


class GenericConfig(BaseModel):
    """Where the table is and which of its columns play which role."""

    model_config = ConfigDict(extra="forbid")

    path: Annotated[Path | None, DataPath(cwd=True)] = Field(
        None, description="CSV / JSONL file (relative: to the data dir, else the cwd)"
    )
    format: Literal["auto", "csv", "jsonl"] = Field("auto", description="file format; auto = from the suffix")
    columns: dict[str, str] = Field(
        default_factory=dict, description="role → column name for date, instrument, group, text, target"
    )
    covariates: list[str] = Field(default_factory=list, description="numeric covariate columns")
    split_column: str | None = Field(None, description="column with train / val / test; null = date fractions")
    task_kind: TaskKind = Field("regression", description="what the target is")
    num_classes: int | None = Field(None, ge=2, description="classes of a classification target")


def load_generic(data_dir: Path | str | None, cfg: GenericConfig) -> SampleTable:
    """Read and validate the user's table."""
    path = _locate(data_dir, cfg.path)
    kind = (
        cfg.format
        if cfg.format != "auto"
        else ("jsonl" if ".jsonl" in path.suffixes or ".json" in path.suffixes else "csv")
    )
    raw = read_jsonl(path, dtype=False) if kind == "jsonl" else read_csv(path)
    return build_generic(raw, cfg, path)


def build_generic(raw: pd.DataFrame, cfg: GenericConfig, source: Path | str) -> SampleTable:
    """Rename, type-check and wrap ``raw`` (pure, so tests can pass frames)."""
    unknown = sorted(set(cfg.columns) - set(ROLES))
    if unknown:
        raise DataError(f"data.generic.columns: unknown roles {unknown}; roles are {list(ROLES)}")
    names = {role: cfg.columns.get(role, role) for role in ROLES}
    optional = {"group", "text"}
    wanted = [names[r] for r in ROLES if r not in optional or names[r] in raw.columns] + cfg.covariates
    wanted += [cfg.split_column] if cfg.split_column else []
    missing = [c for c in wanted if c not in raw.columns]
    if missing:
        raise DataError(f"{source}: missing columns {missing}; the file has {list(raw.columns)}")
    frame = pd.DataFrame({"date": _dates(raw[names["date"]], source, names["date"])})
    frame["instrument"] = raw[names["instrument"]].astype(str)
    frame["group"] = raw[names["group"]].astype(str) if names["group"] in raw.columns else frame["instrument"]
    frame["text"] = raw[names["text"]].fillna("").astype(str) if names["text"] in raw.columns else ""
    for col in cfg.covariates:
        frame[col] = _numbers(raw[col], source, col)
    frame["target"] = _numbers(raw[names["target"]], source, names["target"])
    if cfg.split_column:
        frame["split"] = raw[cfg.split_column].astype(str).str.strip()
    grouped = names["group"] in raw.columns
    return SampleTable(
        frame.sort_values(["date", "instrument"], kind="stable").reset_index(drop=True),
        tuple(cfg.covariates),
        Path(source).stem,
        task_kind=cfg.task_kind,
        num_classes=cfg.num_classes,
        default_partition="sector" if grouped else "dirichlet",
    )


def _locate(data_dir: Path | str | None, path: Path | None) -> Path:
    if path is None:
        raise DataError("dataset 'generic' needs data.generic.path (a CSV or JSONL file)")
    root = resolve_data_dir(data_dir)
    candidates = [path] if path.is_absolute() else ([root / path] if root else []) + [Path.cwd() / path]
    for c in candidates:
        if c.is_file():
            return c
    raise DataError(f"data.generic.path: no file at {' or '.join(str(c) for c in candidates)}")


def _dates(values: pd.Series, source: Path | str, column: str) -> pd.Series:
    parsed = pd.to_datetime(values, errors="coerce")
    bad = parsed.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"{source}: column {column!r} row {row}: expected a date, got {values.iloc[row]!r}")
    return parsed.dt.normalize()


def _numbers(values: pd.Series, source: Path | str, column: str) -> pd.Series:
    parsed = pd.to_numeric(values, errors="coerce").astype(float)
    bad = ~np.isfinite(parsed.to_numpy())
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{source}: column {column!r} row {row}: expected a finite number, got {values.iloc[row]!r}")
    return parsed
