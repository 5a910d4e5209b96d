"""The frozen-feature probe (issue 42, beyond the seed): ridge regression on a row's covariates, on the frozen
LLM's pooled state of its prompt, or on both: the floor an LLM row must clear (a linear model on the same
inputs) and the ceiling of what the frozen model already knows.

Pooled and local it is an ordinary reference. Federated it is exact in one round: each client sends the
moments of its training and validation rows (`fedloom.tasks.ridge.Moments`: sums, so SecAgg+ would pass
them through unchanged), the server adds them, picks α on the summed validation moments and solves; the
fit equals the pooled one. A class target is fitted to one-hot columns and predicts the largest.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from fedloom.progress import Progress
from fedloom.references.base import Fold, Objective, filled
from fedloom.tasks.ridge import Moments, moments_path


class RidgeProbe:
    """Ridge with an intercept on standardized inputs, α on validation (`fedloom.tasks.ridge.moments_path`)."""

    def __init__(self, objective: Objective) -> None:
        self.objective = objective

    def moments(self, fold: Fold) -> Moments:
        """What one party sends for ``fold``: the sums of its rows."""
        return Moments.of(torch.from_numpy(filled(fold.x)), self._targets(fold.y))

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        return self.fit_moments([self.moments(train)], [self.moments(valid)] if len(valid) else [])

    def fit_moments(self, train: Sequence[Moments], valid: Sequence[Moments]) -> dict[str, float]:
        """Solve from the parties' summed moments (one party: the pooled or a local fit)."""
        total_valid = _sum(valid) if valid else None
        self.weight, self.bias, alpha = moments_path(_sum(train), total_valid)
        return {"alpha": alpha, "uploaded_numbers": float(train[0].numel * (1 + bool(valid)))}

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        out = torch.from_numpy(filled(x)).double() @ self.weight.T + self.bias
        if self.objective.classes:
            return out.argmax(1).numpy().astype(np.float32)
        return out[:, 0].numpy().astype(np.float32)

    def _targets(self, y: np.ndarray) -> Tensor:
        t = torch.as_tensor(y, dtype=torch.float64)
        if self.objective.classes:
            return torch.nn.functional.one_hot(t.long(), self.objective.num_classes).double()
        return t[:, None]


def _sum(parts: Sequence[Moments]) -> Moments:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total
