"""Cross-sectional ranking (Qlib protocol, algorithms.md §4): regress the cross-sectionally normalized
label with the private head, judge by the daily correlation of the score with the raw label."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from fedloom.metrics.cross_section import ic_summary
from fedloom.tasks.regression import RegressionTask


@dataclass(frozen=True)
class RankingTask(RegressionTask):
    """Targets are already normalized per date, so no further standardization. Metrics: IC, ICIR,
    RankIC, RankICIR of the daily cross-section; a per-date affine normalization (z-score) leaves
    them equal to Qlib's, which correlates with the raw label."""

    primary_metric: ClassVar[str] = "rank_ic"

    def evaluate(self, predictions: np.ndarray, targets: np.ndarray, dates: np.ndarray) -> dict[str, float]:
        return ic_summary(predictions, targets, dates)
