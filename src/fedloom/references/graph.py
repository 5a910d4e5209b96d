"""Qlib's GATs reference (qlib/contrib/model/pytorch_gats.py): a recurrent encoder turns each stock's
Alpha360 series into h_i; attention over the *same day's* stocks, α_ij = softmax_j(LeakyReLU(aᵀ[Wh_i ‖ Wh_j])),
mixes them, h'_i = Σ_j α_ij h_j + h_i, and an MLP head scores h'_i. One training step is one day."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fedloom.references.base import Objective
from fedloom.references.config import GATConfig
from fedloom.references.neural import NeuralReference, Schedule, seeded
from fedloom.references.sequence import Recurrent, sequence_layout


class StockAttention(nn.Module):
    """A day's stocks [N, F·T] → scores [N, outputs], every stock attending to every other (dense graph)."""

    def __init__(self, fields: int, outputs: int, cfg: GATConfig) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.encoder = Recurrent(nn.LSTM if cfg.encoder == "lstm" else nn.GRU, fields, 1, cfg)
        self.transform = nn.Linear(h, h)
        self.attention = nn.Parameter(torch.randn(2 * h, 1))  # a = [a_i; a_j]
        self.head = nn.Sequential(nn.Linear(h, h), nn.LeakyReLU(), nn.Linear(h, outputs))

    def weights(self, hidden: torch.Tensor) -> torch.Tensor:
        """[N, N] attention α_ij: aᵀ[z_i ‖ z_j] = a_iᵀz_i + a_jᵀz_j with z = W h, LeakyReLU, softmax over j."""
        z = self.transform(hidden)
        half = hidden.shape[1]
        score = z @ self.attention[:half] + (z @ self.attention[half:]).T
        return torch.softmax(nn.functional.leaky_relu(score), dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder.encode(x)
        return self.head(self.weights(hidden) @ hidden + hidden)


def gat_reference(cfg: GATConfig, objective: Objective, features: Sequence[str], seed: int) -> NeuralReference:
    """Days shuffled each epoch, one day per step; early stopping on the validation loss (Qlib's loop)."""
    fields, _ = sequence_layout(features)
    schedule = Schedule(1, cfg.max_epochs, None, cfg.early_stop, cfg.learning_rate, cfg.adam_weight_decay,
                        "days", grad_clip=3.0)  # fmt: skip
    return NeuralReference(seeded(lambda outputs: StockAttention(fields, outputs, cfg)), schedule, objective, seed)
