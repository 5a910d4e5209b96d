"""Linear references: least squares or ridge on the features (Qlib's LinearModel); logistic regression
for a class target."""

from __future__ import annotations

import numpy as np

from fedloom.progress import Progress
from fedloom.references.base import Fold, Objective, filled
from fedloom.references.config import LinearConfig


class LinearReference:
    """min_w |y − Xw|² (+ alpha·|w|² for ridge), without an intercept by default, as Qlib fits it."""

    def __init__(self, cfg: LinearConfig, objective: Objective, seed: int) -> None:
        self.cfg, self.objective, self.seed = cfg, objective, seed

    def fit(self, train: Fold, valid: Fold, progress: Progress | None = None) -> dict[str, float]:
        from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge

        x = filled(train.x)
        if self.objective.classes:
            c = 1.0 / self.cfg.alpha if self.cfg.estimator == "ridge" and self.cfg.alpha > 0 else np.inf
            self.model = LogisticRegression(C=c, fit_intercept=True, max_iter=1000, random_state=self.seed)
        elif self.cfg.estimator == "ridge":
            self.model = Ridge(alpha=self.cfg.alpha, fit_intercept=self.cfg.fit_intercept)
        else:
            self.model = LinearRegression(fit_intercept=self.cfg.fit_intercept)
        self.model.fit(x, train.y)
        return {}

    def predict(self, x: np.ndarray, days: np.ndarray | None = None) -> np.ndarray:
        return np.asarray(self.model.predict(filled(x)), dtype=np.float32)
