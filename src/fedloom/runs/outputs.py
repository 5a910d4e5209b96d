"""The tail every run writes the same way, whatever its kind: a method's declared end-of-run files and
heatmaps, the test outputs of a set of predictions (daily series, the pooled cross-section, and on an
index dataset the TopkDropout portfolio on the dataset's market and the regime breakdown), and the
summary.json and report.md that close the run."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from fedloom.algorithms.base import RunReport
from fedloom.data.registry import dataset_market
from fedloom.metrics.cross_section import POOLED
from fedloom.runs.config import RunConfig
from fedloom.runs.daily import client_daily_metrics, daily_metrics, regime_breakdown
from fedloom.runs.portfolio import holdings, portfolio_metrics, portfolio_report
from fedloom.runs.report import single_report
from fedloom.runs.rundir import RunDirectory

log = logging.getLogger("fedloom")
SERIES = ("daily", "clients_daily", "portfolio_daily")  # written as CSV: daily.csv, clients.csv, portfolio.csv
ENTRIES = ("portfolio", "regimes", "cross_section")  # put in summary.json


def write_run_report(rundir: RunDirectory, report: RunReport, title: str) -> None:
    """A method's declared end-of-run files (``<name>.json``) and heatmaps (``<name>.png``)."""
    for name, content in report.files.items():
        rundir.write_json(f"{name}.json", content)
    if not report.heatmaps:
        return
    from fedloom.runs.plots import draw_heatmap  # matplotlib (~0.5 s): imported only by runs that draw

    for name, heatmap in report.heatmaps.items():
        draw_heatmap(heatmap, rundir.own(f"{name}.png"), f"{title}\n{heatmap.title}")


def prediction_outputs(
    cfg: RunConfig, task_kind: str, predictions: pd.DataFrame, train_dates: np.ndarray
) -> dict[str, Any]:
    """From long test ``predictions`` (`test_predictions`' columns): the daily series (and each client's), the pooled
    cross-section's mean IC / RankIC, and for index datasets the daily TopkDropout report, its summary
    and the regime breakdown (regime thresholds fitted on ``train_dates``)."""
    if predictions.empty:
        log.warning("no client has test rows: daily.csv, the portfolio and the regimes are skipped")
        return {}
    clients = client_daily_metrics(predictions, task_kind)
    daily = daily_metrics(predictions, task_kind, clients)
    out: dict[str, Any] = {"daily": daily, "clients_daily": clients}
    pooled = [c for c in daily.columns if c.endswith(POOLED)]
    if pooled:
        out["cross_section"] = {c.removesuffix(POOLED): float(daily[c].mean()) for c in pooled}
    market = dataset_market(cfg.dataset, cfg.data)
    if market is None:
        return out
    out["regimes"] = regime_breakdown(daily["rank_ic"], market.benchmark(), train_dates)
    universe = int(predictions.groupby("date")["instrument"].nunique().max())
    held = holdings(cfg.portfolio, universe)
    if held is None:
        log.warning(f"portfolio.topk {cfg.portfolio.topk} holds more than {cfg.portfolio.max_share:.0%} of the "
                    f"{universe}-name universe (it buys the basket): no portfolio, no excess return")  # fmt: skip
        return out
    report = portfolio_report(predictions, market, *held)
    if len(report) < 2:  # one test date (e.g. `fedloom params`' probe): no return series to annualize
        log.warning(f"the portfolio traded {len(report)} day(s): no excess return or risk is reported")
        return out | {"portfolio_daily": report}
    return out | {"portfolio_daily": report, "portfolio": portfolio_metrics(report)}


def record_outputs(rundir: RunDirectory, outputs: dict[str, Any], suffix: str = "") -> dict[str, Any]:
    """Write the daily series of ``outputs`` (`prediction_outputs`) as ``daily{suffix}.csv``,
    ``clients{suffix}.csv`` and ``portfolio{suffix}.csv``; the summary.json entries of the rest, their keys
    suffixed."""
    for name in SERIES:
        if name in outputs:
            rundir.write_daily(outputs[name], f"{name.replace('_daily', '')}{suffix}.csv")
    return {f"{k}{suffix}": outputs[k] for k in ENTRIES if k in outputs}


def finish_run(rundir: RunDirectory, summary: dict[str, Any]) -> None:
    """Write summary.json and report.md of a finished run."""
    rundir.write_summary(summary)
    rundir.write_report(single_report(summary))
