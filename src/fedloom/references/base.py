"""What every reference model is: fitted on a training fold, early-stopped on a validation fold,
then asked for scores (a regression or ranking target) or class indices (a classification target)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from fedloom.progress import Progress


@dataclass(frozen=True)
class Fold:
    """Rows of numeric features ``x`` [n, d] (NaN allowed), their targets ``y`` [n] and, for models
    that look across a day's stocks, each row's date ``days`` [n]."""

    x: np.ndarray
    y: np.ndarray
    days: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Objective:
    """What the target is: a real number (returns, normalized ranking labels) or a class index."""

    kind: Literal["regression", "classification"]
    num_classes: int = 2

    @property
    def classes(self) -> bool:
        return self.kind == "classification"


class Reference(Protocol):
    """A structured model behind one protocol, whatever its library."""

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        """Train on ``train``, stop early on ``valid``; returns what the fit chose (e.g. ``best_iteration``).
        ``progress`` hears of each validation pass (the neural references; OLS and the boosting
        libraries report nothing)."""
        ...

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        """Scores [n] (regression) or class indices [n] (classification); ``days`` as in `Fold`."""
        ...


def filled(x: np.ndarray) -> np.ndarray:
    """Missing features as 0 (Qlib's Fillna), for the models that cannot take NaN."""
    return np.nan_to_num(x.astype(np.float32, copy=False), nan=0.0, posinf=0.0, neginf=0.0)


def class_index(probabilities: np.ndarray) -> np.ndarray:
    """Class indices from [n] positive-class or [n, K] class probabilities."""
    if probabilities.ndim == 1:
        return (probabilities > 0.5).astype(np.float32)
    return probabilities.argmax(axis=1).astype(np.float32)
