"""Result tables across finished runs: one row per method / switch set, mean ± std over seeds.

Runs are read from their run directories (summary.json, metrics.jsonl, daily.csv). A row groups the
runs of one name — the suite's row (``job.json``) or else the run folder's name, so
``runs/acl18/seed0/rpa`` and ``runs/acl18/seed1/rpa`` make the row ``rpa`` — and each column is a
value of every run's summary, aggregated over the row's seeds. The best mean of a column with a
direction is marked; a paired block bootstrap over trading weeks (seed 000, Table 5) compares each
row's seed-mean daily series with the reference row's (``daily.csv``: the round chosen on validation;
``daily_final.csv`` with ``final``: the models after the last round); communication is KB per
participating client and round (seed 000, eq. 28: what one selected client downloads and uploads in a round).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedloom.errors import ConfigError
from fedloom.experiments.report import LABELS, metric_names, summary_key
from fedloom.experiments.suite_spec import JOB_FILE, JobLabel
from fedloom.metrics.federated import higher_is_better
from fedloom.metrics.significance import paired_block_bootstrap, paired_seed_test

CROSS_SECTION = (("rank_ic", "pooled RankIC"), ("ic", "pooled IC"))
PORTFOLIO = (("annualized_return", "excess AR"), ("information_ratio", "IR"), ("max_drawdown", "MDD"))
DAILY_FILES = {False: "daily.csv", True: "daily_final.csv"}  # the bootstrap's series: chosen / final round

log = logging.getLogger("fedloom")


@dataclass(frozen=True)
class Column:
    """A table column: its title, where its value sits in a run's record, and whether higher is better
    (``None``: no best cell is marked). ``*`` in ``path`` averages over every key at that level."""

    label: str
    path: tuple[str, ...]
    higher: bool | None = None
    decimals: int | None = None  # None: chosen from the column's magnitude


@dataclass(frozen=True)
class RunResult:
    """One finished run as a table reads it."""

    path: Path
    row: str
    seed: int
    dataset: str
    record: Mapping[str, Any]  # summary.json + "derived" (per client-round costs) + "last_round"
    daily: pd.DataFrame | None
    daily_file: str = DAILY_FILES[False]


@dataclass(frozen=True)
class Cell:
    """A column's values over a row's seeds."""

    mean: float
    std: float
    n: int


@dataclass(frozen=True)
class Comparison:
    """Paired block bootstrap of a row's seed-mean daily series against the reference row's, and a paired
    t-test over the seeds of the per-seed means (``seed_p_value``: NaN with fewer than two seeds)."""

    mean_difference: float
    ci_low: float
    ci_high: float
    p_value: float
    days: int
    seeds: int
    seed_p_value: float = math.nan


@dataclass(frozen=True)
class Row:
    name: str
    seeds: tuple[int, ...]
    cells: dict[str, Cell]
    comparison: Comparison | None = None


@dataclass(frozen=True)
class ResultTable:
    """The rows of one dataset, their columns and, per column, the rows holding the best mean."""

    dataset: str
    columns: list[Column]
    rows: list[Row]
    best: dict[str, set[str]] = field(default_factory=dict)
    reference: str | None = None
    daily_column: str | None = None
    daily_file: str = DAILY_FILES[False]


def find_runs(paths: Iterable[Path], evaluations: bool = False, final: bool = False) -> list[RunResult]:
    """Every finished run under ``paths`` (run directories or folders holding them, e.g. a suite's);
    with ``evaluations``, each re-evaluation in ``RUN/evaluations/`` is a row of its own; with ``final``,
    the daily series are the final-round models' (``daily_final.csv``)."""
    found: list[RunResult] = []
    for path in paths:
        if not path.is_dir():
            raise ConfigError(f"{path}: no such run or suite directory")
        summaries = (
            [path / "summary.json"] if (path / "summary.json").is_file() else sorted(path.rglob("summary.json"))
        )
        for summary in summaries:
            try:
                run = load_run(summary.parent, final)
            except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:  # truncated, {}, a cut line
                log.warning("skipped %s: not a readable run (%s: %s)", summary.parent, type(exc).__name__, exc)
                continue
            found.append(run)
            if evaluations:
                found += [_evaluation(run, e) for e in sorted((run.path / "evaluations").glob("*.json"))]
    if not found:
        raise ConfigError(f"no finished run (summary.json) under {', '.join(map(str, paths))}")
    return found


def load_run(path: Path, final: bool = False) -> RunResult:
    """A run directory's summary, its per client-round costs, its last round and its daily series
    (the chosen round's, or with ``final`` the last round's)."""
    summary = json.loads((path / "summary.json").read_text())
    rounds = [json.loads(line) for line in _lines(path / "metrics.jsonl")]
    label = JobLabel.model_validate_json((path / JOB_FILE).read_text()) if (path / JOB_FILE).is_file() else None
    name = DAILY_FILES[final]
    daily_file = path / name
    daily = pd.read_csv(daily_file, index_col="date", parse_dates=["date"]) if daily_file.is_file() else None
    record = {**summary, "derived": per_client_round(summary, rounds), "last_round": rounds[-1] if rounds else {}}
    row = label.row if label else path.name
    return RunResult(path, row, int(summary["seed"]), summary["dataset"], record, daily, name)


NESTED_SECONDS = ("client_compute", "aggregate")  # parts of a round's "local" and "server" time


def round_seconds(record: Mapping[str, Any]) -> float:
    """Wall seconds of one logged round: its phases (local work, server, evaluation) without the nested ones."""
    return sum(v for k, v in record.get("seconds", {}).items() if k not in NESTED_SECONDS)


def per_client_round(summary: Mapping[str, Any], rounds: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """KB down / up per participating client and round (eq. 28) and wall seconds per round.

    Participations are counted from metrics.jsonl (clients that received a download); without it,
    every client in every round. Seconds come from the logged rounds (a resumed run's summary counts
    only the resumed process), else the run's wall time over its rounds."""
    participations = sum(len(r.get("download_bytes", {})) for r in rounds)
    timed = [r for r in rounds if r.get("seconds")]
    participations = participations or int(summary["rounds"]) * max(1, len(summary.get("per_client", {})))
    comm = summary["communication"]
    return {
        "download_kb": comm["download_bytes"] / participations / 1e3,
        "upload_kb": comm["upload_bytes"] / participations / 1e3,
        "seconds_per_round": (sum(map(round_seconds, timed)) / len(timed) if timed
                              else summary["wall_seconds"] / max(1, int(summary["rounds"]))),
    }  # fmt: skip


def default_columns(summary: Mapping[str, Any]) -> list[Column]:
    """Test metrics at the round chosen on validation (primary first), the primary metric of the final
    models, the IC / RankIC of the pooled cross-section and the TopkDropout portfolio where the run has
    them, then communication and time per round."""
    names = metric_names(dict(summary))
    columns = [Column(LABELS.get(m, m), ("metrics", summary_key(m)), higher_is_better(m)) for m in names]
    if names:
        primary = names[0]
        label = f"{LABELS.get(primary, primary)} final"
        columns.append(Column(label, ("final_metrics", summary_key(primary)), higher_is_better(primary)))
    if "cross_section" in summary:  # every client's test stocks ranked as one universe per day (Qlib's IC)
        columns += [Column(label, ("cross_section", key), True) for key, label in CROSS_SECTION]
    if "portfolio" in summary:
        columns += [Column(label, ("portfolio", key), True) for key, label in PORTFOLIO]
    costs = [
        Column("KB down", ("derived", "download_kb"), None, 0),
        Column("KB up", ("derived", "upload_kb"), None, 0),
        Column("s/round", ("derived", "seconds_per_round"), None, 1),
    ]
    return columns + costs


def parse_column(text: str) -> Column:
    """``LABEL=dotted.path`` (e.g. ``entropy=last_round.diagnostics.route_entropy``), no best marker."""
    label, sep, path = text.partition("=")
    if not sep or not label or not path:
        raise ConfigError(
            f"column {text!r} is not of the form LABEL=dotted.path (e.g. purity=alignment.global_purity)"
        )
    return Column(label, tuple(path.split(".")))


def lookup(record: Mapping[str, Any], path: Sequence[str]) -> float:
    """The number at ``path`` in a run's record (NaN where absent); ``*`` averages over one level."""
    node: Any = record
    for i, key in enumerate(path):
        if key == "*" and isinstance(node, Mapping):
            values = [lookup(child, path[i + 1 :]) for child in node.values()]
            finite = [v for v in values if math.isfinite(v)]
            return float(np.mean(finite)) if finite else math.nan
        if not isinstance(node, Mapping) or key not in node:
            return math.nan
        node = node[key]
    return float(node) if isinstance(node, int | float) and not isinstance(node, bool) else math.nan


def aggregate(values: Sequence[float]) -> Cell:
    """Mean and population std (ddof 0) of the finite values: e.g. [0.40, 0.44] → 0.42 ± 0.02."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if not finite.size:
        return Cell(math.nan, math.nan, 0)
    return Cell(float(finite.mean()), float(finite.std()), int(finite.size))


def build_tables(
    runs: Sequence[RunResult],
    columns: Sequence[Column] | None = None,
    reference: str | None = None,
    daily_column: str | None = None,
) -> list[ResultTable]:
    """One table per dataset, rows in order of first appearance with the reference row first."""
    tables = []
    for dataset in dict.fromkeys(r.dataset for r in runs):
        mine = [r for r in runs if r.dataset == dataset]
        tables.append(build_table(mine, columns or default_columns(mine[0].record), reference, daily_column))
    return tables


def build_table(
    runs: Sequence[RunResult], columns: Sequence[Column], reference: str | None = None, daily_column: str | None = None
) -> ResultTable:
    """Rows of ``runs`` (one dataset) aggregated over seeds, best cells marked, compared with ``reference``."""
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(run.row, []).append(run)
    if reference is not None and reference not in groups:
        raise ConfigError(f"--reference {reference!r} is not a row; rows: {', '.join(groups)}")
    order = ([reference] if reference else []) + [name for name in groups if name != reference]
    daily = daily_column or _daily_column(runs)
    rows = []
    for name in order:
        group = groups[name]
        cells = {c.label: aggregate([lookup(r.record, c.path) for r in group]) for c in columns}
        comparison = None
        if reference and name != reference and daily:
            comparison = compare_daily(group, groups[reference], daily)
        rows.append(Row(name, tuple(sorted(r.seed for r in group)), cells, comparison))
    best = {c.label: best_rows(rows, c) for c in columns if c.higher is not None}
    daily_file = runs[0].daily_file
    return ResultTable(runs[0].dataset, list(columns), rows, best, reference, daily if reference else None, daily_file)


def best_rows(rows: Sequence[Row], column: Column) -> set[str]:
    """Rows whose mean is best in ``column`` at its displayed precision (ties are all marked)."""
    decimals = column_decimals(rows, column)
    means = {r.name: round(r.cells[column.label].mean, decimals) for r in rows}
    finite = {k: v for k, v in means.items() if math.isfinite(v)}
    if len(finite) < 2:
        return set()
    target = max(finite.values()) if column.higher else min(finite.values())
    return {k for k, v in finite.items() if v == target}


def column_decimals(rows: Sequence[Row], column: Column) -> int:
    """One format per column: the column's own, else 3 decimals, more for small magnitudes
    (two significant digits of the largest mean: 0.00076 → 6 decimals)."""
    if column.decimals is not None:
        return column.decimals
    means = [abs(r.cells[column.label].mean) for r in rows if math.isfinite(r.cells[column.label].mean)]
    top = max(means, default=0.0)
    return 3 if top == 0 else max(3, 1 - math.floor(math.log10(top)))


def compare_daily(rows: Sequence[RunResult], reference: Sequence[RunResult], column: str) -> Comparison | None:
    """Bootstrap of the seed-mean daily ``column`` over the seeds both rows ran; None without common
    seeds or with fewer than two trading weeks of common days."""
    mine, theirs = _by_seed(rows, column), _by_seed(reference, column)
    seeds = sorted(set(mine) & set(theirs))
    if not seeds:
        return None
    a = pd.concat([mine[s] for s in seeds], axis=1).mean(axis=1)
    b = pd.concat([theirs[s] for s in seeds], axis=1).mean(axis=1)
    try:
        t = paired_block_bootstrap(a, b)
    except ValueError:  # fewer than two common days
        return None
    if t["weeks"] < 2:  # one block: every draw is the observed mean, no spread to test against
        return None
    pairs = [pd.concat([mine[s], theirs[s]], axis=1).dropna() for s in seeds]  # each seed on its common days
    by_seed = paired_seed_test([p.iloc[:, 0].mean() for p in pairs], [p.iloc[:, 1].mean() for p in pairs])
    return Comparison(
        t["mean_difference"], t["ci_low"], t["ci_high"], t["p_value"], int(t["days"]), len(seeds), by_seed["p_value"]
    )


def _by_seed(runs: Sequence[RunResult], column: str) -> dict[int, pd.Series]:
    return {r.seed: r.daily[column] for r in runs if r.daily is not None and column in r.daily}


def _daily_column(runs: Sequence[RunResult]) -> str | None:
    """The daily series the bootstrap compares: the primary metric's where daily.csv has it, else its
    first column (classification: accuracy)."""
    run = next((r for r in runs if r.daily is not None and len(r.daily.columns)), None)
    if run is None:
        return None
    assert run.daily is not None
    primary = run.record.get("primary_metric")
    return primary if primary in run.daily.columns else str(run.daily.columns[0])


def _evaluation(run: RunResult, path: Path) -> RunResult:
    """A re-evaluation of ``run``'s checkpoint as a run of its own row (test metrics only)."""
    evaluation = json.loads(path.read_text())
    row = f"{run.row} @ {', '.join(evaluation['overrides']) or 'as trained'}"
    return RunResult(path, row, run.seed, run.dataset, {"metrics": evaluation["metrics"]}, None)


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []
