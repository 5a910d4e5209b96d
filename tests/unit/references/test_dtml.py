"""DTML attends across one day's stocks: its scores follow the stocks when they are reordered, the market
context enters with weight β, and the context normalization puts a day on one scale. SYNTHETIC inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedloom.references.config import DTMLConfig
from fedloom.references.dtml import DTML, context_normalization


def net(beta: float = 0.1) -> DTML:
    torch.manual_seed(0)
    return DTML(fields=3, outputs=1, cfg=DTMLConfig(hidden_size=8, heads=2, beta=beta, dropout_rate=0.0)).eval()


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 9), st.integers(0, 10_000))
def test_reordering_the_days_stocks_reorders_their_scores(stocks: int, seed: int) -> None:
    """No position enters the data axis: the network is permutation-equivariant over a day's stocks."""
    x = torch.randn(stocks, 3 * 4, generator=torch.Generator().manual_seed(seed))  # F = 3 fields × T = 4 days
    order = torch.randperm(stocks, generator=torch.Generator().manual_seed(seed + 1))
    model = net()
    with torch.no_grad():
        torch.testing.assert_close(model(x[order]), model(x)[order], rtol=1e-4, atol=1e-5)


def test_beta_zero_cuts_the_market_encoder_off() -> None:
    x = torch.randn(5, 12)
    for beta, reaches in ((0.0, False), (0.1, True)):
        model = net(beta).train()
        model(x).sum().backward()
        grads = [p.grad for p in model.market.parameters()]
        assert any(g is not None and g.abs().sum() > 0 for g in grads) is reaches


def test_context_normalization_gives_a_day_zero_mean_and_unit_scale() -> None:
    c = torch.randn(7, 8) * 5 + 3
    out = context_normalization(c, torch.ones(8), torch.zeros(8))
    assert float(out.mean()) == pytest.approx(0.0, abs=1e-5) and float(out.std(unbiased=False)) == pytest.approx(
        1.0, abs=1e-4
    )
    shifted = context_normalization(c, torch.full((8,), 2.0), torch.full((8,), 0.5))
    np.testing.assert_allclose(shifted.numpy(), 2 * out.numpy() + 0.5, rtol=1e-5, atol=1e-5)


def test_heads_must_divide_the_width() -> None:
    with pytest.raises(ValueError, match="not divisible by 3 heads"):
        DTMLConfig(hidden_size=8, heads=3)
