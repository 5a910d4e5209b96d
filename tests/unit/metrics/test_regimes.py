"""Market regimes: indicators by hand, thresholds from the training period only, precedence, stability."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.metrics.regimes import (
    REGIMES,
    RegimeThresholds,
    fit_regime_thresholds,
    label_regimes,
    per_regime_mean,
    regime_indicators,
    regime_stability,
)

DAYS = pd.bdate_range("2020-01-01", periods=400)


def _index(seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    vol = np.where(np.arange(400) % 150 < 30, 0.03, 0.01)
    return pd.Series(100 * np.exp(np.cumsum(rng.normal(0.0003, vol))), index=DAYS)


def test_indicators_by_hand():
    close = _index()
    ind = regime_indicators(close)
    r = np.log(close.to_numpy()[1:] / close.to_numpy()[:-1])
    t = 100  # r_t has index t-1 in r
    assert ind["R20"].iloc[t] == pytest.approx(r[t - 20 : t].sum())
    assert ind["R60"].iloc[t] == pytest.approx(r[t - 60 : t].sum())
    assert ind["sigma20"].iloc[t] == pytest.approx(np.sqrt(252) * np.std(r[t - 20 : t], ddof=1))
    assert ind["R60"].iloc[:60].isna().all()


def test_thresholds_ignore_the_test_period():
    close = _index()
    fit = fit_regime_thresholds(close, DAYS[0], DAYS[249])
    shaken = close.copy()
    shaken.iloc[250:] = shaken.iloc[250:] * np.linspace(1, 3, 150)
    assert fit_regime_thresholds(shaken, DAYS[0], DAYS[249]) == fit
    ind = regime_indicators(close).loc[: DAYS[249]].dropna()
    assert fit.c30 == pytest.approx(np.percentile(ind["R60"], 30)) and fit.v80 == pytest.approx(
        np.percentile(ind["sigma20"], 80)
    )


def test_precedence_every_day_one_regime():
    close = _index()
    t = RegimeThresholds(c30=-0.02, c70=0.05, v80=0.25)
    labels = label_regimes(close, t)
    ind = regime_indicators(close)
    ok = ind.notna().all(axis=1)
    assert labels[~ok].isna().all() and set(labels[ok]) <= set(REGIMES)
    hv = ind["sigma20"] > t.v80
    assert (labels[hv & ok] == "HighVol").all()
    bear = ~hv & (ind["R60"] < t.c30) & (ind["R20"] <= 0)
    assert (labels[bear & ok] == "Bear").all()
    rec = ~hv & (ind["R60"] < t.c30) & (ind["R20"] > 0)
    assert (labels[rec & ok] == "Recovery").all()
    bull = ~hv & ~(ind["R60"] < t.c30) & (ind["R60"] > t.c70)
    assert (labels[bull & ok] == "Bull").all()
    assert (labels[ok & ~hv & ~bear & ~rec & ~bull] == "Neutral").all()


def test_per_regime_mean_and_stability():
    days = DAYS[:6]
    daily = pd.Series([0.1, 0.2, 0.0, -0.1, 0.05, 0.3], index=days)
    regimes = pd.Series(["Bull", "Bull", "Bear", "Bear", "Neutral", np.nan], index=days)
    per = per_regime_mean(daily, regimes)
    assert per.to_dict() == pytest.approx({"Bear": -0.05, "Bull": 0.15, "Neutral": 0.05})
    assert list(per.index) == ["Bear", "Bull", "Neutral"]  # the order of REGIMES
    stab = regime_stability(per)
    assert stab["worst_regime_drop"] == pytest.approx(0.2)
    assert stab["regime_std"] == pytest.approx(np.std([-0.05, 0.15, 0.05]))
