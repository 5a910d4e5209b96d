"""Point-forecast errors. ``_error`` names: lower is better."""

from __future__ import annotations

import numpy as np


def mean_squared_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean of (y − ŷ)². ``mean_squared_error([0, 1], [0, 3]) == 2.0``."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean((y_true - y_pred) ** 2))


def mean_absolute_error(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean of |y − ŷ|. ``mean_absolute_error([0, 1], [0, 3]) == 1.0``."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(np.abs(y_true - y_pred)))


def _pair(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"y_true and y_pred must be non-empty 1-D arrays of one shape, got {a.shape} and {b.shape}")
    return a, b
