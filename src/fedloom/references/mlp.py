"""Qlib's DNN reference (DNNModelPytorch): input dropout → [Linear → BatchNorm → LeakyReLU(0.1)]× →
dropout → Linear, trained on random mini-batches, validated every 20 steps, the learning rate halved
on a validation plateau. Trained federated, LayerNorm takes BatchNorm's place (``norm``)."""

from __future__ import annotations

import itertools
from typing import Literal

import torch
from torch import nn

from fedloom.references.base import Objective
from fedloom.references.config import MLPConfig
from fedloom.references.neural import NeuralReference, Schedule


def mlp(
    inputs: int, outputs: int, cfg: MLPConfig, generator: torch.Generator, federated: bool = False
) -> nn.Sequential:
    """Qlib's ``Net`` with Kaiming-normal (leaky ReLU, a = 0.1) linear weights; ``cfg.norm`` resolved
    for how it trains (`block_norm`)."""
    norm = nn.LayerNorm if block_norm(cfg, federated) == "layer" else nn.BatchNorm1d
    sizes, blocks = [inputs, *cfg.hidden_sizes], list[nn.Module]([nn.Dropout(cfg.dropout_rate)])
    for a, b in itertools.pairwise(sizes):
        blocks.append(nn.Sequential(nn.Linear(a, b), norm(b), nn.LeakyReLU(0.1)))
    net = nn.Sequential(*blocks, nn.Dropout(cfg.dropout_rate), nn.Linear(sizes[-1], outputs))
    for module in net.modules():
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(
                module.weight, a=0.1, mode="fan_in", nonlinearity="leaky_relu", generator=generator
            )
            nn.init.zeros_(module.bias)
    return net


def mlp_reference(cfg: MLPConfig, objective: Objective, seed: int, federated: bool = False) -> NeuralReference:
    schedule = Schedule(cfg.batch_rows, cfg.max_steps, cfg.eval_steps, cfg.early_stop_rounds, cfg.learning_rate,
                        cfg.adam_weight_decay, "replacement", halve_on_plateau=True)  # fmt: skip
    return NeuralReference(lambda i, o, g: mlp(i, o, cfg, g, federated), schedule, objective, seed)


def block_norm(cfg: MLPConfig, federated: bool) -> Literal["batch", "layer"]:
    """``auto``: Qlib's BatchNorm pooled or local; LayerNorm federated, where BatchNorm's running
    statistics would be client state that no federated rule here averages (Hsieh et al. 2020)."""
    if cfg.norm == "auto":
        return "layer" if federated else "batch"
    return cfg.norm
