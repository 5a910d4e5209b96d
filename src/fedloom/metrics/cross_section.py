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
pooled errors and accuracy). The pooled correlations (``*_pooled``) do not split into clients and have none."""


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


def _daily_corr(predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray, method: str) -> pd.Series:
    frame = pd.DataFrame({"pred": np.asarray(predictions, float), "y": np.asarray(targets, float), "date": dates})
    out = {}
    for date, g in frame.groupby("date", sort=True):
        if len(g) < 2 or g["pred"].nunique() < 2 or g["y"].nunique() < 2:
            continue
        out[date] = g["pred"].corr(g["y"], method=method)
    return pd.Series(out, dtype=float, name=f"{method}_ic")
