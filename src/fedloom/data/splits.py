"""Chronological splits: every training date precedes every validation date precedes every test date."""

from __future__ import annotations

import numpy as np

from fedloom.errors import DataError


def chronological_split(dates: np.ndarray, fractions: tuple[float, float, float]) -> dict[str, np.ndarray]:
    """Split row indices by *unique dates* in order, so no date appears in two splits.

    >>> d = np.array(["2022-01-03", "2022-01-03", "2022-01-04", "2022-01-05"], dtype="datetime64[D]")
    >>> {k: v.tolist() for k, v in chronological_split(d, (0.34, 0.33, 0.33)).items()}
    {'train': [0, 1], 'val': [2], 'test': [3]}
    """
    if len(fractions) != 3 or any(f <= 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {fractions}")
    unique = np.unique(dates)
    if len(unique) < 3:
        raise DataError(f"a chronological split needs at least 3 distinct dates, got {len(unique)}")
    n_train = max(1, round(fractions[0] * len(unique)))
    n_val = max(1, round(fractions[1] * len(unique)))
    n_train = min(n_train, len(unique) - 2)
    n_val = min(n_val, len(unique) - n_train - 1)
    val_start, test_start = unique[n_train], unique[n_train + n_val]
    return {
        "train": np.flatnonzero(dates < val_start),
        "val": np.flatnonzero((dates >= val_start) & (dates < test_start)),
        "test": np.flatnonzero(dates >= test_start),
    }
