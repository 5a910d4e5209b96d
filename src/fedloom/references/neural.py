"""One training loop for every neural reference (Qlib's DNN and its sequence models): seeded
mini-batches (drawn with replacement, or shuffled epochs), Adam, validation every ``eval_steps``
steps, early stopping after ``patience`` validations without a lower loss; the best validated
weights predict. Regression targets are standardized by the training fold (scores come back in
target units); a class target uses cross-entropy."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import nn

from fedloom.references.base import Fold, Objective, class_index, filled

Network = Callable[[int, int, torch.Generator], nn.Module]  # (inputs, outputs, generator) → module


@dataclass(frozen=True)
class Schedule:
    """How a network trains (each reference maps its Qlib settings onto it)."""

    batch_rows: int
    length: int  # steps (sampling "replacement") or passes over the training rows (sampling "epochs")
    eval_steps: int | None  # validate every this many steps; None: after every pass
    patience: int  # validations without improvement before stopping
    learning_rate: float
    weight_decay: float = 0.0
    sampling: Literal["replacement", "epochs", "days"] = "replacement"  # days: one step = one day's stocks
    grad_clip: float | None = None  # clip every gradient value to ±grad_clip (Qlib's RNNs: 3.0)
    halve_on_plateau: bool = False  # halve the learning rate after 10 validations without improvement


def batches(
    n: int, schedule: Schedule, generator: torch.Generator, days: np.ndarray | None = None
) -> Iterator[tuple[torch.Tensor, bool]]:
    """Row indices of each step and whether it is the last: random draws with replacement, shuffled
    passes without, or (``days``) every row of one day per step, the days shuffled each pass."""
    if schedule.sampling == "replacement":
        size = min(schedule.batch_rows, n)
        for step in range(schedule.length):
            yield torch.randint(n, (size,), generator=generator), step + 1 == schedule.length
        return
    if schedule.sampling == "days":
        if days is None:
            raise ValueError("sampling by days needs each row's date")
        groups = [torch.from_numpy(rows) for rows in day_rows(days)]
        for epoch in range(schedule.length):
            days_order = torch.randperm(len(groups), generator=generator).tolist()
            for i, g in enumerate(days_order):
                yield groups[g], epoch + 1 == schedule.length and i + 1 == len(days_order)
        return
    size = min(schedule.batch_rows, n)
    for epoch in range(schedule.length):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, size):
            yield order[start : start + size], epoch + 1 == schedule.length and start + size >= n


def day_rows(days: np.ndarray) -> list[np.ndarray]:
    """Row indices of each distinct day, in date order."""
    _, inverse = np.unique(days, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(inverse[order])) + 1)


class NeuralReference:
    """A network from ``network`` trained by ``schedule`` on the training fold."""

    def __init__(self, network: Network, schedule: Schedule, objective: Objective, seed: int) -> None:
        self.network, self.schedule, self.objective, self.seed = network, schedule, objective, seed

    def _loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.objective.classes:
            return nn.functional.cross_entropy(out, y.long())
        return (out.squeeze(1) - y).pow(2).mean()

    def fit(self, train: Fold, valid: Fold) -> dict[str, float]:
        with torch.random.fork_rng():  # dropout draws from the global generator: seeded here, restored after
            torch.manual_seed(self.seed)
            return self._fit(train, valid)

    def _fit(self, train: Fold, valid: Fold) -> dict[str, float]:
        s, generator = self.schedule, torch.Generator().manual_seed(self.seed)
        x, xv = torch.from_numpy(filled(train.x)), torch.from_numpy(filled(valid.x))
        y, yv = torch.from_numpy(train.y.astype(np.float32)), torch.from_numpy(valid.y.astype(np.float32))
        self.mean, self.std = (0.0, 1.0) if self.objective.classes else (float(y.mean()), float(y.std()) or 1.0)
        y, yv = (y - self.mean) / self.std, (yv - self.mean) / self.std
        self.outputs = self.objective.num_classes if self.objective.classes else 1
        self.net = self.network(x.shape[1], self.outputs, generator)
        optimizer = torch.optim.Adam(self.net.parameters(), lr=s.learning_rate, weight_decay=s.weight_decay)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=10, min_lr=1e-5)
        passes = len(day_rows(train.days)) if s.sampling == "days" and train.days is not None else (
            -(-len(y) // min(s.batch_rows, len(y))))  # fmt: skip
        every = s.eval_steps or passes  # default: once per pass
        best, best_state, best_step, stale, step = np.inf, copy.deepcopy(self.net.state_dict()), 0, 0, 0
        for step, (rows, last) in enumerate(batches(len(y), s, generator, train.days)):
            self.net.train()
            optimizer.zero_grad()
            self._loss(self.net(x[rows]), y[rows]).backward()
            if s.grad_clip is not None:
                nn.utils.clip_grad_value_(self.net.parameters(), s.grad_clip)
            optimizer.step()
            if (step + 1) % every and not last:
                continue
            loss = float(self._loss(self._forward(xv, valid.days), yv))
            if s.halve_on_plateau:
                plateau.step(loss)
            if loss < best:
                best, best_state, best_step, stale = loss, copy.deepcopy(self.net.state_dict()), step + 1, 0
            else:
                stale += 1
                if stale >= s.patience:
                    break
        self.net.load_state_dict(best_state)
        return {"best_step": float(best_step), "steps": float(step + 1), "val_loss": best}

    def _forward(self, x: torch.Tensor, days: np.ndarray | None, chunk: int = 65536) -> torch.Tensor:
        """Evaluation-mode outputs: one day at a time for a cross-sectional network, else in chunks
        so that a large fold fits in memory."""
        self.net.eval()
        with torch.no_grad():
            if self.schedule.sampling != "days":
                return torch.cat([self.net(x[i : i + chunk]) for i in range(0, len(x), chunk)])
            if days is None:
                raise ValueError("a cross-sectional network scores one day's stocks at a time: it needs dates")
            out = torch.empty(len(x), self.outputs)
            for rows in day_rows(days):
                out[torch.from_numpy(rows)] = self.net(x[torch.from_numpy(rows)])
            return out

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        out = self._forward(torch.from_numpy(filled(x)), days)
        if self.objective.classes:
            return class_index(torch.softmax(out, dim=1).numpy())
        return out.squeeze(1).numpy() * self.std + self.mean
