"""Movement classification with a private linear classifier on the mean-pooled final hidden state
(the classification counterpart of seed 000, eq. 6: logits = W h + b, cross-entropy loss)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from fedloom.metrics.classification import accuracy_score, balanced_accuracy, matthews_corrcoef
from fedloom.tasks.logistic import logistic
from fedloom.tasks.regression import HEAD_BIAS, HEAD_WEIGHT


@dataclass(frozen=True)
class ClassificationTask:
    """``num_classes``-way classification; targets are class indices (0 = fall, 1 = rise for movement)."""

    num_classes: int = 2
    primary_metric: ClassVar[str] = "mcc"

    def init_head(self, hidden_size: int, generator: torch.Generator) -> dict[str, Tensor]:
        """``nn.Linear``'s default init: U(−1/√H, 1/√H)."""
        bound = 1.0 / hidden_size**0.5
        return {
            HEAD_WEIGHT: (torch.rand(self.num_classes, hidden_size, generator=generator) * 2 - 1) * bound,
            HEAD_BIAS: (torch.rand(self.num_classes, generator=generator) * 2 - 1) * bound,
        }

    def head_from(self, weight: Tensor, bias: Tensor) -> dict[str, Tensor]:
        """The head of a linear fit (W [C, H], b [C]) as logits."""
        return {HEAD_WEIGHT: weight.float().reshape(self.num_classes, -1), HEAD_BIAS: bias.float().reshape(-1)}

    def head_fit(self, x: Tensor, targets: Tensor) -> Callable[[float], dict[str, Tensor]]:
        """The penalized optimum of the cross-entropy on rows ``x`` [n, H] as a function of the penalty α: ridge
        logistic regression (`fedloom.tasks.logistic`), whose logits are calibrated log-odds."""
        return lambda alpha: self.head_from(*logistic(x, targets, alpha, self.num_classes))

    def logits(self, head: Mapping[str, Tensor], features: Tensor) -> Tensor:
        return features @ head[HEAD_WEIGHT].T + head[HEAD_BIAS]

    def loss(self, head: Mapping[str, Tensor], features: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of the logits against the class indices."""
        return F.cross_entropy(self.logits(head, features), targets.long())

    def predict(self, head: Mapping[str, Tensor], features: Tensor) -> Tensor:
        """Predicted class indices."""
        return self.logits(head, features).argmax(dim=1).float()

    def evaluate(self, predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> dict[str, float]:
        return {
            "accuracy": accuracy_score(targets, predictions),
            "mcc": matthews_corrcoef(targets, predictions, self.num_classes),
            "balanced_accuracy": balanced_accuracy(targets, predictions, self.num_classes),
        }
