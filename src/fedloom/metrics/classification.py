"""Movement and label classification: accuracy, balanced accuracy and Matthews correlation (higher is better)."""

from __future__ import annotations

import numpy as np


def accuracy_score(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Share of exact matches. ``accuracy_score([0, 1, 1], [0, 1, 0]) == 2/3``."""
    a, b = _pair(y_true, y_pred)
    return float(np.mean(a == b))


def confusion_matrix(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int) -> np.ndarray:
    """``C[i, j]`` = rows of true class i predicted as j (classes are 0 … num_classes-1)."""
    a, b = _pair(y_true, y_pred)
    if a.min() < 0 or b.min() < 0 or max(a.max(), b.max()) >= num_classes:
        raise ValueError(f"class indices must lie in [0, {num_classes}), got {sorted(set(a) | set(b))}")
    return np.bincount(a * num_classes + b, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def balanced_accuracy(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int = 2) -> float:
    """Mean recall over the classes present in ``y_true`` (scikit-learn's ``balanced_accuracy_score``): a
    constant guess scores 1 / (classes present) whatever the base rate, where plain accuracy scores the
    majority's share (issue 43: ACL18's 0.52 accuracy was its base rate).
    ``balanced_accuracy([0, 0, 0, 1], [0, 0, 0, 0]) == 0.5``."""
    cm = confusion_matrix(y_true, y_pred, num_classes).astype(np.float64)
    support = cm.sum(axis=1)
    present = support > 0
    return float(np.mean(np.diag(cm)[present] / support[present]))


def matthews_corrcoef(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int = 2) -> float:
    """MCC (Gorodkin's multi-class form; the phi coefficient for two classes), 0 when undefined.

    ``(c·s - Σ_k p_k t_k) / sqrt((s² - Σ p_k²)(s² - Σ t_k²))`` with c correct, s samples, p_k predicted
    and t_k true counts. ``matthews_corrcoef([0, 0, 1, 1], [0, 1, 1, 1]) == 1/sqrt(3)``.
    """
    cm = confusion_matrix(y_true, y_pred, num_classes).astype(np.float64)
    t, p, c, s = cm.sum(axis=1), cm.sum(axis=0), np.trace(cm), cm.sum()
    denom = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - p @ t) / denom) if denom > 0 else 0.0


def _pair(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(y_true), np.asarray(y_pred)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"y_true and y_pred must be non-empty 1-D arrays of one shape, got {a.shape} and {b.shape}")
    return a.astype(np.int64), b.astype(np.int64)
