"""RPA's ablation table on a financial dataset (issue 5; seed 000 Tables 6 and 14) from finished runs.

    python benchmarks/rpa_ablations.py runs/acl18-ablations --reference runs/acl18

`fedloom table` of ``ABLATIONS/seed<k>/<name>/`` (``fedloom run --method rpa --set
methods.rpa.<switch>=...``) with the default ``REFERENCE/seed<k>/rpa`` as reference row ``rpa``, plus the
routing diagnostics of the last round (mean normalized route entropy, collapse rate, load imbalance,
client means of route change and residual strength ρ) that explain the metrics; then per row the
switches that differ from the default run and on how many seeds every personalized test metric (chosen
round and final models) equals the default's exactly. A suite's ablation table
(configs/suites/acl18-rpa-ablations-cpu.yaml) is the first part alone: `fedloom table SUITE_DIR
--reference default --column ...`. Not a test.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedloom.results.load import RunResult, find_runs
from fedloom.results.render import to_markdown
from fedloom.results.table import Column, build_tables, default_columns
from fedloom.runs.config import load_config, settings

DIAGNOSTICS = (
    Column("route entropy", ("last_round", "diagnostics", "route_entropy")),
    Column("collapse", ("last_round", "diagnostics", "collapse_rate")),
    Column("load imbalance", ("last_round", "diagnostics", "load_imbalance")),
    Column("route change", ("last_round", "train", "*", "route_change")),
    Column("ρ", ("last_round", "train", "*", "residual_strength")),
)


def switches(run_dir: Path, base: dict[str, str]) -> str:
    """The settings of ``run_dir`` that differ from the default run's ``base`` (dotted keys, JSON values);
    both configs pass through the current schema, so sections added after the default run compare equal."""
    mine = settings(load_config(run_dir / "config.yaml"))
    return ", ".join(f"{k}={v}" for k, v in sorted(mine.items()) if base[k] != v) or "—"


def same_as(run: Mapping[str, Any], default: Mapping[str, Any]) -> bool:
    """Whether every personalized test metric of ``run`` (chosen round and final models) equals ``default``'s."""
    return all(
        run[models][k] == v
        for models in ("metrics", "final_metrics")
        for k, v in default[models].items()
        if k.startswith("personal/test/")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ablations", type=Path, nargs="?", default=Path("runs/acl18-ablations"))
    parser.add_argument("--reference", type=Path, default=Path("runs/acl18"), help="holds seed<k>/rpa")
    args = parser.parse_args()
    rows = find_runs([args.ablations])
    seeds = {r.seed for r in rows}
    defaults = [r for r in find_runs(sorted(args.reference.glob("seed*/rpa"))) if r.seed in seeds]
    if not defaults:
        raise SystemExit(f"need {args.reference}/seed<k>/rpa/ for the seeds of {args.ablations}")
    runs = defaults + rows
    print(to_markdown(build_tables(runs, [*default_columns(defaults[0].record), *DIAGNOSTICS], reference="rpa")))
    base = settings(load_config(defaults[0].path / "config.yaml"))
    by_seed = {r.seed: r for r in defaults}
    print("| ablation | switches | seeds = default |\n|---|---|---|")
    groups: dict[str, list[RunResult]] = {}
    for run in rows:
        groups.setdefault(run.row, []).append(run)
    for name, group in groups.items():
        same = sum(same_as(r.record, by_seed[r.seed].record) for r in group if r.seed in by_seed)
        print(f"| {name} | {switches(group[0].path, base)} | {same}/{len(group)} |")


if __name__ == "__main__":
    main()
