"""What ``fedloom data list`` and ``fedloom data info`` print: availability, sizes, clients, label balance."""

from __future__ import annotations

import numpy as np

from fedloom.data.config import DataConfig
from fedloom.data.files import resolve_data_dir
from fedloom.data.partition import configured_partition
from fedloom.data.registry import DATASETS
from fedloom.data.schema import Table
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
    """(field, value) lines: rows, what they are, splits, clients under ``cfg.partition``, labels, notes."""
    splits = table_splits(table, cfg.split)
    lines = [("rows", f"{len(table):,}"), *table.overview()]
    dates = table.dates
    for name, rows in splits.items():
        if dates is None:
            lines.append((f"split {name}", f"{len(rows):,} rows"))
            continue
        span = f"  ({dates[rows].min()} … {dates[rows].max()})" if len(rows) else ""
        lines.append((f"split {name}", f"{len(rows):,} rows, {len(np.unique(dates[rows])):,} dates{span}"))
    parts = configured_partition(table, cfg, splits["train"])
    sizes = np.array([np.isin(rows, splits["train"]).sum() for rows in parts.values()])
    method = cfg.partition if cfg.partition != "auto" else table.default_partition
    lines.append(("clients", f"{len(parts)} ({method}); training rows {_spread(sizes)}"))
    if "instrument" in table.frame.columns:  # a financial table: how many names each client's model sees
        names = table.frame["instrument"].to_numpy()
        lines.append(("names per client", _spread(np.array([len(np.unique(names[r])) for r in parts.values()]))))
    lines.extend((f"labels {name}", table.label_balance(rows)) for name, rows in splits.items())
    lines.extend(("note", n) for n in table.notes)
    return lines


def _spread(counts: np.ndarray) -> str:
    return f"min {counts.min()}, median {np.median(counts):.0f}, max {counts.max()}"
