"""Result tables across finished runs: one row per method / switch set, mean ± std over seeds.

Runs are read from their run directories (summary.json, metrics.jsonl, daily.csv). A row groups the
runs of one name — the suite's row (``job.json``) or else the run folder's name, so
``runs/acl18/seed0/rpa`` and ``runs/acl18/seed1/rpa`` make the row ``rpa`` — and each column is a
value of every run's summary, aggregated over the row's seeds. The best mean of a column with a
direction is marked; a paired block bootstrap over trading weeks (seed 000, Table 5) — over clients and
weeks jointly where the runs wrote each client's series (clients.csv) — compares each row's seed-mean
daily series (``daily.csv``: the round chosen on validation; ``daily_final.csv`` with
``final``: the models after the last round) with the reference row's, or with the row a ``{row}``
template names (``{row}-fixed``: then also the gain over it and its correlation with the clients'
heterogeneity, seed 000 Table 9), and a paired t-test over the clients asks whether the difference holds
across them; communication is KB per participating client and round (seed 000, eq. 28: what one selected
client downloads and uploads in a round).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedloom.errors import ConfigError
from fedloom.metrics.federated import higher_is_better
from fedloom.results.compare import (
    ROW_FIELD,
    Comparison,
    client_metric,
    compare_clients,
    compare_daily,
    corrected,
    paired_gain,
    partners,
)
from fedloom.results.compare import daily_column as default_daily
from fedloom.results.load import DAILY_FILES, RunResult
from fedloom.runs.report import LABELS, metric_names, summary_key

CROSS_SECTION = (("rank_ic", "pooled RankIC"), ("ic", "pooled IC"))
# metrics the trivial predictor is scored on (a constant has no IC); `score` is each instruction task's, and their mean
CONSTANT_SCORED = ("mse", "mae", "accuracy", "balanced_accuracy", "mcc", "score")
PORTFOLIO = (("annualized_return", "excess AR"), ("information_ratio", "IR"), ("max_drawdown", "MDD"))
# seed 000 Fig. 6: the daily RankIC's spread over market regimes (one regime: --column Bear=regimes.regime/Bear)
REGIMES = (("regime_std", "regime std"), ("worst_regime_drop", "worst regime drop"))


@dataclass(frozen=True)
class Column:
    """A table column: its title, where its value sits in a run's record, and whether higher is better
    (``None``: no best cell is marked). ``*`` in ``path`` averages over every key at that level."""

    label: str
    path: tuple[str, ...]
    higher: bool | None = None
    decimals: int | None = None  # None: chosen from the column's magnitude


@dataclass(frozen=True)
class Cell:
    """A column's values over a row's seeds."""

    mean: float
    std: float
    n: int


@dataclass(frozen=True)
class Row:
    name: str
    seeds: tuple[int, ...]
    cells: dict[str, Cell]
    comparison: Comparison | None = None


@dataclass(frozen=True)
class SelectionEffect:
    """What choosing the round on validation did on test, against the last round's models (issue 43), over
    a table's runs that trained several rounds: how many runs it helped, hurt, or left the same (the
    chosen round is the last), and the mean gain, signed so that positive is better."""

    helped: int
    hurt: int
    same: int
    mean_gain: float

    @property
    def runs(self) -> int:
        return self.helped + self.hurt + self.same


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
    partners: dict[str, str] = field(default_factory=dict)  # row -> the row it was compared with
    metric: str = ""  # the per-client test metric of the clients' paired test (the daily column's)
    selection: SelectionEffect | None = None  # of ``metric``
    train_loss_measures: dict[str, str] = field(default_factory=dict)  # row -> its runs' train.train_loss

    @property
    def compared(self) -> int:
        """How many rows were tested against the reference: the family the q-values correct over."""
        return sum(1 for r in self.rows if r.comparison is not None and math.isfinite(r.comparison.p_value))


def default_columns(summary: Mapping[str, Any]) -> list[Column]:
    """Test metrics at the round chosen on validation (primary first), the primary metric of the final
    models, the last round's mean train loss beside the trivial predictor's (its train loss and test
    scores: `fedloom.runs.baseline`), the IC / RankIC of the pooled cross-section, the TopkDropout
    portfolio and the regime spread of the daily RankIC where the run has them, then the parameters a
    client trains (mean over clients), communication and time per round."""
    names = metric_names(dict(summary))
    columns = [Column(LABELS.get(m, m), ("metrics", summary_key(m)), higher_is_better(m)) for m in names]
    if names:
        primary = names[0]
        label = f"{LABELS.get(primary, primary)} final"
        columns.append(Column(label, ("final_metrics", summary_key(primary)), higher_is_better(primary)))
    if "baseline" in summary:  # the trivial predictor beside the row (sanity before tables): training loss and test
        columns.append(Column("train loss", ("metrics", "train_loss/final_round"), False))
        if "train_loss" in summary["baseline"]:  # text tasks' trivial predictor has no teacher-forced loss
            columns.append(Column("train loss const", ("baseline", "train_loss"), None))
        columns += [Column(f"{LABELS.get(m, m)} const", ("baseline", summary_key(m).removeprefix("personal/")), None)
                    for m in names if m.rsplit("/", 1)[-1] in CONSTANT_SCORED]  # fmt: skip
    if "cross_section" in summary:  # every client's test stocks ranked as one universe per day (Qlib's IC)
        columns += [Column(label, ("cross_section", key), True) for key, label in CROSS_SECTION]
    if "portfolio" in summary:
        columns += [Column(label, ("portfolio", key), True) for key, label in PORTFOLIO]
    if "regimes" in summary:  # lower is steadier
        columns += [Column(label, ("regimes", key), False) for key, label in REGIMES]
    trained = [Column("trainable", ("trainable_params", "mean"), None, 0)] if "trainable_params" in summary else []
    costs = [
        *trained,
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
    """Mean and sample std (ddof 1: an unbiased variance over the seeds, the spread a reader can expect of
    a new seed) of the finite values: e.g. [0.40, 0.44] → 0.42 ± 0.028; one value has no std (nan)."""
    finite = np.array([v for v in values if math.isfinite(v)], dtype=float)
    if not finite.size:
        return Cell(math.nan, math.nan, 0)
    std = float(finite.std(ddof=1)) if finite.size > 1 else math.nan
    return Cell(float(finite.mean()), std, int(finite.size))


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
    """Rows of ``runs`` (one dataset) aggregated over seeds, best cells marked, each compared with its
    partner (`partners`: the ``reference`` row, or the row a ``{row}`` template names). A template also adds
    the gain over the partner and its correlation with the clients' heterogeneity (seed 000 Table 9)."""
    groups: dict[str, list[RunResult]] = {}
    for run in runs:
        groups.setdefault(run.row, []).append(run)
    pairs = partners(groups, reference) if reference is not None else {}
    template = reference is not None and ROW_FIELD in reference
    if reference is not None and (not pairs if template else reference not in groups):
        what = "names no row for any row" if template else "is not a row"
        raise ConfigError(f"--reference {reference!r} {what}; rows: {', '.join(groups)}")
    order = ([reference] if reference and not template else []) + [name for name in groups if name != reference]
    daily = daily_column or default_daily(runs)
    metric = str(runs[0].record.get("primary_metric"))
    compared = corrected(
        [compare_daily(groups[n], groups[pairs[n]], daily) if n in pairs and daily else None for n in order]
    )
    tested = client_metric(daily) if daily else metric
    for i, (name, c) in enumerate(zip(order, compared, strict=True)):
        if c is not None:  # beside the days: the clients (a difference one data owner carries shows here)
            t = compare_clients(groups[name], groups[pairs[name]], tested)
            compared[i] = replace(c, client_p_value=t["p_value"], clients=int(t["n"]))
    extras: dict[int, Mapping[str, Any]] = {}
    if template:
        assert reference is not None
        columns = [
            *columns,
            Column(f"gain over {reference}", ("paired", "gain"), higher_is_better(metric)),
            Column("ρ(heterogeneity, gain)", ("paired", "heterogeneity_rho"), None),
        ]
        for name, other in pairs.items():
            theirs = {r.seed: r for r in groups[other]}
            for run in groups[name]:
                if run.seed in theirs:
                    extras[id(run)] = {"paired": paired_gain(run, theirs[run.seed], metric)}
    rows = []
    for name, comparison in zip(order, compared, strict=True):
        group = groups[name]
        records = [{**r.record, **extras[id(r)]} if id(r) in extras else r.record for r in group]
        cells = {c.label: aggregate([lookup(record, c.path) for record in records]) for c in columns}
        rows.append(Row(name, tuple(sorted(r.seed for r in group)), cells, comparison))
    best = {c.label: best_rows(rows, c) for c in columns if c.higher is not None}
    daily_file = runs[0].daily_file
    return ResultTable(
        runs[0].dataset,
        list(columns),
        rows,
        best,
        reference,
        daily if reference else None,
        daily_file,
        pairs,
        tested,
        selection_effect(runs, tested),
        train_loss_measures(groups),
    )


