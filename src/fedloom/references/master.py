"""MASTER, the market-guided stock transformer (Li et al., AAAI 2024; SJTU-Quant/MASTER master.py).

Per day, every stock's last T days of features x ∈ [T, F] and the day's market status m ∈ [63]::

    α = F · softmax(W m / β)                  market-guided gate, rescales the features
    z = Linear(x ⊙ α) + positions             [T, D]
    z = IntraStock(z)                         attention over a stock's own T days
    z = InterStock(z)                         attention over the day's stocks, at each step t
    h = Σ_t softmax_t(W z_t · W z_T) z_t       temporal pooling, queried by the last day
    score = Linear(h)

The rows arrive flat: ``NAME@k`` columns hold day t−k's feature (see `fedloom.data.qlib_cn`) and
``MKT_*`` columns the market status (`fedloom.data.market`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from fedloom.data.market import PREFIX
from fedloom.errors import ConfigError
from fedloom.references.base import Objective
from fedloom.references.config import MASTERConfig
from fedloom.references.neural import NeuralReference, Schedule, seeded
from fedloom.references.sequence import sinusoidal


def master_layout(names: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Column indices of the stock series [T, F] (oldest day first) and of the market status [M]."""
    position = {name: k for k, name in enumerate(names)}
    market = [k for k, name in enumerate(names) if name.startswith(PREFIX)]
    base = [n for n in names if "@" not in n and not n.startswith(PREFIX)]
    steps = 1 + max((int(n.rsplit("@", 1)[1]) for n in names if "@" in n), default=0)
    if not market or not base:
        raise ConfigError("MASTER reads stock features and the market status: set data.qlib_cn.market=true "
                          "(and data.qlib_cn.step_len=8 for MASTER's 8-day series)")  # fmt: skip
    try:
        series = [[position[f"{n}@{lag}" if lag else n] for n in base] for lag in range(steps - 1, -1, -1)]
    except KeyError as missing:
        raise ConfigError(f"MASTER needs every feature at every lag up to {steps - 1}; {missing} is missing") from None
    return torch.tensor(series), torch.tensor(market)


class MarketGate(nn.Module):
    """α = F · softmax(W m / β): feature weights from the market status that average 1."""

    def __init__(self, market: int, features: int, beta: float) -> None:
        super().__init__()
        self.linear, self.beta, self.features = nn.Linear(market, features), beta, features

    def forward(self, m: torch.Tensor) -> torch.Tensor:
        return self.features * torch.softmax(self.linear(m) / self.beta, dim=-1)


class SelfAttention(nn.Module):
    """Attention along axis 1 of [B, L, D] as MASTER's TAttention / SAttention: z = LN(x),
    h = LN(z + MultiHead(z)), out = h + FFN(h); scores divided by √(D/heads) only when ``scaled``."""

    def __init__(self, width: int, heads: int, dropout: float, scaled: bool) -> None:
        super().__init__()
        self.heads, self.temperature = heads, math.sqrt(width / heads) if scaled else 1.0
        self.query, self.key, self.value = (nn.Linear(width, width, bias=False) for _ in range(3))
        self.norm_in, self.norm_out = nn.LayerNorm(width), nn.LayerNorm(width)
        self.dropout = nn.Dropout(dropout)
        self.ffn = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Dropout(dropout), nn.Linear(width, width),
                                 nn.Dropout(dropout))  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.norm_in(x)
        b, length, width = z.shape
        q, k, v = (f(z).view(b, length, self.heads, -1).transpose(1, 2) for f in (self.query, self.key, self.value))
        weights = self.dropout(torch.softmax(q @ k.transpose(-1, -2) / self.temperature, dim=-1))
        h = self.norm_out(z + (weights @ v).transpose(1, 2).reshape(b, length, width))
        return h + self.ffn(h)


class TemporalPooling(nn.Module):
    """h = Σ_t λ_t z_t with λ = softmax_t(W z_t · W z_T): the last day asks which days matter."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width, bias=False)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        h = self.linear(z)
        weights = torch.softmax((h @ h[:, -1:].transpose(1, 2)).squeeze(-1), dim=1)  # [N, T]
        return (weights.unsqueeze(-1) * z).sum(dim=1)


class MASTER(nn.Module):
    """One day's stocks, rows laid out as `master_layout` reads them → scores [N, outputs]."""

    series: torch.Tensor
    market: torch.Tensor
    positions: torch.Tensor

    def __init__(self, series: torch.Tensor, market: torch.Tensor, outputs: int, cfg: MASTERConfig) -> None:
        super().__init__()
        steps, features = series.shape
        self.register_buffer("series", series, persistent=False)
        self.register_buffer("market", market, persistent=False)
        self.gate = MarketGate(len(market), features, cfg.beta)
        self.inputs = nn.Linear(features, cfg.hidden_size)
        self.register_buffer("positions", sinusoidal(steps, cfg.hidden_size), persistent=False)
        self.intra = SelfAttention(cfg.hidden_size, cfg.temporal_heads, cfg.dropout_rate, scaled=False)
        self.inter = SelfAttention(cfg.hidden_size, cfg.stock_heads, cfg.dropout_rate, scaled=True)
        self.pool = TemporalPooling(cfg.hidden_size)
        self.head = nn.Linear(cfg.hidden_size, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stocks = x[:, self.series] * self.gate(x[:, self.market]).unsqueeze(1)  # [N, T, F]
        z = self.intra(self.inputs(stocks) + self.positions)
        z = self.inter(z.transpose(0, 1)).transpose(0, 1)  # [T, N, D]: each step attends across stocks
        return self.head(self.pool(z))


def master_reference(cfg: MASTERConfig, objective: Objective, features: Sequence[str], seed: int) -> NeuralReference:
    """MASTER's loop: days shuffled, one per step, extreme labels trimmed and the rest z-scored, gradient
    values clipped at 3, stopped by the training loss (no validation-based choice)."""
    series, market = master_layout(features)
    schedule = Schedule(1, cfg.max_epochs, None, cfg.max_epochs, cfg.learning_rate, sampling="days", grad_clip=3.0,
                        day_zscore=True, trim=cfg.drop_extreme, train_loss_stop=cfg.train_loss_stop)  # fmt: skip
    return NeuralReference(seeded(lambda outputs: MASTER(series, market, outputs, cfg)), schedule, objective, seed)
