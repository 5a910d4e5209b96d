"""Qlib's TopkDropout backtest (``qlib/contrib/strategy/signal_strategy.py``, ``backtest/exchange.py``).

Inputs are long frames::

    scores  date        instrument  score          market  date        instrument  close   tradable  factor
            2024-01-02  SH600000    0.31                   2024-01-03  SH600000    125.1   True      9.39

A score dated t (made after t's close) is traded at the close of the next market day, so a held
stock earns the close-to-close return that Qlib's label ``Ref($close,-2)/Ref($close,-1) - 1`` names.
On each trade day (Qlib's defaults: ``method_sell='bottom'``, ``method_buy='top'``, ``only_tradable``
off, ``hold_thresh`` 1 — always met by daily trading):

1. ``last`` = held stocks by today's score; ``today`` = the top ``n_drop + topk - |last|`` others;
2. ``sell`` = held stocks among the bottom ``n_drop`` of ``last ∪ today``;
   ``buy`` = ``today[:|sell| + topk - |last|]``;
3. untradable stocks (suspended, or at the ±9.5 % limit) are neither sold nor bought;
4. sells first (cash += value - cost); each buy gets ``cash · risk_degree / |buy|`` (less if the cash
   left cannot also pay the cost), rounded down to ``trade_unit`` raw shares (adjusted shares ×
   factor); cost = max(value · rate, min_cost).

The daily report has ``return`` = (earning + cost) / previous value (gross of cost, as Qlib's),
``cost`` / previous value, ``turnover``, ``value`` and ``bench`` (the benchmark's daily change).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TopkDropout:
    """Strategy and exchange settings; the defaults are Qlib's benchmark ones."""

    topk: int = 50
    n_drop: int = 5
    open_cost: float = 0.0005
    close_cost: float = 0.0015
    min_cost: float = 5.0
    account: float = 1e8
    risk_degree: float = 0.95
    trade_unit: int | None = 100


def backtest(
    scores: pd.DataFrame, market: pd.DataFrame, strategy: TopkDropout, benchmark: pd.Series | None = None
) -> pd.DataFrame:
    """Daily report of the TopkDropout portfolio, one row per trade day (the days after a scored day)."""
    close = market.pivot(index="date", columns="instrument", values="close").sort_index()
    tradable = market.pivot(index="date", columns="instrument", values="tradable").reindex_like(close)
    tradable = tradable.fillna(False).astype(bool)
    factor = market.pivot(index="date", columns="instrument", values="factor").reindex_like(close).ffill()
    signal = {d: g.set_index("instrument")["score"] for d, g in scores.groupby("date")}
    days = close.index
    first, last_day = days.searchsorted(min(signal)), days.searchsorted(max(signal))
    trade_days = days[first + 1 : last_day + 2]

    holding: dict[str, float] = {}  # instrument → shares held
    cash = value = strategy.account
    rows = []
    for day in trade_days:
        prev_day = days[days.get_loc(day) - 1]
        price, can_trade, unit = close.loc[day], tradable.loc[day], factor.loc[day]
        cost = traded = 0.0
        if prev_day in signal:
            sell, buy = _decide(signal[prev_day], list(holding), strategy)
            for code in sell:
                if not can_trade.get(code, False):
                    continue
                amount = holding.pop(code)
                trade_value = amount * price[code]
                fee = max(trade_value * strategy.close_cost, strategy.min_cost)
                cash += trade_value - fee
                cost, traded = cost + fee, traded + trade_value
            budget = cash * strategy.risk_degree / len(buy) if buy else 0.0
            for code in buy:
                if not can_trade.get(code, False) or not np.isfinite(price.get(code, np.nan)):
                    continue
                amount = min(budget, _affordable(cash, strategy)) / price[code]
                amount = _round_to_unit(amount, unit.get(code, 1.0), strategy.trade_unit)
                trade_value = amount * price[code]
                fee = max(trade_value * strategy.open_cost, strategy.min_cost)
                if amount <= 0 or trade_value + fee > cash + 1e-9:
                    continue
                holding[code] = holding.get(code, 0.0) + amount
                cash -= trade_value + fee
                cost, traded = cost + fee, traded + trade_value
        new_value = cash + sum(a * price[c] for c, a in holding.items())
        rows.append(
            {
                "date": day,
                "return": (new_value - value + cost) / value,
                "cost": cost / value,
                "turnover": traded / value,
                "value": new_value,
            }
        )
        value = new_value
    report = pd.DataFrame(rows).set_index("date")
    bench = benchmark.sort_index().pct_change(fill_method=None) if benchmark is not None else None
    report["bench"] = bench.reindex(report.index).fillna(0.0) if bench is not None else 0.0
    return report


def excess_returns(report: pd.DataFrame, with_cost: bool = True) -> pd.Series:
    """Qlib's ``excess_return_with_cost`` (return - bench - cost) or ``_without_cost``."""
    return report["return"] - report["bench"] - (report["cost"] if with_cost else 0.0)


def _decide(score: pd.Series, held: list[str], s: TopkDropout) -> tuple[list[str], list[str]]:
    """(sell, buy) lists of one TopkDropout step."""
    last = score.reindex(held).sort_values(ascending=False, na_position="last").index
    others = score[~score.index.isin(last)].sort_values(ascending=False, kind="stable")
    today = list(others.index[: max(s.n_drop + s.topk - len(last), 0)])
    comb = score.reindex(last.union(pd.Index(today), sort=False)).sort_values(ascending=False, na_position="last")
    bottom = set(comb.index[-s.n_drop :]) if s.n_drop > 0 else set()
    sell = [c for c in last if c in bottom]
    return sell, today[: len(sell) + s.topk - len(last)]


def _affordable(cash: float, s: TopkDropout) -> float:
    """Largest trade value whose cost still fits in ``cash`` (Qlib's ``_get_buy_amount_by_cash_limit``)."""
    if cash < s.min_cost:
        return 0.0
    if s.open_cost > 0 and cash >= s.min_cost / s.open_cost + s.min_cost:
        return cash / (1 + s.open_cost)
    return cash - s.min_cost


def _round_to_unit(amount: float, factor: float, trade_unit: int | None) -> float:
    """Adjusted shares rounded down to whole lots of ``trade_unit`` raw shares (raw = adjusted × factor)."""
    if trade_unit is None:
        return amount
    factor = factor if np.isfinite(factor) and factor > 0 else 1.0
    return (amount * factor // trade_unit) * trade_unit / factor