def train_loss_measures(groups: Mapping[str, Sequence[RunResult]]) -> dict[str, str]:
    """Each row's ``train.train_loss`` (``steps`` / ``fitted``; both joined by ``/`` where its seeds differ), for
    the rows whose every run recorded it (runs trained in rounds since the switch existed)."""
    return {
        name: "/".join(sorted({str(r.record["train_loss_measure"]) for r in runs}))
        for name, runs in groups.items()
        if all("train_loss_measure" in r.record for r in runs)
    }


def selection_effect(runs: Sequence[RunResult], metric: str) -> SelectionEffect | None:
    """`SelectionEffect` of test ``metric`` (summary.json ``metrics`` at the chosen round vs ``final_metrics``);
    None where no run trained more than one round (a one-pass reference has nothing to choose)."""
    key, sign = summary_key(metric), 1.0 if higher_is_better(metric) else -1.0
    gains = []
    for run in runs:
        chosen, final = run.record.get("metrics", {}).get(key), run.record.get("final_metrics", {}).get(key)
        if run.record.get("rounds", 1) > 1 and chosen is not None and final is not None:
            gains.append(sign * (float(chosen) - float(final)))
    if not gains:
        return None
    g = np.asarray(gains)
    return SelectionEffect(int((g > 0).sum()), int((g < 0).sum()), int((g == 0).sum()), float(g.mean()))


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
    """One format per column: the column's own, else 3 decimals, more for small magnitudes (three
    significant digits of the largest mean: 0.000411 → 6 decimals, so FNSPID's MSEs of 4.03e-4 and
    4.11e-4 do not both print as 0.00040)."""
    if column.decimals is not None:
        return column.decimals
    means = [abs(r.cells[column.label].mean) for r in rows if math.isfinite(r.cells[column.label].mean)]
    top = max(means, default=0.0)
    return 3 if top == 0 else max(3, 2 - math.floor(math.log10(top)))
