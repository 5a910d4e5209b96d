"""`fedloom report`: one static HTML page for a run directory or a folder of runs (a comparison, a
suite) — per dataset the result table, then every figure the runs hold data for — with its figures as
PNG files beside it; no script, no external resource::

    OUT/report.html
    OUT/figures/<dataset>-<figure>.png

Rows and seeds are the table's (`fedloom.results.table`): a row's line is its seed mean, its band
± one std over seeds. Headline numbers, daily series and portfolios come from the round chosen on
validation; the ``final`` columns from the models after the last round.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from fedloom.algorithms.fedweave.reporting import ALIGNMENT, TASK_EXPERT
from fedloom.algorithms.rpa import reporting as rpa
from fedloom.metrics.federated import higher_is_better
from fedloom.results.compare import client_gains, heterogeneity, partners
from fedloom.results.figures import daily_figure, portfolio_figure, regime_figure, rounds_figure
from fedloom.results.figures_methods import (
    gain_figure,
    pareto_figure,
    purity_figure,
    routes_figure,
    routing_figure,
)
from fedloom.results.load import RunResult, find_runs
from fedloom.results.render import to_html
from fedloom.results.table import aggregate, build_tables, lookup
from fedloom.runs.plots import save_figure
from fedloom.runs.report import LABELS, summary_key

DAILY_COLUMNS = ("ic", "rank_ic", "accuracy")
ROUTE_SNAPSHOTS = 4  # rounds shown side by side in a route heatmap figure
STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;
text-align:right}td:first-child,th:first-child{text-align:left}figure{margin:1.5em 0}img{max-width:100%;
border:1px solid #eee}figcaption,.note{font-size:13px;color:#555}"""


@dataclass(frozen=True)
class Plot:
    """A figure of the page: its file stem, the drawing (or a figure a run already drew: ``drawn``) and
    what it shows, in a sentence or two."""

    name: str
    figure: Figure | None
    caption: str
    drawn: Path | None = None


def write_report(path: Path, out: Path | None = None, reference: str | None = None) -> Path:
    """Write ``report.html`` and its figures for the runs under ``path`` into ``out`` (default: ``path``)."""
    runs = find_runs([path])
    out = out or path
    (out / "figures").mkdir(parents=True, exist_ok=True)
    body = []
    for table in build_tables(runs, reference=reference):
        rows = group_rows([r for r in runs if r.dataset == table.dataset])
        body += [f"<h2>{html.escape(table.dataset)}</h2>", to_html(table)]
        for plot in dataset_plots(rows, reference):
            file = f"figures/{slug(table.dataset)}-{plot.name}.png"
            if plot.drawn is not None:
                shutil.copyfile(plot.drawn, out / file)
            else:
                assert plot.figure is not None
                save_figure(plot.figure, out / file)
            alt = html.escape(plot.name)
            body.append(
                f"<figure><img src='{file}' alt='{alt}'><figcaption>{html.escape(plot.caption)}</figcaption></figure>"
            )
    title = f"fedloom report: {path.name or path}"
    intro = (
        f"{len(runs)} run(s) under <code>{html.escape(str(path))}</code>. Test metrics at the round chosen "
        "on validation; <i>final</i> = the models after the last round."
    )
    page = (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1><p>{intro}</p>"
        + "\n".join(body)
        + "</body></html>\n"
    )
    (out / "report.html").write_text(page)
    return out / "report.html"


def group_rows(runs: Sequence[RunResult]) -> dict[str, list[RunResult]]:
    """Runs by row, in order of first appearance, each row's runs by seed."""
    rows: dict[str, list[RunResult]] = {}
    for run in runs:
        rows.setdefault(run.row, []).append(run)
    return {name: sorted(group, key=lambda r: r.seed) for name, group in rows.items()}


