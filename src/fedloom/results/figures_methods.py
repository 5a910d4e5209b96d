"""Figures of how methods differ, for the HTML report: per-client gain against heterogeneity (seed
000, Fig. 4), the communication–quality trade-off, RPA's routes and their dynamics over rounds, and
FedWeave's expert alignment. Data in, a matplotlib Figure out (saving is the caller's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedloom.algorithms.base import Heatmap
from fedloom.results.compare import gain_correlation
from fedloom.runs.plots import heatmaps_figure, plt
from fedloom.runs.report import LABELS


def gain_figure(points: Mapping[str, Sequence[tuple[float, float]]], metric: str) -> Figure:
    """Per client, the gain of a row over the row it is compared with (legend: ``row − partner``) against
    the client's heterogeneity score (eq. 26), with a least-squares line and Spearman ρ in the legend
    (seed 000, Fig. 4). ``points``: legend label → the clients' (heterogeneity, gain) pairs."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for label, pairs in points.items():
        x = np.array([h for h, _ in pairs], dtype=float)
        y = np.array([g for _, g in pairs], dtype=float)
        rho, n = gain_correlation(list(x), list(y))
        dots = ax.scatter(x, y, s=18, label=f"{label} (ρ = {rho:.2f}, n = {n})")
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.sum() > 1 and np.ptp(x[ok]) > 0:
            slope, intercept = np.polyfit(x[ok], y[ok], 1)
            grid = np.linspace(x[ok].min(), x[ok].max(), 2)
            ax.plot(grid, slope * grid + intercept, color=dots.get_facecolor()[0], lw=1)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xlabel("client heterogeneity score (eq. 26)")
    ax.set_ylabel(f"gain in test {LABELS.get(metric, metric)}")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def pareto_front(points: Mapping[str, tuple[float, float]], higher: bool) -> list[str]:
    """Rows no other row beats on both cost (lower) and quality, by increasing cost.

    >>> pareto_front({"a": (1.0, 0.1), "b": (2.0, 0.3), "c": (3.0, 0.2)}, higher=True)
    ['a', 'b']
    """
    sign = 1.0 if higher else -1.0
    front, best = [], -np.inf
    for row, (_, quality) in sorted(points.items(), key=lambda kv: (kv[1][0], -sign * kv[1][1])):
        if np.isfinite(quality) and sign * quality > best:
            front.append(row)
            best = sign * quality
    return front


def pareto_figure(
    points: Mapping[str, tuple[float, float, float]],
    metric: str,
    higher: bool,
    trainable: Mapping[str, float] | None = None,
) -> Figure:
    """Communication (KB down + up per participating client and round, eq. 28) against the test
    metric (mean ± std over seeds) per row; the Pareto front joined by a line. With ``trainable``
    (parameters a client trains), marker area grows with the count (seed 000, Fig. 7's bubbles); rows
    without a count keep the plain marker."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    largest = max((v for v in (trainable or {}).values() if np.isfinite(v) and v > 0), default=0.0)
    for row, (cost, mean, std) in points.items():
        count = (trainable or {}).get(row, np.nan)
        bubble = largest > 0 and np.isfinite(count) and count > 0
        size = 4.0 + 16.0 * np.sqrt(count / largest) if bubble else 5.0  # diameter: area grows with the count
        label = f"{row} ({count / 1e6:.3g} M trained)" if bubble else row
        ax.errorbar([cost], [mean], yerr=[std if np.isfinite(std) else 0.0], fmt="o", ms=size, capsize=3,
                    alpha=0.7, label=label)  # fmt: skip
    front = pareto_front({r: (c, m) for r, (c, m, _) in points.items()}, higher)
    ax.plot([points[r][0] for r in front], [points[r][1] for r in front], color="black", lw=1, ls="--",
            label="Pareto front")  # fmt: skip
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("KB per client-round (down + up)")
    ax.set_ylabel(f"test {LABELS.get(metric, metric)} ({'higher' if higher else 'lower'} is better)")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def routes_figure(routes: Mapping[int, Mapping[str, Sequence[float]]]) -> Figure:
    """RPA's routes (clients × prototypes) at several rounds side by side, clients in one order."""
    clients = sorted({c for per in routes.values() for c in per})
    maps = []
    for rnd, per in routes.items():
        width = len(next(iter(per.values())))
        matrix = [list(per[c]) if c in per else [np.nan] * width for c in clients]
        maps.append(Heatmap(matrix, clients, "P", "prototype", "route weight π", f"round {rnd}"))
    return heatmaps_figure(maps)


def routing_figure(entropy: Mapping[str, pd.Series], load: pd.DataFrame | None) -> Figure:
    """Mean normalized route entropy over rounds per row (1: uniform routes, 0: one prototype each)
    and, for one run, each prototype's load (mean route weight over the uploading clients)."""
    panels = 2 if load is not None else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 3.4), squeeze=False)
    for row, series in entropy.items():
        axes[0][0].plot(series.index, series, marker="o", ms=3, label=row)
    axes[0][0].set_ylabel("route entropy (normalized)")
    axes[0][0].set_ylim(-0.02, 1.02)
    axes[0][0].legend(fontsize=7, loc="best")
    if load is not None:
        axes[0][1].stackplot(load.index, load.T.to_numpy(), labels=[f"P{m}" for m in load.columns])
        axes[0][1].set_ylabel("prototype load")
        axes[0][1].legend(fontsize=7, loc="upper left")
    for ax in axes[0]:
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def purity_figure(quality: Mapping[str, Mapping[str, float]]) -> Figure:
    """FedWeave's alignment against the hidden tasks per row (seed 002, Table 3): purity, NMI and
    ARI of the clients' buckets (local) and of the aligned experts (global)."""
    keys = [k for k in ("local_purity", "local_nmi", "local_ari", "global_purity", "global_nmi", "global_ari")
            if any(k in q for q in quality.values())]  # fmt: skip
    fig, ax = plt.subplots(figsize=(1.5 + 1.1 * len(keys) * max(1, len(quality)) ** 0.5, 3.4))
    width = 0.8 / max(1, len(quality))
    for i, (row, values) in enumerate(quality.items()):
        x = np.arange(len(keys)) + (i - (len(quality) - 1) / 2) * width
        ax.bar(x, [values.get(k, np.nan) for k in keys], width, label=row)
    ax.set_xticks(range(len(keys)), [k.replace("_", "\n") for k in keys], fontsize=8)
    ax.set_ylim(min(0.0, ax.get_ylim()[0]), 1.0)
    ax.set_ylabel("agreement with hidden tasks")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig
