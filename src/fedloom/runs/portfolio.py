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
    """TopkDropout settings (Qlib's benchmark defaults; lower ``topk`` for small universes)."""

    model_config = ConfigDict(extra="forbid")

    topk: int = Field(50, ge=1, description="stocks held")
    n_drop: int = Field(5, ge=0, description="stocks replaced per day")


def portfolio_report(scores: pd.DataFrame, market: Market, cfg: PortfolioConfig) -> pd.DataFrame:
    """The daily TopkDropout report (`fedloom.metrics.portfolio.backtest`) from long ``date, instrument,
    score`` (every client's test scores pooled per day) on the dataset's ``market``."""
    strategy = TopkDropout(topk=cfg.topk, n_drop=cfg.n_drop)
    return backtest(scores, market.bars(), strategy, market.benchmark())


def portfolio_metrics(report: pd.DataFrame) -> dict[str, float]:
    """Annualized return, information ratio, volatility and max drawdown of the excess return with cost."""
    risk = risk_analysis(excess_returns(report, with_cost=True))
    return {**risk, "trade_days": float(len(report)), "mean_turnover": float(np.mean(report["turnover"]))}
