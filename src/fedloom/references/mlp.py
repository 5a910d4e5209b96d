"""Qlib's DNN reference (DNNModelPytorch): input dropout → [Linear → BatchNorm → LeakyReLU(0.1)]× →
dropout → Linear, trained on random mini-batches, validated every 20 steps, the learning rate halved
on a validation plateau."""

from __future__ import annotations

import itertools

import torch
from torch import nn

from fedloom.references.base import Objective
from fedloom.references.config import MLPConfig
from fedloom.references.neural import NeuralReference, Schedule


def mlp(inputs: int, outputs: int, cfg: MLPConfig, generator: torch.Generator) -> nn.Sequential:
    """Qlib's ``Net`` with Kaiming-normal (leaky ReLU, a = 0.1) linear weights."""
    sizes, blocks = [inputs, *cfg.hidden_sizes], list[nn.Module]([nn.Dropout(cfg.dropout_rate)])
    for a, b in itertools.pairwise(sizes):
        blocks.append(nn.Sequential(nn.Linear(a, b), nn.BatchNorm1d(b), nn.LeakyReLU(0.1)))
    net = nn.Sequential(*blocks, nn.Dropout(cfg.dropout_rate), nn.Linear(sizes[-1], outputs))
    for module in net.modules():
        if isinstance(module, nn.Linear):
            nn.init.kaiming_normal_(
                module.weight, a=0.1, mode="fan_in", nonlinearity="leaky_relu", generator=generator
            )
            nn.init.zeros_(module.bias)
    return net


def mlp_reference(cfg: MLPConfig, objective: Objective, seed: int) -> NeuralReference:
    schedule = Schedule(cfg.batch_rows, cfg.max_steps, cfg.eval_steps, cfg.early_stop_rounds, cfg.learning_rate,
                        cfg.adam_weight_decay, "replacement", halve_on_plateau=True)  # fmt: skip
    return NeuralReference(lambda i, o, g: mlp(i, o, cfg, g), schedule, objective, seed)
