"""Cross-sectional signal quality, Qlib's definitions (``qlib/contrib/eva/alpha.py``, ``calc_ic``).

Each function returns the per-date series; summaries (mean, ICIR) are computed from it separately.
A date with fewer than two instruments or a constant prediction or target has no correlation and
is left out, as pandas' ``corr`` yields NaN there and Qlib's ``mean`` skips it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

POOLED = "_pooled"  # suffix of a daily series computed on one cross-section of every client's rows
CLIENT_WEIGHTS = {"ic": "clients", "rank_ic": "clients", "mse": "rows", "mae": "rows", "accuracy": "rows"}
"""How each of these daily series (a run's daily.csv) combines the clients' own values of the day (clients.csv):
an equal share per client with a value (the macro IC / RankIC) or each client's share of the day's rows (the
pooled errors and accuracy). The pooled correlations (``*_pooled``) do not split into clients as a mean does;
each client's share of the day's cross-section is its `MOMENTS` instead (`client_moments`, `pooled_correlation`)."""

MOMENTS = ("n", "sx", "sy", "sxx", "syy", "sxy")
"""A client's share of one day's pooled correlation: its rows' count and sums of x, y, x², y², xy, where x is the
prediction and y the target (``ic_pooled``) or their ranks within the whole day's universe (``rank_ic_pooled``).
Sums add over any multiset of clients, so a bootstrap that redraws clients recomputes the universe-wide IC /
RankIC of the drawn owners' names exactly (`pooled_correlation`); summed over every client they give the day's
``*_pooled`` value."""


def daily_ic(predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> pd.Series:
    """Pearson correlation of prediction and target across instruments, one value per date."""
    return _daily_corr(predictions, targets, dates, method="pearson")


def daily_rank_ic(predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> pd.Series:
    """Spearman (rank) correlation of prediction and target across instruments, one value per date."""
    return _daily_corr(predictions, targets, dates, method="spearman")


def information_ratio(series: pd.Series) -> float:
    """ICIR / RankICIR: mean over std (ddof=1) of a daily correlation series (not annualized)."""
    std = float(series.std())
    return float(series.mean()) / std if std > 0 else float("nan")


def ic_summary(predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> dict[str, float]:
    """Qlib's signal table: ``ic``, ``icir``, ``rank_ic``, ``rank_icir`` (means and mean/std of the daily
    series). Use the raw label as ``targets``, as Qlib does."""
    ic, rank_ic = daily_ic(predictions, targets, dates), daily_rank_ic(predictions, targets, dates)
    return {
        "ic": float(ic.mean()),
        "icir": information_ratio(ic),
        "rank_ic": float(rank_ic.mean()),
        "rank_icir": information_ratio(rank_ic),
    }


def moment_columns(column: str) -> list[str]:
    """clients.csv's names of a pooled series' `MOMENTS`: ``ic_pooled`` → ``ic_pooled_n``, ``ic_pooled_sx``, …"""
    return [f"{column}_{m}" for m in MOMENTS]


def client_moments(
    predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray, clients: np.ndarray
) -> pd.DataFrame:
    """Per (date, client): the `MOMENTS` of ``ic_pooled`` (raw values) and of ``rank_ic_pooled`` (each day's
    average ranks over every client's rows, as Spearman's correlation takes them), each centred on the day's
    mean over the universe, under `moment_columns`' names. Rows with a missing prediction or target are left
    out, as the correlations leave them out."""
    frame = pd.DataFrame({"x": np.asarray(predictions, float), "y": np.asarray(targets, float), "date": dates,
                          "client": np.asarray(clients).astype(str)}).dropna()  # fmt: skip
    by_day = frame.groupby("date")
    ranks = frame.assign(x=by_day["x"].rank(method="average"), y=by_day["y"].rank(method="average"))
    parts = []
    for column, f in ((f"ic{POOLED}", frame), (f"rank_ic{POOLED}", ranks)):
        day = f.groupby("date")[["x", "y"]].transform("mean")  # centred on the day's universe: the same shift for
        f = f.assign(x=f.x - day.x, y=f.y - day.y)  # every client leaves each correlation as is, and the sums exact
        sums = f.assign(n=1.0, sx=f.x, sy=f.y, sxx=f.x**2, syy=f.y**2, sxy=f.x * f.y).groupby(["date", "client"])
        parts.append(sums[list(MOMENTS)].sum().set_axis(moment_columns(column), axis=1))
    return pd.concat(parts, axis=1)


def pooled_correlation(moments: np.ndarray) -> np.ndarray:
    """Pearson's correlation from summed `MOMENTS` on the last axis: (n·Σxy − ΣxΣy) / √((n·Σx² − (Σx)²)(n·Σy² −
    (Σy)²)); NaN with fewer than two rows or a constant side (the days `_daily_corr` leaves out)."""
    n, sx, sy, sxx, syy, sxy = np.moveaxis(np.asarray(moments, float), -1, 0)
    vx, vy = n * sxx - sx**2, n * syy - sy**2
    scale = np.maximum(np.abs(n * sxx), np.abs(n * syy)) * 1e-12  # round-off of a constant side's variance
    ok = (n >= 2) & (vx > scale) & (vy > scale)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, (n * sxy - sx * sy) / np.sqrt(np.where(ok, vx * vy, 1.0)), np.nan)


def _daily_corr(predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray, method: str) -> pd.Series:
    frame = pd.DataFrame({"pred": np.asarray(predictions, float), "y": np.asarray(targets, float), "date": dates})
    out = {}
    for date, g in frame.groupby("date", sort=True):
        if len(g) < 2 or g["pred"].nunique() < 2 or g["y"].nunique() < 2:
            continue
        out[date] = g["pred"].corr(g["y"], method=method)
    return pd.Series(out, dtype=float, name=f"{method}_ic")