def dataset_plots(rows: Mapping[str, Sequence[RunResult]], reference: str | None = None) -> Iterator[Plot]:
    """Every figure the runs of one dataset have data for, one at a time (each is saved and closed)."""
    first = next(iter(rows.values()))[0]
    metric = str(first.record.get("primary_metric", ""))
    name = LABELS.get(metric, metric)
    curves = {
        split: {row: _per_seed(runs, lambda r, s=split: round_series(r, metric, s)) for row, runs in rows.items()}
        for split in ("val", "test")
    }
    if any(not f.empty for per in curves.values() for f in per.values()):
        yield Plot(
            "rounds",
            rounds_figure(curves, metric),
            f"Personalized {name} (macro over clients) on validation and test after each evaluated round "
            "(runs with federation.test_rounds=chosen: test at the chosen and the last round only).",
        )
    for column in DAILY_COLUMNS:
        daily = {row: _per_seed(runs, lambda r, c=column: _daily(r, c)) for row, runs in rows.items()}
        daily = {row: frame for row, frame in daily.items() if not frame.empty}
        if daily:
            label = LABELS.get(column, column)
            yield Plot(
                f"daily-{column}",
                daily_figure(daily, column),
                f"Daily test {label} of the models of the round chosen on validation (daily.csv); "
                "below, its running sum.",
            )
    portfolios = {row: _mean_portfolio(runs) for row, runs in rows.items()}
    portfolios = {row: p for row, p in portfolios.items() if p is not None}
    if portfolios:
        yield Plot(
            "portfolio",
            portfolio_figure(portfolios),
            "TopkDropout portfolio on the pooled test scores (portfolio.csv): cumulative excess return "
            "over the index after costs, the index itself, and the drawdown of the excess curve.",
        )
    regimes = {row: _mean_values(runs, "regimes") for row, runs in rows.items()}
    regimes = {row: v for row, v in regimes.items() if v}
    if regimes:
        per = {
            row: {k.split("/", 1)[1]: x for k, x in v.items() if k.startswith("regime/")} for row, v in regimes.items()
        }
        spread = {row: v.get("regime_std", np.nan) for row, v in regimes.items()}
        yield Plot(
            "regimes",
            regime_figure(per, spread, "rank_ic"),
            "Mean daily RankIC in each market regime (thresholds fitted on the training period); "
            "the legend gives the cross-regime std (seed 000, Fig. 6).",
        )
    yield from _comparison_plots(rows, metric, reference)
    yield from _method_plots(rows)


def _comparison_plots(rows: Mapping[str, Sequence[RunResult]], metric: str, reference: str | None) -> Iterator[Plot]:
    """Per-client gain over the row each row is compared with (`partners`: the reference row, FedAvg by
    default, or a ``{row}`` template's) against heterogeneity, and the communication–quality plane."""
    name = LABELS.get(metric, metric)
    gain_points = {}
    for row, other in partners(rows, reference).items():
        scores = heterogeneity(rows[row])  # each row's own partition: its clients' scores
        gains = client_gains(rows[row], rows[other], f"test/{metric}")
        if scores and gains:
            gain_points[f"{row} − {other}"] = [(scores.get(c, np.nan), g) for c, g in sorted(gains.items())]
    if gain_points:
        yield Plot(
            "gain-heterogeneity",
            gain_figure(gain_points, metric),
            f"Each client's gain in test {name} over the row it is compared with (seed mean, round chosen on "
            "validation) against its heterogeneity score; Spearman ρ per row (seed 000, Fig. 4).",
        )
    if len(rows) > 1:
        points, trained = {}, {}
        for row, runs in rows.items():
            cost = aggregate(
                [
                    lookup(r.record, ("derived", "download_kb")) + lookup(r.record, ("derived", "upload_kb"))
                    for r in runs
                ]
            )
            quality = aggregate([lookup(r.record, ("metrics", summary_key(metric))) for r in runs])
            points[row] = (cost.mean, quality.mean, quality.std)
            trained[row] = aggregate([lookup(r.record, ("trainable_params", "mean")) for r in runs]).mean
        yield Plot(
            "pareto",
            pareto_figure(points, metric, higher_is_better(metric), trained),
            f"Communication (KB per participating client and round, eq. 28) against test {name} "
            "(mean ± std over seeds); marker area: the parameters a client trains (summary.json "
            "`trainable_params`, seed 000 Fig. 7's bubble); the dashed line joins the rows no other row "
            "beats on both.",
        )


def _method_plots(rows: Mapping[str, Sequence[RunResult]]) -> Iterator[Plot]:
    """RPA's routes and routing dynamics, FedWeave's expert alignment (where the runs have them)."""
    entropy = {row: _per_seed(runs, _entropy).mean(axis=1) for row, runs in rows.items()}
    entropy = {row: s for row, s in entropy.items() if not s.empty}
    if entropy:
        single = [runs for runs in rows.values() if len(runs) == 1]
        load = _load(single[0][0]) if len(rows) == 1 and single else None
        yield Plot(
            "routing",
            routing_figure(entropy, load),
            "RPA: mean normalized entropy of the uploaded routes per round (seed mean)"
            + ("; right, each prototype's load (mean route weight)." if load is not None else "."),
        )
    for row, runs in rows.items():
        snapshots = route_snapshots(runs[0])
        if snapshots:
            yield Plot(
                f"routes-{slug(row)}",
                routes_figure(snapshots),
                f"RPA routes (clients × prototypes) of `{row}`, seed {runs[0].seed}, at several rounds.",
            )
    for row, runs in rows.items():
        drawn = runs[0].path / f"{TASK_EXPERT}.png"  # the heatmap FedWeave declared, as its run drew it
        if drawn.is_file():
            yield Plot(
                f"task-expert-{slug(row)}",
                None,
                f"FedWeave: mean router weight per (hidden task, expert) of `{row}`, seed {runs[0].seed}.",
                drawn,
            )
    quality = {row: _mean_values(runs, ALIGNMENT) for row, runs in rows.items()}
    quality = {row: q for row, q in quality.items() if q}
    if quality:
        yield Plot(
            "alignment",
            purity_figure(quality),
            "FedWeave: agreement of the clients' buckets (local) and the aligned experts (global) with "
            "the hidden tasks: purity, NMI and ARI (seed mean).",
        )


def route_snapshots(run: RunResult) -> dict[int, dict[str, list[float]]]:
    """Uploaded routes at up to ``ROUTE_SNAPSHOTS`` evenly spaced rounds (first and last included); a
    run logged before per-round routes were kept gives its final routes (routes.json) as round ``rounds``."""
    logged = {
        rec["round"]: rec["diagnostics"][rpa.ROUTES]
        for rec in _history(run.path)
        if rec.get("diagnostics", {}).get(rpa.ROUTES)
    }
    if not logged:
        final = _json(run.path / f"{rpa.ROUTES}.json")
        return {int(run.record.get("rounds", 0)): final[rpa.ROUTES]} if final and final.get(rpa.ROUTES) else {}
    rounds = sorted(logged)
    picks = sorted({rounds[round(i)] for i in np.linspace(0, len(rounds) - 1, min(ROUTE_SNAPSHOTS, len(rounds)))})
    return {r: logged[r] for r in picks}


def slug(text: str) -> str:
    """A file-name-safe form of a row or dataset name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "row"


def _per_seed(runs: Sequence[RunResult], series: Any) -> pd.DataFrame:
    """One column per run of ``series(run)`` (a Series or None), aligned on the index."""
    columns = {str(r.path): s for r in runs if (s := series(r)) is not None and not s.empty}
    return pd.DataFrame(columns).sort_index() if columns else pd.DataFrame()


def round_series(run: RunResult, metric: str, split: str) -> pd.Series:
    """A run's personalized macro ``metric`` on ``split`` by evaluated round (NaN where not evaluated)."""
    key = f"personal/{split}/{metric}/macro"
    values = {rec["round"]: rec["summary"].get(key) for rec in _history(run.path) if rec.get("summary")}
    # federation.test_rounds=chosen logs no test metrics per round: the chosen and last rounds' are in summary.json
    reported = {run.record.get("selection", {}).get("best_round"): run.record.get("metrics", {}),
                run.record.get("rounds"): run.record.get("final_metrics", {})}  # fmt: skip
    for rnd, metrics in reported.items():
        if rnd is not None and values.get(rnd) is None and key in metrics:
            values[rnd] = metrics[key]
    return pd.Series({k: np.nan if v is None else float(v) for k, v in values.items()}, dtype=float).sort_index()


def _daily(run: RunResult, column: str) -> pd.Series | None:
    return run.daily[column] if run.daily is not None and column in run.daily else None


def _entropy(run: RunResult) -> pd.Series:
    values = {
        rec["round"]: rec["diagnostics"][rpa.ROUTE_ENTROPY]
        for rec in _history(run.path)
        if rec.get("diagnostics", {}).get(rpa.ROUTE_ENTROPY) is not None
    }
    return pd.Series(values, dtype=float)


def _load(run: RunResult) -> pd.DataFrame | None:
    loads = {
        rec["round"]: rec["diagnostics"][rpa.PROTOTYPE_LOAD]
        for rec in _history(run.path)
        if rec.get("diagnostics", {}).get(rpa.PROTOTYPE_LOAD)
    }
    return pd.DataFrame.from_dict(loads, orient="index").sort_index() if loads else None


def _mean_portfolio(runs: Sequence[RunResult]) -> pd.DataFrame | None:
    """The seed mean of the runs' daily portfolio reports (portfolio.csv), by date."""
    files = [r.path / "portfolio.csv" for r in runs if (r.path / "portfolio.csv").is_file()]
    if not files:
        return None
    frames = [pd.read_csv(f, index_col="date", parse_dates=["date"]) for f in files]
    return pd.concat(frames).groupby(level=0).mean().sort_index()


def _mean_values(runs: Sequence[RunResult], entry: str) -> dict[str, float]:
    """Seed mean of each number in a summary entry (e.g. ``regimes``, ``alignment``)."""
    keys = dict.fromkeys(k for r in runs for k in r.record.get(entry) or {})
    return {k: aggregate([lookup(r.record, (entry, k)) for r in runs]).mean for k in keys}


def _history(path: Path) -> list[dict[str, Any]]:
    file = path / "metrics.jsonl"
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()] if file.is_file() else []


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None
