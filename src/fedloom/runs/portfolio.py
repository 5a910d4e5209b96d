"""The Qlib portfolio evaluation of a ranking run (seed 000, Table 3): every client's personalized
scores on its test rows, pooled into one cross-section per day, traded by TopkDropout against the
benchmark index; risk analysis of the excess return with costs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.registry import Market
from fedloom.metrics.portfolio import TopkDropout, backtest, excess_returns
from fedloom.metrics.risk import risk_analysis


class PortfolioConfig(BaseModel):
    """TopkDropout settings. Qlib's benchmark holds 50 of CSI300's 300 names and replaces 5 a day; on a
    CPU-sized universe of 50 names the same 50 buy the basket and the excess return measures nothing
    (issue 43). By default the portfolio holds ``max_share`` of the day's scored universe and replaces a
    tenth of it a day; a ``topk`` above that share is not traded and no excess return is reported."""

    model_config = ConfigDict(extra="forbid")

    topk: int | None = Field(None, ge=1, description="stocks held (null: max_share of the universe)")
    n_drop: int | None = Field(None, ge=0, description="stocks replaced per day (null: a tenth of topk, at least 1)")
    max_share: float = Field(0.1, gt=0, le=1, description="largest topk / universe traded (the rest buys the basket)")


def holdings(cfg: PortfolioConfig, universe: int) -> tuple[int, int] | None:
    """(topk, n_drop) of a universe of ``universe`` names, or None where ``cfg.topk`` holds more than
    ``cfg.max_share`` of it (or the universe is too small to hold one name).

    >>> holdings(PortfolioConfig(), 300), holdings(PortfolioConfig(), 50), holdings(PortfolioConfig(topk=50), 50)
    ((30, 3), (5, 1), None)
    """
    cap = int(np.floor(cfg.max_share * universe + 1e-9))
    topk = cfg.topk if cfg.topk is not None else cap
    if topk < 1 or topk > cap:
        return None
    return topk, cfg.n_drop if cfg.n_drop is not None else max(1, topk // 10)


def portfolio_report(scores: pd.DataFrame, market: Market, topk: int, n_drop: int) -> pd.DataFrame:
    """The daily TopkDropout report (`fedloom.metrics.portfolio.backtest`) from long ``date, instrument,
    score`` (every client's test scores pooled per day) on the dataset's ``market``."""
    return backtest(scores, market.bars(), TopkDropout(topk=topk, n_drop=n_drop), market.benchmark())


def portfolio_metrics(report: pd.DataFrame) -> dict[str, float]:
    """Annualized return, information ratio, volatility and max drawdown of the excess return with cost."""
    risk = risk_analysis(excess_returns(report, with_cost=True))
    return {**risk, "trade_days": float(len(report)), "mean_turnover": float(np.mean(report["turnover"]))}
