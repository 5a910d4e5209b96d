"""Market regimes of seed 000, section 4.4, from the benchmark index close alone.

With r_t = log(P_t / P_{t-1}), R_t^(h) = Σ_{j<h} r_{t-j} and σ_t = sqrt(252) · sd(r_{t-19..t}), the
cutoffs c30, c70 (30th / 70th percentiles of R^(60)) and v80 (80th percentile of σ) are fitted on the
training period only and frozen. Each day gets the first matching label::

    HighVol   σ > v80
    Bear      R60 < c30 and R20 <= 0
    Recovery  R60 < c30 and R20 > 0
    Bull      R60 > c70
    Neutral   otherwise

Days without 60 past returns have no regime (NaN). Per-regime metrics average a daily series within
each regime; stability is the std across regimes and the worst-regime drop (best minus worst).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

REGIMES = ("HighVol", "Bear", "Recovery", "Bull", "Neutral")


@dataclass(frozen=True)
class RegimeThresholds:
    """Cutoffs fitted on the training period."""

    c30: float
    c70: float
    v80: float


def regime_indicators(close: pd.Series) -> pd.DataFrame:
    """R20, R60 and annualized 20-day volatility of an index close series (dates ascending)."""
    r = np.log(close.sort_index()).diff()
    return pd.DataFrame(
        {"R20": r.rolling(20).sum(), "R60": r.rolling(60).sum(), "sigma20": np.sqrt(252) * r.rolling(20).std()}
    )


def fit_regime_thresholds(
    close: pd.Series, train_start: str | pd.Timestamp, train_end: str | pd.Timestamp
) -> RegimeThresholds:
    """Percentile cutoffs from the indicator values on training days ``[train_start, train_end]``."""
    ind = regime_indicators(close).loc[pd.Timestamp(train_start) : pd.Timestamp(train_end)].dropna()
    if ind.empty:
        raise ValueError(f"no training day between {train_start} and {train_end} has 60 past index returns")
    return RegimeThresholds(
        c30=float(np.percentile(ind["R60"], 30)),
        c70=float(np.percentile(ind["R60"], 70)),
        v80=float(np.percentile(ind["sigma20"], 80)),
    )


def label_regimes(close: pd.Series, thresholds: RegimeThresholds) -> pd.Series:
    """Regime name per day (NaN where the indicators are undefined), by the precedence above."""
    ind = regime_indicators(close)
    t = thresholds
    conditions = [
        ind["sigma20"] > t.v80,
        (ind["R60"] < t.c30) & (ind["R20"] <= 0),
        (ind["R60"] < t.c30) & (ind["R20"] > 0),
        ind["R60"] > t.c70,
    ]
    labels = np.select(conditions, list(REGIMES[:4]), default=REGIMES[4]).astype(object)
    labels[ind.isna().any(axis=1).to_numpy()] = np.nan
    return pd.Series(labels, index=ind.index, name="regime")


def per_regime_mean(daily: pd.Series, regimes: pd.Series) -> pd.Series:
    """Mean of a daily metric within each regime (regimes with no day are left out)."""
    joined = pd.DataFrame({"value": daily, "regime": regimes.reindex(daily.index)}).dropna()
    return joined.groupby("regime")["value"].mean().reindex([r for r in REGIMES if r in set(joined["regime"])])


def regime_stability(per_regime: pd.Series) -> dict[str, float]:
    """Cross-regime std (ddof = 0) and worst-regime drop (best minus worst regime value)."""
    v = per_regime.dropna().to_numpy(dtype=float)
    if v.size == 0:
        return {"regime_std": float("nan"), "worst_regime_drop": float("nan")}
    return {"regime_std": float(v.std()), "worst_regime_drop": float(v.max() - v.min())}
