"""TopkDropout backtest on a hand-made market with known answers, and Qlib's risk analysis by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedloom.metrics.portfolio import TopkDropout, _round_to_unit, backtest, excess_returns
from fedloom.metrics.risk import risk_analysis

DAYS = pd.bdate_range("2024-01-01", periods=5)
CLOSES = {"A": [10, 10, 11, 11, 11], "B": [20, 20, 20, 22, 22], "C": [5, 5, 5, 5, 4]}
# day 0 favours A, day 1 favours B, day 2 favours C
SCORES = {0: {"A": 3, "B": 2, "C": 1}, 1: {"B": 3, "A": 2, "C": 1}, 2: {"C": 3, "B": 2, "A": 1}}
FREE = TopkDropout(
    topk=1, n_drop=1, open_cost=0.0, close_cost=0.0, min_cost=0.0, account=100.0, risk_degree=1.0, trade_unit=None
)


def _market(untradable: tuple[str, int] | None = None) -> pd.DataFrame:
    rows = [
        {"date": DAYS[t], "instrument": k, "close": float(v[t]), "tradable": (k, t) != untradable, "factor": 1.0}
        for k, v in CLOSES.items()
        for t in range(5)
    ]
    return pd.DataFrame(rows)


def _scores() -> pd.DataFrame:
    return pd.DataFrame(
        [{"date": DAYS[t], "instrument": k, "score": s} for t, row in SCORES.items() for k, s in row.items()]
    )


def test_rotation_without_costs():
    """Day 1 buys A at 10; day 2 swaps A (now 11) for B at 20; day 3 swaps B (now 22) for C."""
    report = backtest(_scores(), _market(), FREE)
    assert list(report.index) == list(DAYS[1:4])
    np.testing.assert_allclose(report["return"], [0.0, 0.10, 0.10])
    np.testing.assert_allclose(report["value"], [100.0, 110.0, 121.0])
    np.testing.assert_allclose(report["turnover"], [1.0, 2.2, 2.2])  # sell + buy value over the previous value
    assert (report["cost"] == 0).all()


def test_costs_are_charged_but_returns_stay_gross():
    s = TopkDropout(**{**FREE.__dict__, "open_cost": 0.01, "close_cost": 0.02})
    report = backtest(_scores(), _market(), s)
    v1 = 100 / 1.01  # the whole cash buys A with its 1 % fee
    sold = v1 / 10 * 11
    v2 = sold * (1 - 0.02) / 1.01
    np.testing.assert_allclose(report["value"].iloc[:2], [v1, v2])
    np.testing.assert_allclose(report["return"].iloc[:2], [0.0, 0.10], atol=1e-12)  # (earning + cost) / value
    np.testing.assert_allclose(report["cost"].iloc[:2], [(100 - v1) / 100, (sold * 0.02 + (sold * 0.98 - v2)) / v1])
    net = excess_returns(report.assign(bench=0.0))
    np.testing.assert_allclose(net, report["return"] - report["cost"])


def test_untradable_stock_is_not_bought_and_cash_waits():
    report = backtest(_scores(), _market(untradable=("B", 2)), FREE)
    np.testing.assert_allclose(report["value"], [100.0, 110.0, 110.0])  # A sold on day 2, B not bought
    np.testing.assert_allclose(report["return"], [0.0, 0.10, 0.0])


def test_topk_keeps_winners_and_benchmark_is_joined():
    s = TopkDropout(**{**FREE.__dict__, "topk": 2, "n_drop": 1})
    bench = pd.Series([100.0, 101.0, 102.01, 103.0301, 104.060401], index=DAYS)
    report = backtest(_scores(), _market(), s, bench)
    # day 1 buys A and B (50 each); on day 2 the bottom one of held ∪ candidates is C, which is not held,
    # so nothing is sold and nothing bought: the return is A's 10 % on half the book
    np.testing.assert_allclose(report["bench"], 0.01)
    np.testing.assert_allclose(report["return"].iloc[1], (50 / 10 * 11 + 50 - 100) / 100)


def test_trade_unit_rounds_raw_shares_down():
    # 13,571.4 adjusted shares with factor 2 are 27,142.9 raw shares → 271 lots of 100 → 13,550 adjusted
    assert _round_to_unit(95_000 / 7, 2.0, 100) == pytest.approx(13_550)
    assert _round_to_unit(3.7, 1.0, None) == 3.7


def test_risk_analysis_by_hand():
    r = pd.Series([0.01, -0.02, 0.03, 0.00])
    got = risk_analysis(r, periods=238)
    assert got["annualized_return"] == pytest.approx(r.mean() * 238)
    assert got["information_ratio"] == pytest.approx(r.mean() / r.std(ddof=1) * np.sqrt(238))
    assert got["annualized_volatility"] == pytest.approx(r.std(ddof=1) * np.sqrt(238))
    assert got["max_drawdown"] == pytest.approx(-0.02)  # cumsum 0.01, -0.01, 0.02, 0.02
    product = risk_analysis(r, periods=4, mode="product")
    assert product["annualized_return"] == pytest.approx(1.01 * 0.98 * 1.03 - 1)
    assert product["max_drawdown"] == pytest.approx(0.98 - 1)
    with pytest.raises(ValueError, match="at least 2 daily returns"):
        risk_analysis([0.1])
