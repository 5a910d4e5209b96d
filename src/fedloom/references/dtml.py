"""DTML, the data-axis transformer with multi-level contexts (Yoo et al., KDD 2021), one of seed 000
Table 4's text-dataset references, rebuilt from the paper's description (no code of it is bundled):

    x̃_t = tanh(W x_t + b)                           feature transformation, per stock and day t
    h_t = LSTM(x̃_1 … x̃_t)                           the stock's own history
    c = Σ_t softmax_t(h_tᵀ h_T) h_t                  attention LSTM: the last day asks which days matter
    c̄ = γ ⊙ (c − μ) / σ + δ                         context normalization over the day's stocks
    m_u = c̄_u + β · c̄_market                        multi-level context: stock plus market
    p = tanh(m + MultiHead(m, m, m))                 data-axis self-attention across the day's stocks
    p = tanh(p + MLP(p)); score = W p + b

The market context comes from the same kind of encoder (own weights) reading the market's series. ACL18
and BigData22 carry no index series, so the day's equal-weighted mean of the stocks' features stands in for
it, and γ, δ are per hidden unit, not per stock (a client's day holds a varying set of names) — the two
departures from the paper, both forced by the data. One training step is one day, as in GATs."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fedloom.references.base import Objective
from fedloom.references.config import DTMLConfig
from fedloom.references.neural import NeuralReference, Schedule, seeded
from fedloom.references.sequence import as_series, sequence_layout


class AttentiveContext(nn.Module):
    """[N, T, F] series → [N, hidden] contexts: feature transformation, LSTM, attention queried by h_T."""

    def __init__(self, fields: int, hidden: int) -> None:
        super().__init__()
        self.inputs = nn.Sequential(nn.Linear(fields, hidden), nn.Tanh())
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.inputs(series))
        weights = torch.softmax((h @ h[:, -1:].transpose(1, 2)).squeeze(-1), dim=1)  # [N, T]
        return (weights.unsqueeze(-1) * h).sum(dim=1)


def context_normalization(c: torch.Tensor, gain: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """γ ⊙ (c − μ) / σ + δ with μ, σ over the day's stocks and hidden units together (DTML's normalization,
    which puts every stock's context on one scale before the market context is added)."""
    return gain * (c - c.mean()) / (c.std(unbiased=False) + eps) + bias


class DTML(nn.Module):
    """A day's stocks [N, F·T] → scores [N, outputs], every stock attending to every other."""

    def __init__(self, fields: int, outputs: int, cfg: DTMLConfig) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.fields, self.beta = fields, cfg.beta
        self.stock, self.market = AttentiveContext(fields, h), AttentiveContext(fields, h)
        self.gain, self.bias = nn.Parameter(torch.ones(h)), nn.Parameter(torch.zeros(h))
        self.attention = nn.MultiheadAttention(h, cfg.heads, dropout=cfg.dropout_rate, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(h, 4 * h), nn.ReLU(), nn.Dropout(cfg.dropout_rate), nn.Linear(4 * h, h))
        self.head = nn.Linear(h, outputs)

    def contexts(self, x: torch.Tensor) -> torch.Tensor:
        """Multi-level contexts m [N, hidden]: each stock's normalized context plus β times the market's."""
        series = as_series(x, self.fields)
        stock = context_normalization(self.stock(series), self.gain, self.bias)
        market = self.market(series.mean(dim=0, keepdim=True))  # the day's equal-weighted market series
        return stock + self.beta * context_normalization(market, self.gain, self.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        m = self.contexts(x).unsqueeze(0)  # one "sequence" of the day's stocks
        p = torch.tanh(m + self.attention(m, m, m, need_weights=False)[0])
        p = torch.tanh(p + self.mlp(p))
        return self.head(p.squeeze(0))


def dtml_reference(cfg: DTMLConfig, objective: Objective, features: Sequence[str], seed: int) -> NeuralReference:
    """Days shuffled each pass, one day per step, early stopping on the validation loss."""
    fields, _ = sequence_layout(features)
    schedule = Schedule(1, cfg.max_epochs, None, cfg.early_stop, cfg.learning_rate, cfg.adam_weight_decay,
                        "days", grad_clip=3.0)  # fmt: skip
    return NeuralReference(seeded(lambda outputs: DTML(fields, outputs, cfg)), schedule, objective, seed)
