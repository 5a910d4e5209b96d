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

from fedloom.metrics.cross_section import daily_ic
from fedloom.progress import Progress, SilentProgress
from fedloom.references.base import Fold, Objective, class_index, filled

Network = Callable[[int, int, torch.Generator], nn.Module]  # (inputs, outputs, generator) → module


def seeded(build: Callable[[int], nn.Module]) -> Network:
    """A `Network` from ``build(outputs)`` whose module initializers, which draw from torch's global
    generator, are seeded from the fit's generator instead (the global stream is left as it was)."""

    def network(inputs: int, outputs: int, generator: torch.Generator) -> nn.Module:
        with torch.random.fork_rng():
            torch.manual_seed(int(torch.randint(2**31 - 1, (1,), generator=generator)))
            return build(outputs)

    return network


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
    day_zscore: bool = False  # targets z-scored within each day (MASTER's CSZScoreNorm of the label)
    trim: float = 0.0  # per day step: leave out this fraction of the highest and of the lowest targets
    train_loss_stop: float | None = None  # stop after a pass whose mean training loss is ≤ this; keep the last weights
    stop_on: Literal["loss", "ic"] = "loss"  # what early stopping watches: validation loss, or mean daily IC (HIST)


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


def valid_days(fold: Fold) -> np.ndarray:
    """The fold's dates, which early stopping on the daily IC needs."""
    if fold.days is None:
        raise ValueError("early stopping on the daily IC needs each validation row's date")
    return fold.days


def trimmed(rows: torch.Tensor, y: torch.Tensor, fraction: float) -> torch.Tensor:
    """``rows`` without the ⌊fraction·n⌋ highest and lowest targets (MASTER's drop_extreme; all kept when
    that is 0)."""
    k = int(fraction * len(rows))
    return rows if k == 0 else rows[torch.argsort(y[rows])[k:-k]]


def zscored(v: torch.Tensor) -> torch.Tensor:
    """``v`` minus its mean over its std (ddof 1; all 0 for one value or no spread)."""
    return (v - v.mean()) / v.std() if len(v) > 1 and float(v.std()) > 0 else torch.zeros_like(v)


def day_zscored(y: torch.Tensor, days: np.ndarray) -> torch.Tensor:
    """Each day's targets `zscored` (the cross-sectional z-score of `fedloom.data.qlib_cn`, on tensors)."""
    out = torch.zeros_like(y)
    for rows in day_rows(days):
        out[torch.from_numpy(rows)] = zscored(y[torch.from_numpy(rows)])
    return out


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

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        with torch.random.fork_rng():  # dropout draws from the global generator: seeded here, restored after
            torch.manual_seed(self.seed)
            return self._fit(train, valid, progress or SilentProgress())

    def _fit(self, train: Fold, valid: Fold, progress: Progress) -> dict[str, float]:
        s, generator = self.schedule, torch.Generator().manual_seed(self.seed)
        x, xv = torch.from_numpy(filled(train.x)), torch.from_numpy(filled(valid.x))
        y, yv = torch.from_numpy(train.y.astype(np.float32)), torch.from_numpy(valid.y.astype(np.float32))
        if s.day_zscore and not self.objective.classes:
            if train.days is None or valid.days is None:
                raise ValueError("z-scoring targets within days needs each row's date")
            y, yv = day_zscored(y, train.days), day_zscored(yv, valid.days)
        self.mean, self.std = (0.0, 1.0) if self.objective.classes else (float(y.mean()), float(y.std()) or 1.0)
        y, yv = (y - self.mean) / self.std, (yv - self.mean) / self.std
        self.outputs = self.objective.num_classes if self.objective.classes else 1
        self.net = self.network(x.shape[1], self.outputs, generator)
        optimizer = torch.optim.Adam(self.net.parameters(), lr=s.learning_rate, weight_decay=s.weight_decay)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=10, min_lr=1e-5)
        passes = len(day_rows(train.days)) if s.sampling == "days" and train.days is not None else (
            -(-len(y) // min(s.batch_rows, len(y))))  # fmt: skip
        every = s.eval_steps or passes  # default: once per pass
        checks = -(-(s.length * (passes if s.sampling != "replacement" else 1)) // every)  # validations at most
        advance, checked = progress.task(f"training: checks ({checks} at most)", checks), 0
        best, best_loss, best_step, stale, step = -np.inf, np.inf, 0, 0, 0
        best_state = copy.deepcopy(self.net.state_dict())
        train_losses: list[float] = []
        epoch_loss = float("nan")
        for step, (rows, last) in enumerate(batches(len(y), s, generator, train.days)):
            self.net.train()
            optimizer.zero_grad()
            rows, target = self._step_rows(rows, y)
            step_loss = self._loss(self.net(x[rows]), target)
            step_loss.backward()
            train_losses.append(float(step_loss.detach()))
            if s.grad_clip is not None:
                nn.utils.clip_grad_value_(self.net.parameters(), s.grad_clip)
            optimizer.step()
            if (step + 1) % every and not last:
                continue
            advance(1)
            checked += 1
            if s.train_loss_stop is not None:  # MASTER: no validation-based choice, a training-loss target
                epoch_loss, train_losses = float(np.mean(train_losses)), []
                if epoch_loss <= s.train_loss_stop:
                    break
                continue
            out = self._forward(xv, valid.days)
            loss = float(self._loss(out, yv))
            if s.halve_on_plateau:
                plateau.step(loss)
            score = (
                -loss
                if s.stop_on == "loss"
                else float(daily_ic(out[:, 0].numpy(), yv.numpy(), valid_days(valid)).mean())
            )
            if score > best:
                best, best_loss, best_step, stale = score, loss, step + 1, 0
                best_state = copy.deepcopy(self.net.state_dict())
            else:
                stale += 1
                if stale >= s.patience:
                    break
        advance(checks - checked)  # an early stop closes the task
        if s.train_loss_stop is not None:
            val = float(self._loss(self._forward(xv, valid.days), yv))
            return {"best_step": float(step + 1), "steps": float(step + 1), "val_loss": val, "train_loss": epoch_loss}
        self.net.load_state_dict(best_state)
        ic = {"val_ic": best} if s.stop_on == "ic" else {}
        return {"best_step": float(best_step), "steps": float(step + 1), "val_loss": best_loss, **ic}

    def _step_rows(self, rows: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A step's rows and targets: as drawn, or (MASTER, one day per step) without the day's extreme
        targets and the rest z-scored."""
        s = self.schedule
        if self.objective.classes or s.sampling != "days":
            return rows, y[rows]
        rows = trimmed(rows, y, s.trim) if s.trim else rows
        return rows, zscored(y[rows]) if s.day_zscore else y[rows]

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
