"""What ``fedloom data list`` and ``fedloom data info`` print: availability, sizes, clients, label balance."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fedloom.data.config import DataConfig
from fedloom.data.files import resolve_data_dir
from fedloom.data.partition import partition_table
from fedloom.data.registry import DATASETS, Table
from fedloom.data.schema import TextTable
from fedloom.data.splits import table_splits


def availability(cfg: DataConfig) -> list[dict[str, str]]:
    """One row per dataset: name, kind, folder(s), ``available`` or what is missing, summary."""
    root = resolve_data_dir(cfg.data_dir)
    rows = []
    for name, spec in DATASETS.items():
        folders = spec.folders(cfg)
        missing = [
            f"{folder}/{f}"
            for folder, files in folders.items()
            for f in files
            if root is None or not (root / folder / f).is_file()
        ]
        status = "built in" if not folders else ("available" if not missing else "missing " + ", ".join(missing))
        if name == "generic":
            status = f"file: {cfg.generic.path}" if cfg.generic.path else "set data.generic.path"
        rows.append(
            {
                "name": name,
                "kind": spec.kind,
                "folder": ", ".join(folders) or "-",
                "status": status,
                "summary": spec.summary,
            }
        )
    return rows


def describe(table: Table, cfg: DataConfig) -> list[tuple[str, str]]:
    """(field, value) lines: rows, dates, splits, clients under ``cfg.partition``, labels, notes."""
    frame = table.frame
    splits = table_splits(table, cfg.split)
    lines = [("rows", f"{len(table):,}")]
    if isinstance(table, TextTable):
        lines.append(("tasks", ", ".join(table.tasks)))
    else:
        lines.append(("kind", table.task_kind + (" (SYNTHETIC)" if table.synthetic else "")))
        lines.append(
            (
                "dates",
                f"{frame['date'].min():%Y-%m-%d} … {frame['date'].max():%Y-%m-%d} ({frame['date'].nunique():,} days)",
            )
        )
        lines.append(("instruments", f"{frame['instrument'].nunique():,} in {frame['group'].nunique()} groups"))
        if "rule_group" in frame.columns:
            lines.append(("rule groups", _rule_groups(frame)))
        lines.append(
            (
                "covariates",
                f"{len(table.covariates)}: {', '.join(table.covariates[:8])}{' …' * (len(table.covariates) > 8)}",
            )
        )
    for name, rows in splits.items():
        span = ""
        if not isinstance(table, TextTable) and len(rows):
            d = frame["date"].iloc[rows]
            span = f"  ({d.min():%Y-%m-%d} … {d.max():%Y-%m-%d})"
        lines.append((f"split {name}", f"{len(rows):,}{span}"))
    parts = partition_table(table, cfg.partition, cfg.num_clients, cfg.alpha, cfg.partition_seed, splits["train"])
    sizes = np.array([np.isin(rows, splits["train"]).sum() for rows in parts.values()])
    method = (
        cfg.partition
        if cfg.partition != "auto"
        else ("task_dirichlet" if isinstance(table, TextTable) else table.default_partition)
    )
    lines.append(
        (
            "clients",
            f"{len(parts)} ({method}); training rows min {sizes.min()}, median {np.median(sizes):.0f}, "
            f"max {sizes.max()}",
        )
    )
    lines.extend(_labels(table, splits))
    lines.extend(("note", n) for n in table.notes)
    return lines


def _rule_groups(frame: pd.DataFrame) -> str:
    """``2 planted (audit only): 0 = technology, energy; 1 = financials``: each rule group's ``group`` values."""
    members = frame.groupby("rule_group", sort=True)["group"].unique()
    text = "; ".join(f"{k} = {', '.join(v)}" for k, v in members.items())
    return f"{len(members)} planted (audit only): {text}"


def _labels(table: Table, splits: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    frame = table.frame
    out = []
    for name, rows in splits.items():
        part = frame.iloc[rows]
        if isinstance(table, TextTable):
            counts = part.groupby("task").size()
            labels = part.loc[part["task"] == "tweeteval", "label"].value_counts()
            text = ", ".join(f"{k} {v}" for k, v in counts.items())
            text += ("; tweeteval " + ", ".join(f"{k} {v}" for k, v in labels.items())) if len(labels) else ""
        elif table.task_kind == "classification":
            counts = part["target"].astype(int).value_counts().sort_index()
            total = max(int(counts.sum()), 1)
            text = ", ".join(f"class {k}: {v} ({v / total:.1%})" for k, v in counts.items())
        else:
            t = pd.Series(part["target"], dtype=float)
            text = f"mean {t.mean():+.5f}, std {t.std():.5f}" if len(t) else "-"
        out.append((f"labels {name}", text))
    return out
