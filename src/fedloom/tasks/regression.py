"""Return regression with a private linear head on the mean-pooled final hidden state (seed 000, eq. 5–7)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch import Tensor

from fedloom.metrics.cross_section import daily_ic, daily_rank_ic
from fedloom.metrics.regression import mean_absolute_error, mean_squared_error
from fedloom.tasks.ridge import Moments

HEAD_WEIGHT, HEAD_BIAS = "head.weight", "head.bias"


@dataclass(frozen=True)
class RegressionTask:
    """ŷ = wᵀh + b (eq. 6) on targets standardized with the client's own training mean and std.

    The standardization is private to the client, like the head; predictions are reported in the
    original units.
    """

    target_mean: float = 0.0
    target_std: float = 1.0
    primary_metric: ClassVar[str] = "ic"  # what validation selects the best round by (higher is better)

    @classmethod
    def fitted(cls, train_targets: np.ndarray) -> RegressionTask:
        std = float(np.std(train_targets))
        return cls(float(np.mean(train_targets)), std if std > 0 else 1.0)

    def init_head(self, hidden_size: int, generator: torch.Generator) -> dict[str, Tensor]:
        """``nn.Linear``'s default init: U(−1/√H, 1/√H) for weight and bias."""
        bound = 1.0 / hidden_size**0.5
        return {
            HEAD_WEIGHT: (torch.rand(1, hidden_size, generator=generator) * 2 - 1) * bound,
            HEAD_BIAS: (torch.rand(1, generator=generator) * 2 - 1) * bound,
        }

    def least_squares_targets(self, targets: Tensor) -> Tensor:
        """What a least-squares head regresses on: the standardized targets, [n, 1]."""
        return ((targets - self.target_mean) / self.target_std).reshape(-1, 1)

    def head_from(self, weight: Tensor, bias: Tensor) -> dict[str, Tensor]:
        """The head of a least-squares fit (W [1, H], b [1])."""
        return {HEAD_WEIGHT: weight.float().reshape(1, -1), HEAD_BIAS: bias.float().reshape(1)}

    def head_fit(self, x: Tensor, targets: Tensor) -> Callable[[float], dict[str, Tensor]]:
        """The penalized optimum of this task's loss on rows ``x`` [n, H] as a function of the penalty α: the
        closed-form ridge head on the standardized targets (`fedloom.tasks.ridge`; the rows' moments are summed
        once, whatever α is asked for)."""
        moments = Moments.of(x, self.least_squares_targets(targets))
        return lambda alpha: self.head_from(*moments.solve(alpha))

    def scores(self, head: Mapping[str, Tensor], features: Tensor) -> Tensor:
        """Standardized predictions [B] from pooled features [B, H] (eq. 6)."""
        return features @ head[HEAD_WEIGHT].reshape(-1) + head[HEAD_BIAS].reshape(())

    def loss(self, head: Mapping[str, Tensor], features: Tensor, targets: Tensor) -> Tensor:
        """Eq. 7: mean of ½ (wᵀh + b − y)² over the batch, y standardized."""
        y = (targets - self.target_mean) / self.target_std
        return 0.5 * (self.scores(head, features) - y).pow(2).mean()

    def predict(self, head: Mapping[str, Tensor], features: Tensor) -> Tensor:
        return self.scores(head, features) * self.target_std + self.target_mean

    def evaluate(self, predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> dict[str, float]:
        """MSE and MAE in return units; mean daily IC and RankIC across the client's instruments."""
        ic = daily_ic(predictions, targets, dates)
        rank_ic = daily_rank_ic(predictions, targets, dates)
        return {
            "mse": mean_squared_error(targets, predictions),
            "mae": mean_absolute_error(targets, predictions),
            "ic": float(ic.mean()) if len(ic) else float("nan"),
            "rank_ic": float(rank_ic.mean()) if len(rank_ic) else float("nan"),
        }
