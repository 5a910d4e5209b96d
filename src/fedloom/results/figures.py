"""Figures of runs over time, for the HTML report: data in, a matplotlib Figure out (saving is the
caller's). Rows are the table's rows (a method / switch set); where a row has several seeds the line
is the seed mean and the band ± one std over seeds.

    curves  round  seed0   seed1        daily  date        ic      rank_ic
            1      0.012   0.020               2024-01-02  0.031   0.045
            2      0.018   0.031               2024-01-03  -0.012  0.004
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedloom.runs.plots import plt
from fedloom.runs.report import LABELS


def _band(ax, frame: pd.DataFrame, label: str) -> None:  # noqa: ANN001
    """Seed mean of a (x × seed) frame as a line, ± one std over seeds as a band when there are several."""
    mean = frame.mean(axis=1)
    (line,) = ax.plot(frame.index, mean, marker="o" if len(frame) <= 30 else None, ms=3, label=label)
    if frame.shape[1] > 1:
        std = frame.std(axis=1, ddof=1)
        ax.fill_between(frame.index, mean - std, mean + std, color=line.get_color(), alpha=0.2, lw=0)


def rounds_figure(curves: Mapping[str, Mapping[str, pd.DataFrame]], metric: str) -> Figure:
    """The primary metric over rounds, one panel per split (validation, test), one line per row."""
    fig, axes = plt.subplots(1, len(curves), figsize=(5.2 * len(curves), 3.4), squeeze=False, sharex=True)
    for ax, (split, rows) in zip(axes[0], curves.items(), strict=True):
        for row, frame in rows.items():
            _band(ax, frame, row)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(f"{LABELS.get(metric, metric)} (macro over clients)")
        ax.set_title(f"{split}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def daily_figure(daily: Mapping[str, pd.DataFrame], column: str) -> Figure:
    """A daily test metric per row: the daily values (top) and their cumulative sum (bottom)."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.2), sharex=True)
    for row, frame in daily.items():
        _band(top, frame, row)
        _band(bottom, frame.cumsum(), row)
    name = LABELS.get(column, column)
    top.axhline(0.0, color="grey", lw=0.8)
    top.set_ylabel(f"daily {name}")
    bottom.set_ylabel(f"cumulative {name}")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    bottom.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def portfolio_figure(reports: Mapping[str, pd.DataFrame]) -> Figure:
    """TopkDropout portfolios (seed 000, Table 3): cumulative excess return with cost (summed, as
    Qlib's risk analysis), the index's cumulative return, and the excess curve's drawdown."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.2), sharex=True, height_ratios=(2, 1))
    index_drawn = False
    for row, report in reports.items():
        excess = (report["return"] - report["bench"] - report["cost"]).cumsum()
        (line,) = top.plot(excess.index, excess, label=f"{row}: excess with cost")
        bottom.fill_between(excess.index, excess - excess.cummax(), 0.0, color=line.get_color(), alpha=0.3, label=row)
        if not index_drawn:
            top.plot(report.index, report["bench"].cumsum(), color="black", lw=1, ls="--", label="index")
            index_drawn = True
    top.axhline(0.0, color="grey", lw=0.8)
    top.set_ylabel("cumulative return")
    bottom.set_ylabel("drawdown of excess")
    for ax in (top, bottom):
        ax.grid(alpha=0.3)
    top.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    fig.tight_layout()
    return fig


def regime_figure(per_regime: Mapping[str, Mapping[str, float]], spread: Mapping[str, float], metric: str) -> Figure:
    """Mean daily metric per market regime, one bar group per regime and one bar per row; the legend
    gives each row's cross-regime std (seed 000, Fig. 6: the lower, the more stable)."""
    regimes = list(dict.fromkeys(r for values in per_regime.values() for r in values))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(regimes) * max(1, len(per_regime)) ** 0.5, 3.4))
    width = 0.8 / max(1, len(per_regime))
    for i, (row, values) in enumerate(per_regime.items()):
        x = np.arange(len(regimes)) + (i - (len(per_regime) - 1) / 2) * width
        ax.bar(x, [values.get(r, np.nan) for r in regimes], width, label=f"{row} (std {spread.get(row, np.nan):.3f})")
    ax.set_xticks(range(len(regimes)), regimes)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_ylabel(f"mean daily {LABELS.get(metric, metric)}")
    ax.legend(fontsize=7, loc="best", title="row (cross-regime std)", title_fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
