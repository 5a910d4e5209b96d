"""A sample's numeric features over the days before it, for the models that read a series (Adv-ALSTM's
T-day window; Qlib's sequence references — LSTM, GRU, ALSTM, TCN, Transformer — over Alpha360)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def window_names(features: Sequence[str], steps: int) -> list[str]:
    """``f_{steps-1} … f_0`` per feature, field by field, oldest first (Alpha360's layout, which
    `fedloom.references.sequence.sequence_layout` reads back as [T, F]).

    >>> window_names(["c_open", "adj_sum_5"], 2)
    ['c_open_1', 'c_open_0', 'adj_sum_5_1', 'adj_sum_5_0']
    """
    return [f"{f}_{k}" for f, k in _layout(features, steps)]


def _layout(features: Sequence[str], steps: int) -> list[tuple[str, int]]:
    """(feature, lag) in column order: field by field, lags descending."""
    return [(f, k) for f in features for k in range(steps - 1, -1, -1)]


def feature_window(rows: pd.DataFrame, features: Sequence[str], steps: int, by: str = "instrument") -> pd.DataFrame:
    """For every row of ``rows`` (sorted by date within ``by``), ``features`` of the ``steps`` rows before
    it: column ``f_k`` holds ``f`` of the row ``k + 1`` back, so ``f_0`` is the previous row — the day a
    sample predicts from. NaN where a ticker's history is shorter; the index is ``rows``'."""
    g = rows.groupby(by, sort=False)[list(features)]
    back = {k: g.shift(k + 1) for k in range(steps)}
    return pd.DataFrame({f"{f}_{k}": back[k][f] for f, k in _layout(features, steps)}, index=rows.index)


def lagged_features(rows: pd.DataFrame, features: Sequence[str], steps: int, by: str = "instrument") -> pd.DataFrame:
    """The features a sample of each row reads: with ``steps`` 1 the previous row's ``features`` under their
    own names (every config before windows existed), else `feature_window`'s ``steps`` days with the days
    before a ticker's history at 0 (the features are percent moves: no move)."""
    window = feature_window(rows, features, steps, by)
    return window.set_axis(list(features), axis=1) if steps == 1 else window.fillna(0.0)
