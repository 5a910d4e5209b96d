"""Qlib's ``risk_analysis`` (``qlib/contrib/evaluate.py``, ``mode='sum'``) on a daily return series.

With N = 238 trading days a year (Qlib's constant for daily data, not 252)::

    annualized_return     = mean(r) · N                       (arithmetic: Qlib's default "sum" mode)
    information_ratio     = mean(r) / std(r) · sqrt(N)        (std with ddof = 1)
    annualized_volatility = std(r) · sqrt(N)                  (not a Qlib field; same convention)
    max_drawdown          = min(cumsum(r) - cummax(cumsum(r)))  (a negative number)

``mode='product'`` compounds instead: ``(Π(1 + r))^(N/len) - 1``, std of log(1 + r), drawdown of the
wealth curve. Pass the excess series (`fedloom.metrics.portfolio.excess_returns`) for Qlib's table.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

TRADING_DAYS = 238


def risk_analysis(
    returns: pd.Series | np.ndarray, periods: int = TRADING_DAYS, mode: Literal["sum", "product"] = "sum"
) -> dict[str, float]:
    """AR, IR, annualized volatility and MDD of daily returns.

    >>> r = risk_analysis(np.array([0.01, -0.02, 0.03]), periods=1)
    >>> round(r["annualized_return"], 4), round(r["max_drawdown"], 4)
    (0.0067, -0.02)
    """
    r = pd.Series(np.asarray(returns, dtype=float)).dropna()
    if len(r) < 2:
        raise ValueError(f"risk_analysis needs at least 2 daily returns, got {len(r)}")
    if mode == "sum":
        mean, std = r.mean(), r.std(ddof=1)
        annual = mean * periods
        curve = r.cumsum()
        drawdown = (curve - curve.cummax()).min()
    else:
        wealth = (1 + r).cumprod()
        annual = wealth.iloc[-1] ** (periods / len(r)) - 1
        log_r = np.log1p(r)
        mean, std = log_r.mean(), log_r.std(ddof=1)
        drawdown = (wealth / wealth.cummax() - 1).min()
    return {
        "annualized_return": float(annual),
        "information_ratio": float(mean / std * np.sqrt(periods)) if std > 0 else float("nan"),
        "annualized_volatility": float(std * np.sqrt(periods)),
        "max_drawdown": float(drawdown),
    }
