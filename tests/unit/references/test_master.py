"""MASTER reads its flat rows as [T, F] series plus the day's market, gates features by the market,
attends within a day only, and trains by MASTER's loop. Data here is SYNTHETIC."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import pearsonr

from fedloom.errors import ConfigError
from fedloom.references.base import Fold, Objective
from fedloom.references.config import MASTERConfig
from fedloom.references.master import MASTER, MarketGate, master_layout, master_reference
from fedloom.references.neural import day_zscored, trimmed

NAMES = ["A@1", "B@1", "C@1", "A", "B", "C", "MKT_X_RET0", "MKT_X_RETSTD5"]  # T = 2, F = 3, M = 2
SMALL = MASTERConfig(hidden_size=16, temporal_heads=2, stock_heads=2, dropout_rate=0.0, learning_rate=3e-3,
                     max_epochs=40, train_loss_stop=0.25, beta=1.0)  # fmt: skip


def test_layout_reads_oldest_day_first_and_the_market_columns() -> None:
    series, market = master_layout(NAMES)
    assert series.tolist() == [[0, 1, 2], [3, 4, 5]] and market.tolist() == [6, 7]
    with pytest.raises(ConfigError, match="market"):
        master_layout(NAMES[:6])
    with pytest.raises(ConfigError, match="B@1"):
        master_layout([n for n in NAMES if n != "B@1"])


def test_gate_weights_average_one_and_flatten_as_beta_grows() -> None:
    torch.manual_seed(0)
    m = torch.randn(7, 2)
    for beta in (0.5, 5.0):
        weights = MarketGate(2, 3, beta)(m)
        torch.testing.assert_close(weights.mean(dim=1), torch.ones(7))
    flat = MarketGate(2, 3, 1e9)(m)
    torch.testing.assert_close(flat, torch.ones(7, 3))


def test_scores_follow_a_permutation_of_the_days_stocks() -> None:
    """Inter-stock attention has no order: permuting a day's stocks permutes their scores."""
    torch.manual_seed(1)
    series, market = master_layout(NAMES)
    net = MASTER(series, market, 1, SMALL).eval()
    x = torch.randn(9, len(NAMES))
    order = torch.randperm(9)
    with torch.no_grad():
        torch.testing.assert_close(net(x[order]), net(x)[order], rtol=1e-5, atol=1e-6)


def test_a_stock_is_scored_from_its_own_day_only() -> None:
    x = np.random.default_rng(0).standard_normal((12, len(NAMES))).astype(np.float32)
    days = np.repeat(np.arange(3), 4)
    model = master_reference(SMALL.model_copy(update={"max_epochs": 2}), Objective("regression"), NAMES, seed=0)
    model.fit(Fold(x, x[:, 5], days), Fold(x, x[:, 5], days))
    base = model.predict(x, days)
    other_day, same_day = x.copy(), x.copy()
    other_day[9, 3] += 5.0
    same_day[1, 3] += 5.0
    np.testing.assert_allclose(model.predict(other_day, days)[:4], base[:4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(model.predict(same_day, days)[[0, 2, 3]], base[[0, 2, 3]])


def market_switch(days: int, stocks: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SYNTHETIC: on an up-market day (RET0 > 0) the target is today's A, on a down day today's B."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((days * stocks, len(NAMES))).astype(np.float32)
    day = np.repeat(np.arange(days), stocks)
    x[:, 6:] = rng.standard_normal((days, 2)).astype(np.float32)[day]  # one market status per day
    y = np.where(x[:, 6] > 0, x[:, 3], x[:, 4]) + 0.2 * rng.standard_normal(len(day)).astype(np.float32)
    return x, y.astype(np.float32), day


def test_master_learns_a_rule_that_the_market_switches_and_needs_the_market_for_it() -> None:
    x, y, days = market_switch(140, 30, seed=2)
    train, valid, test = days < 100, (days >= 100) & (days < 120), days >= 120
    ics = {}
    for label, market in (("market", x[:, 6:]), ("no market", np.zeros_like(x[:, 6:]))):
        xm = np.concatenate([x[:, :6], market], axis=1)
        model = master_reference(SMALL.model_copy(update={"max_epochs": 12}), Objective("regression"), NAMES, seed=0)
        info = model.fit(Fold(xm[train], y[train], days[train]), Fold(xm[valid], y[valid], days[valid]))
        ics[label] = pearsonr(model.predict(xm[test], days[test]), y[test]).statistic
        assert info["steps"] % 100 == 0  # whole passes over the 100 training days
    assert ics["market"] > 0.8, ics
    assert ics["market"] - ics["no market"] > 0.2, ics


def test_training_stops_at_the_first_pass_below_the_loss_target() -> None:
    x, y, days = market_switch(30, 10, seed=3)
    model = master_reference(SMALL.model_copy(update={"train_loss_stop": 100.0}), Objective("regression"), NAMES, 0)
    info = model.fit(Fold(x, y, days), Fold(x, y, days))
    assert info["steps"] == 30 and info["train_loss"] <= 100.0


def test_trim_and_day_zscore_are_masters_label_steps() -> None:
    y = torch.arange(80, dtype=torch.float32).flip(0)
    kept = trimmed(torch.arange(80), y, 0.025)  # ⌊0.025·80⌋ = 2 from each end
    assert sorted(y[kept].tolist()) == list(range(2, 78))
    assert len(trimmed(torch.arange(30), y[:30], 0.025)) == 30  # ⌊0.75⌋ = 0: every row kept
    days = np.repeat([0, 1], 40)
    z = day_zscored(y, days)
    for d in (0, 1):
        part = z[torch.from_numpy(days == d)]
        assert abs(float(part.mean())) < 1e-5 and float(part.std()) == pytest.approx(1.0, rel=1e-5)
    assert day_zscored(torch.ones(3), np.zeros(3)).tolist() == [0.0, 0.0, 0.0]
