"""Add the trivial predictor of the instruction tasks to finished multitask run folders. Not a test.

    python benchmarks/text_baseline.py RUN_OR_SUITE_FOLDER [...]

Runs finished before `fedloom.runs.baseline.text_baseline` existed have no ``baseline`` entry, so their
tables show no trivial-predictor column. It depends only on the data and the partition (each client's
most frequent training answer per task; the input unchanged for the editing task), so it is rebuilt here
from each run's config.yaml — no model is loaded — and written into its summary.json, as a new run
writes it. Runs that already have one are left alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fedloom.data.registry import load_dataset
from fedloom.data.schema import TextTable
from fedloom.runs.baseline import text_baseline
from fedloom.runs.config import load_config
from fedloom.runs.rundir import RunDirectory
from fedloom.runs.workspace import data_owners


def backfill(run: Path) -> bool:
    """Write ``baseline`` into ``run``'s summary.json; False when it has one or its data is not text."""
    summary = json.loads((run / "summary.json").read_text())
    if "baseline" in summary:
        return False
    cfg = load_config(run / "config.yaml")
    table = load_dataset(cfg.dataset, cfg.data)
    if not isinstance(table, TextTable):
        return False
    summary["baseline"] = text_baseline(table, data_owners(cfg, table))
    RunDirectory(run).write_summary(summary)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+")
    args = parser.parse_args()
    for folder in args.folders:
        for summary in sorted(folder.rglob("summary.json")):
            done = backfill(summary.parent)
            print(f"{summary.parent}: {'baseline written' if done else 'left alone'}")


if __name__ == "__main__":
    main()
