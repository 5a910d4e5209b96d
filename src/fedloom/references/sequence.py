"""Qlib's sequence references on Alpha360-style inputs: each row's lagged fields (``CLOSE59 … CLOSE0,
OPEN59 …``) read as a [T, F] series, oldest day first, and a recurrent, attentive, convolutional or
transformer encoder whose last time step feeds a linear head (qlib/contrib/model/pytorch_lstm.py,
pytorch_gru.py, pytorch_alstm.py, pytorch_tcn.py + tcn.py, pytorch_transformer.py)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from itertools import pairwise

import torch
from torch import nn

from fedloom.errors import ConfigError
from fedloom.references.base import Objective
from fedloom.references.config import (
    ALSTMConfig,
    EncoderConfig,
    GRUConfig,
    SequenceConfig,
    TCNConfig,
    TransformerConfig,
)
from fedloom.references.neural import NeuralReference, Schedule, seeded

LAGGED = re.compile(r"^(.*\D)(\d+)$")  # FIELD and its lag: CLOSE59 (Alpha360), adj_sum_5_4 (`feature_window`)


def sequence_layout(names: Sequence[str]) -> tuple[int, int]:
    """(fields F, steps T) of features laid out field by field, lags descending (Alpha360's order)."""
    parsed = [LAGGED.match(n) for n in names]
    if not names or not all(parsed):
        raise ConfigError(
            "sequence references read lagged features (FIELD59 … FIELD0, as Alpha360); this table's features "
            f"start {list(names[:3])}: use data.qlib_cn.features=alpha360, or data.acl18.feature_window (or "
            "data.bigdata22.feature_window) > 1 for the price features' last days"
        )
    fields = list(dict.fromkeys(m.group(1) for m in parsed if m))
    steps = len(names) // len(fields)
    lags = [int(m.group(2)) for m in parsed if m]
    expected = [lag for _ in fields for lag in range(steps - 1, -1, -1)]
    if len(names) != len(fields) * steps or lags != expected:
        raise ConfigError(f"sequence references need every field at lags {steps - 1} … 0 in that order")
    return len(fields), steps


def as_series(x: torch.Tensor, fields: int) -> torch.Tensor:
    """[N, F·T] field-major rows → [N, T, F], oldest step first (Qlib: reshape(N, F, T).permute(0, 2, 1))."""
    return x.reshape(len(x), fields, -1).permute(0, 2, 1)


class Recurrent(nn.Module):
    """LSTM / GRU; the top layer's last output feeds the head."""

    def __init__(self, cell: type[nn.LSTM] | type[nn.GRU], fields: int, outputs: int, cfg: EncoderConfig) -> None:
        super().__init__()
        self.fields = fields
        self.rnn = cell(fields, cfg.hidden_size, cfg.num_layers, batch_first=True, dropout=cfg.dropout_rate)
        self.head = nn.Linear(cfg.hidden_size, outputs)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """[N, hidden]: the top layer's output at the last step."""
        out, _ = self.rnn(as_series(x, self.fields))
        return out[:, -1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encode(x))


class AttentiveGRU(nn.Module):
    """ALSTM: tanh(Linear) input, GRU, attention over time α = softmax(w·tanh(Linear(h_t))); the head reads
    [h_T, Σ_t α_t h_t]."""

    def __init__(self, fields: int, outputs: int, cfg: SequenceConfig) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.fields = fields
        self.inputs = nn.Sequential(nn.Linear(fields, h), nn.Tanh())
        self.rnn = nn.GRU(h, h, cfg.num_layers, batch_first=True, dropout=cfg.dropout_rate)
        self.attention = nn.Sequential(nn.Linear(h, h // 2), nn.Dropout(cfg.dropout_rate), nn.Tanh(),
                                       nn.Linear(h // 2, 1, bias=False))  # fmt: skip
        self.head = nn.Linear(2 * h, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.inputs(as_series(x, self.fields)))
        weights = torch.softmax(self.attention(out), dim=1)  # [N, T, 1]
        return self.head(torch.cat([out[:, -1], (weights * out).sum(dim=1)], dim=1))


class CausalBlock(nn.Module):
    """Two weight-normed dilated causal convolutions (ReLU, dropout) with a residual connection."""

    def __init__(self, channels_in: int, channels: int, kernel: int, dilation: int, dropout: float) -> None:
        super().__init__()
        self.trim = (kernel - 1) * dilation
        conv = [
            nn.utils.parametrizations.weight_norm(nn.Conv1d(c, channels, kernel, padding=self.trim, dilation=dilation))
            for c in (channels_in, channels)
        ]
        for c in conv:
            nn.init.normal_(c.parametrizations.weight.original1, 0.0, 0.01)
        self.conv = nn.ModuleList(conv)
        self.dropout = nn.Dropout(dropout)
        self.skip = nn.Conv1d(channels_in, channels, 1) if channels_in != channels else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        for conv in self.conv:
            out = self.dropout(torch.relu(conv(out)[..., : -self.trim]))  # trimmed: step t sees steps ≤ t
        return torch.relu(out + self.skip(x))


class TemporalConv(nn.Module):
    """TCN: ``num_layers`` causal blocks with dilations 1, 2, 4, …; the last step feeds the head."""

    def __init__(self, fields: int, outputs: int, cfg: TCNConfig) -> None:
        super().__init__()
        self.fields = fields
        sizes = [fields] + [cfg.hidden_size] * cfg.num_layers
        blocks = [
            CausalBlock(a, b, cfg.kernel_size, 2**i, cfg.dropout_rate) for i, (a, b) in enumerate(pairwise(sizes))
        ]
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cfg.hidden_size, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(as_series(x, self.fields).transpose(1, 2))[:, :, -1])


def sinusoidal(steps: int, width: int) -> torch.Tensor:
    """[T, d] positional encoding: sin on even, cos on odd dimensions (Vaswani et al. 2017)."""
    position = torch.arange(steps, dtype=torch.float32)[:, None]
    scale = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    table = torch.zeros(steps, width)
    table[:, 0::2], table[:, 1::2] = torch.sin(position * scale), torch.cos(position * scale[: width // 2])
    return table


class Encoder(nn.Module):
    """Transformer: Linear to d_model, sinusoidal positions added, post-norm encoder layers, last step → head."""

    def __init__(self, fields: int, steps: int, outputs: int, cfg: TransformerConfig) -> None:
        super().__init__()
        self.fields = fields
        self.inputs = nn.Linear(fields, cfg.hidden_size)
        self.register_buffer("positions", sinusoidal(steps, cfg.hidden_size))
        layer = nn.TransformerEncoderLayer(cfg.hidden_size, cfg.heads, dropout=cfg.dropout_rate, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(cfg.hidden_size, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.inputs(as_series(x, self.fields)) + self.positions)[:, -1])


def sequence_network(fields: int, steps: int, outputs: int, cfg: SequenceConfig) -> nn.Module:
    """The network a config names by its type (LSTMConfig → LSTM, …)."""
    if isinstance(cfg, TCNConfig):
        return TemporalConv(fields, outputs, cfg)
    if isinstance(cfg, TransformerConfig):
        return Encoder(fields, steps, outputs, cfg)
    if isinstance(cfg, ALSTMConfig):
        return AttentiveGRU(fields, outputs, cfg)
    return Recurrent(nn.GRU if isinstance(cfg, GRUConfig) else nn.LSTM, fields, outputs, cfg)


def sequence_reference(
    cfg: SequenceConfig, objective: Objective, features: Sequence[str], seed: int
) -> NeuralReference:
    """Shuffled epochs of ``batch_rows``, gradient values clipped at 3, early stopping on the
    validation loss after ``early_stop`` epochs without improvement (Qlib's loop for these models)."""
    fields, steps = sequence_layout(features)
    schedule = Schedule(cfg.batch_rows, cfg.max_epochs, None, cfg.early_stop, cfg.learning_rate,
                        cfg.adam_weight_decay, "epochs", grad_clip=3.0)  # fmt: skip
    return NeuralReference(
        seeded(lambda outputs: sequence_network(fields, steps, outputs, cfg)), schedule, objective, seed
    )
