"""Issue 43: a TopkDropout portfolio that holds the whole universe measures nothing, so the run trades
at most ``portfolio.max_share`` of the day's scored names and reports no excess return otherwise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.data.registry import Market
from fedloom.runs import outputs
from fedloom.runs.portfolio import PortfolioConfig, holdings
from tests.conftest import small_config

TRAIN_DATES = pd.bdate_range("2023-01-02", periods=60).to_numpy()


@pytest.mark.parametrize(
    ("cfg", "universe", "expected"),
    [
        (PortfolioConfig(), 300, (30, 3)),  # a tenth of CSI300, a tenth of it replaced a day
        (PortfolioConfig(), 50, (5, 1)),
        (PortfolioConfig(), 9, None),  # too small to hold one name at 10 %
        (PortfolioConfig(topk=50), 300, None),  # Qlib's benchmark topk is 17 % of CSI300
        (PortfolioConfig(topk=50, max_share=0.2), 300, (50, 5)),
        (PortfolioConfig(topk=50, n_drop=5), 50, None),  # the basket
        (PortfolioConfig(topk=4, n_drop=2), 50, (4, 2)),
    ],
)
def test_holdings_cap_the_share_of_the_universe(cfg, universe, expected):
    assert holdings(cfg, universe) == expected


def _predictions(names: int, days: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    dates = pd.bdate_range("2024-01-01", periods=days)
    rows = [
        {"date": d, "instrument": f"S{k:02d}", "client": f"c{k % 2}", "score": rng.normal(), "target": rng.normal()}
        for d in dates
        for k in range(names)
    ]
    return pd.DataFrame(rows)


def _market(names: int, days: int) -> Market:
    dates = pd.bdate_range("2024-01-01", periods=days + 2)
    closes = 10 + np.cumsum(np.random.default_rng(1).normal(0, 0.1, (days + 2, names)), axis=0)
    bars = pd.DataFrame(
        [
            {"date": d, "instrument": f"S{k:02d}", "close": closes[t, k], "tradable": True, "factor": 1.0}
            for t, d in enumerate(dates)
            for k in range(names)
        ]
    )
    index_days = pd.bdate_range("2022-06-01", dates[-1])  # the regimes need 60 index returns before training
    bench = pd.Series(100 * np.exp(np.cumsum(np.random.default_rng(2).normal(0, 0.01, len(index_days)))), index_days)
    return Market(lambda: bars, lambda: bench)


@pytest.mark.parametrize(("topk", "traded"), [(None, True), (3, True), (20, False)])
def test_a_portfolio_that_would_buy_the_basket_is_not_reported(monkeypatch, topk, traded):
    monkeypatch.setattr(outputs, "dataset_market", lambda name, data: _market(20, 30))
    cfg = small_config(**{"portfolio.max_share": 0.15, **({} if topk is None else {"portfolio.topk": topk})})
    out = outputs.prediction_outputs(cfg, "ranking", _predictions(20, 30), TRAIN_DATES)
    assert ("portfolio" in out) is traded and ("portfolio_daily" in out) is traded
    assert "regimes" in out and "daily" in out  # the rest of the test outputs stay
    if traded:
        assert out["portfolio"]["trade_days"] > 0


def test_a_portfolio_of_one_test_day_reports_its_trades_and_no_risk(monkeypatch):
    """One test date (`fedloom params`' probe, a smoke run): no return series to annualize, no crash."""
    monkeypatch.setattr(outputs, "dataset_market", lambda name, data: _market(20, 1))
    out = outputs.prediction_outputs(small_config(), "ranking", _predictions(20, 1), TRAIN_DATES)
    assert "portfolio" not in out and len(out["portfolio_daily"]) == 1 and "daily" in out
