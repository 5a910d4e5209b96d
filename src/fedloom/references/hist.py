"""HIST (Xu et al. 2021; qlib/contrib/model/pytorch_hist.py): a stock's encoded series h_i is split into
what its predefined concepts explain, what hidden concepts (its most similar stocks) explain, and the
rest; each part gives a forecast and the three are summed. Per day, with concept matrix C [N, K]::

    c_k   = Σ_i C_ik h_i / (n_k + 1)                      concept representations (n_k members today)
    e_i   = W_es Σ_k softmax_k(cos(h_i, c_k)) c_k           shared information from predefined concepts
    r_i   = h_i − W_es,back e_i
    ĉ_j   = Σ_i M_ij r_i,  M_ij = cos(r_i, r_j) for j = i's most similar other stock (+ the diagonal of
            every chosen j)                                  hidden concepts
    s_i   = W_is Σ_j softmax_j(cos(r_i, ĉ_j)) ĉ_j
    score = W_out(LReLU(W_es,fore e_i) + LReLU(W_is,fore s_i) + LReLU(W_indi (r_i − W_is,back s_i)))

Rows arrive flat: Alpha360-style lags (`sequence_layout`) and 0/1 ``CONCEPT_*`` columns
(`fedloom.data.qlib_cn.concept_columns`)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fedloom.data.qlib_cn import CONCEPT
from fedloom.errors import ConfigError
from fedloom.references.base import Objective
from fedloom.references.config import HISTConfig
from fedloom.references.neural import NeuralReference, Schedule, seeded
from fedloom.references.sequence import Recurrent, sequence_layout


def hist_layout(names: Sequence[str]) -> tuple[int, torch.Tensor, torch.Tensor]:
    """(fields of the series, indices of the series columns, indices of the concept columns)."""
    concepts = [k for k, n in enumerate(names) if n.startswith(CONCEPT)]
    series = [k for k, n in enumerate(names) if not n.startswith(CONCEPT)]
    if not concepts:
        raise ConfigError("HIST reads concept memberships: set data.qlib_cn.concepts=true")
    fields, _ = sequence_layout([names[k] for k in series])
    return fields, torch.tensor(series), torch.tensor(concepts)


def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[n, m] cosine similarities of the rows of a and b (Qlib's cal_cos_similarity, + 1e-6 below)."""
    return (a @ b.T) / (a.norm(dim=1, keepdim=True) @ b.norm(dim=1, keepdim=True).T + 1e-6)


def concept_attention(h: torch.Tensor, concepts: torch.Tensor) -> torch.Tensor:
    """Σ_k softmax_k(cos(h_i, c_k)) c_k: each stock reads the concepts it resembles."""
    return torch.softmax(cosine(h, concepts), dim=1) @ concepts


def hidden_concepts(r: torch.Tensor) -> torch.Tensor:
    """One hidden concept per stock that some other stock finds most similar: ĉ_j = Σ_i M_ij r_i."""
    similarity = cosine(r, r)
    diagonal = similarity.diagonal().clone()
    off = similarity * (1 - torch.eye(len(r)))
    value, column = off.max(dim=1)
    m = torch.zeros_like(similarity)
    m[torch.arange(len(r)), column] = value
    chosen = m.ne(0).any(dim=0)
    m = m + torch.diag(chosen.float() * diagonal)
    return (m.T @ r)[chosen]


class HIST(nn.Module):
    """One day's stocks [N, columns] → scores [N, outputs]."""

    series: torch.Tensor
    concepts: torch.Tensor

    def __init__(self, fields: int, series: torch.Tensor, concepts: torch.Tensor, outputs: int, cfg: HISTConfig):
        super().__init__()
        h = cfg.hidden_size
        self.register_buffer("series", series, persistent=False)
        self.register_buffer("concepts", concepts, persistent=False)
        self.encoder = Recurrent(nn.LSTM if cfg.encoder == "lstm" else nn.GRU, fields, 1, cfg)
        layers = {n: nn.Linear(h, h) for n in ("es", "es_back", "es_fore", "is_", "is_back", "is_fore", "indi")}
        for layer in layers.values():
            nn.init.xavier_uniform_(layer.weight)
        self.fc = nn.ModuleDict(layers)
        self.head = nn.Linear(h, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fc, act = self.fc, nn.functional.leaky_relu
        h = self.encoder.encode(x[:, self.series])
        membership = x[:, self.concepts]
        present = membership.sum(dim=0) > 0  # concepts with members today
        c = (membership / (membership * membership.sum(dim=0) + 1)).T @ h
        e = fc["es"](concept_attention(h, c[present]))
        r = h - fc["es_back"](e)
        s = fc["is_"](concept_attention(r, hidden_concepts(r)))
        individual = r - fc["is_back"](s)
        return self.head(act(fc["es_fore"](e)) + act(fc["is_fore"](s)) + act(fc["indi"](individual)))


def hist_reference(cfg: HISTConfig, objective: Objective, features: Sequence[str], seed: int) -> NeuralReference:
    """Days shuffled, one per step, gradient values clipped at 3, early stopping on the validation IC."""
    fields, series, concepts = hist_layout(features)
    schedule = Schedule(1, cfg.max_epochs, None, cfg.early_stop, cfg.learning_rate, cfg.adam_weight_decay,
                        "days", grad_clip=3.0, stop_on="ic")  # fmt: skip
    return NeuralReference(
        seeded(lambda outputs: HIST(fields, series, concepts, outputs, cfg)), schedule, objective, seed
    )
