"""Alpha158 and Alpha360 features (Qlib ``Alpha158DL`` / ``Alpha360DL``), vectorized over a wide panel.

Each bar field is a wide frame — rows are trading days, columns are instruments — so one pandas
rolling call computes a feature for every instrument at once::

    close       SH600000  SH600519
    2020-01-02  125.1     7334.9
    2020-01-03  126.0     7010.2

Operators follow Qlib's (``qlib/data/ops.py``): rolling windows use ``min_periods=1``, ``Std`` has
ddof = 1, ``Rank`` is the percentile of today within the window, ``IdxMax`` is the 1-based position of
the window's maximum, ``Slope`` / ``Rsquare`` / ``Resi`` regress on the position in the window, and
``Rsquare`` / ``Corr`` are NaN where an input's rolling std is ~0. Every feature at day t uses bars of
days ≤ t only. Suspended days must be NaN in every field (Qlib's convention).

Deviations: ``VWAP0`` (Alpha158) and the 60 ``VWAP*`` columns (Alpha360) are dropped — the bundle has
no vwap; Qlib's ``volume`` family is not part of its default Alpha158 (its window-0 feature is
identically 1), so volume enters through VMA, VSTD, WVMA, VSUM*, CORR and CORD as in Qlib; IdxMax/
IdxMin ignore NaN inside a window, where Qlib's ``argmax`` would point at the first NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar, cast

import numpy as np
import pandas as pd
from pandas.api.typing import Rolling

WINDOWS = (5, 10, 20, 30, 60)
EPS = 1e-12
ALPHA158_DROPPED = ("VWAP0",)
ALPHA360_FIELDS = ("CLOSE", "OPEN", "HIGH", "LOW", "VOLUME")  # VWAP dropped
# Qlib's 20-feature selection for its NN models (examples/benchmarks/LSTM/*Alpha158.yaml, FilterCol)
QLIB_NN_FEATURES = (
    "RESI5", "WVMA5", "RSQR5", "KLEN", "RSQR10", "CORR5", "CORD5", "CORR10", "ROC60", "RESI10",
    "VSTD5", "RSQR60", "CORR60", "WVMA60", "STD5", "RSQR20", "CORD60", "CORD10", "CORR20", "KLOW",
)  # fmt: skip
Feature = Callable[["Bars"], pd.DataFrame]
T = TypeVar("T")


@dataclass(frozen=True)
class Bars:
    """Wide OHLCV frames (days × instruments) with the intermediates several features share."""

    open: pd.DataFrame
    high: pd.DataFrame
    low: pd.DataFrame
    close: pd.DataFrame
    volume: pd.DataFrame
    memo: dict[tuple, object] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_long(cls, bars: pd.DataFrame) -> Bars:
        """From long rows ``date, instrument, open, high, low, close, volume``."""
        wide = bars.pivot(index="date", columns="instrument", values=["open", "high", "low", "close", "volume"])
        return cls(*(wide[f].astype(float) for f in ("open", "high", "low", "close", "volume")))

    def shared(self, key: tuple, compute: Callable[[], T]) -> T:
        """``compute()`` once per key: BETA/RSQR/RESI share one regression, IMAX/IMXD one argmax."""
        if key not in self.memo:
            self.memo[key] = compute()
        return cast(T, self.memo[key])  # stored by compute() under this key

    @cached_property
    def prev_close(self) -> pd.DataFrame:
        return self.close.shift(1)

    @cached_property
    def close_change(self) -> pd.DataFrame:
        return self.close - self.prev_close

    @cached_property
    def volume_change(self) -> pd.DataFrame:
        return self.volume - self.volume.shift(1)

    @cached_property
    def close_scaled(self) -> pd.DataFrame:
        """Close divided by each instrument's first close: same regressions, better conditioned sums."""
        return self.close / self.close.bfill().iloc[0]


def _roll(x: pd.DataFrame, d: int) -> Rolling:
    """Qlib's rolling window: up to ``d`` days, at least one value."""
    return x.rolling(d, min_periods=1)


def _flat(x: pd.DataFrame, d: int) -> pd.DataFrame:
    """Where Qlib treats a window as constant: rolling std within 2e-5 of zero."""
    return pd.DataFrame(np.isclose(_roll(x, d).std().to_numpy(), 0, atol=2e-5), index=x.index, columns=x.columns)


def rolling_regression(y: pd.DataFrame, d: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(slope, r², residual of the last point) of y on its position in each window of ``d`` days.

    Built from rolling sums of y, y², t·y, t and t² over non-NaN points (t = day index), which is
    exact because slope, r² and residuals do not change when the positions are shifted.
    """
    t = pd.DataFrame(np.arange(len(y), dtype=float)[:, None], index=y.index).reindex(columns=[0])
    mask = y.notna().astype(float)
    tm = mask.mul(t[0], axis=0)
    yv = y.fillna(0.0)
    n, sy, syy = _roll(mask, d).sum(), _roll(yv, d).sum(), _roll(yv * yv, d).sum()
    st, stt, sty = _roll(tm, d).sum(), _roll(tm.mul(t[0], axis=0), d).sum(), _roll(yv.mul(t[0], axis=0), d).sum()
    sxx, sxy, syy_c = n * stt - st * st, n * sty - st * sy, n * syy - sy * sy
    slope = sxy / sxx
    rsquare = sxy * sxy / (sxx * syy_c)
    fitted = slope.mul(t[0], axis=0) + (sy - slope * st) / n
    return slope, rsquare, y - fitted


def rolling_argext(x: pd.DataFrame, d: int, largest: bool, chunk: int = 64) -> pd.DataFrame:
    """1-based position of the max (or min) in each window of up to ``d`` days (Qlib ``IdxMax``)."""
    values = x.to_numpy(dtype=float)
    fill = -np.inf if largest else np.inf
    padded = np.vstack([np.full((d - 1, values.shape[1]), np.nan), values])
    out = np.full(values.shape, np.nan)
    lead = np.maximum(d - 1 - np.arange(len(values)), 0)  # padding rows inside each window
    for start in range(0, values.shape[1], chunk):
        win = np.lib.stride_tricks.sliding_window_view(padded[:, start : start + chunk], d, axis=0)
        empty = np.isnan(win).all(axis=-1)
        filled = np.where(np.isnan(win), fill, win)
        pos = (filled.argmax(axis=-1) if largest else filled.argmin(axis=-1)) + 1 - lead[:, None]
        out[:, start : start + chunk] = np.where(empty, np.nan, pos)
    return pd.DataFrame(out, index=x.index, columns=x.columns)


def _kbar() -> dict[str, Feature]:
    def rng(b: Bars) -> pd.DataFrame:
        return b.high - b.low + EPS

    def top(b: Bars) -> pd.DataFrame:
        return np.maximum(b.open, b.close)

    def bottom(b: Bars) -> pd.DataFrame:
        return np.minimum(b.open, b.close)

    return {
        "KMID": lambda b: (b.close - b.open) / b.open,
        "KLEN": lambda b: (b.high - b.low) / b.open,
        "KMID2": lambda b: (b.close - b.open) / rng(b),
        "KUP": lambda b: (b.high - top(b)) / b.open,
        "KUP2": lambda b: (b.high - top(b)) / rng(b),
        "KLOW": lambda b: (bottom(b) - b.low) / b.open,
        "KLOW2": lambda b: (bottom(b) - b.low) / rng(b),
        "KSFT": lambda b: (2 * b.close - b.high - b.low) / b.open,
        "KSFT2": lambda b: (2 * b.close - b.high - b.low) / rng(b),
    }


def _price() -> dict[str, Feature]:
    return {
        "OPEN0": lambda b: b.open / b.close,
        "HIGH0": lambda b: b.high / b.close,
        "LOW0": lambda b: b.low / b.close,
    }


def _move_sums(b: Bars, field: str, d: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Rolling sums of gains, losses and absolute moves of close or volume (SUM* / VSUM* share them)."""
    change = b.close_change if field == "close" else b.volume_change

    def compute() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        return (
            _roll(np.maximum(change, 0), d).sum(),
            _roll(np.maximum(-change, 0), d).sum(),
            _roll(change.abs(), d).sum(),
        )

    return b.shared(("sums", field, d), compute)


def _up_down(b: Bars, d: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Share of up days and of down days in the window (CNTP / CNTN / CNTD share them)."""

    def compute() -> tuple[pd.DataFrame, pd.DataFrame]:
        up, down = (b.close > b.prev_close).astype(float), (b.close < b.prev_close).astype(float)
        return _roll(up, d).mean(), _roll(down, d).mean()

    return b.shared(("updown", d), compute)


def _rolling_family(d: int) -> dict[str, Feature]:
    def ratio(b: Bars, field: str, kind: str) -> pd.DataFrame:
        pos, neg, total = _move_sums(b, field, d)
        return {"P": pos, "N": neg, "D": pos - neg}[kind] / (total + EPS)

    def corr(a: pd.DataFrame, c: pd.DataFrame) -> pd.DataFrame:
        out = _roll(a, d).corr(c, pairwise=False)
        return out.mask(_flat(a, d) | _flat(c, d))

    def wv(b: Bars) -> pd.DataFrame:
        return (b.close / b.prev_close - 1).abs() * b.volume

    def reg(b: Bars) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        return b.shared(("reg", d), lambda: rolling_regression(b.close_scaled, d))

    def imax(b: Bars) -> pd.DataFrame:
        return b.shared(("imax", d), lambda: rolling_argext(b.high, d, largest=True))

    def imin(b: Bars) -> pd.DataFrame:
        return b.shared(("imin", d), lambda: rolling_argext(b.low, d, largest=False))

    return {
        f"ROC{d}": lambda b: b.close.shift(d) / b.close,
        f"MA{d}": lambda b: _roll(b.close, d).mean() / b.close,
        f"STD{d}": lambda b: _roll(b.close, d).std() / b.close,
        f"BETA{d}": lambda b: reg(b)[0] / b.close_scaled,
        f"RSQR{d}": lambda b: reg(b)[1].mask(_flat(b.close, d)),
        f"RESI{d}": lambda b: reg(b)[2] / b.close_scaled,
        f"MAX{d}": lambda b: _roll(b.high, d).max() / b.close,
        f"MIN{d}": lambda b: _roll(b.low, d).min() / b.close,
        f"QTLU{d}": lambda b: _roll(b.close, d).quantile(0.8) / b.close,
        f"QTLD{d}": lambda b: _roll(b.close, d).quantile(0.2) / b.close,
        f"RANK{d}": lambda b: _roll(b.close, d).rank(pct=True),
        f"RSV{d}": lambda b: (
            (b.close - _roll(b.low, d).min()) / (_roll(b.high, d).max() - _roll(b.low, d).min() + EPS)
        ),
        f"IMAX{d}": lambda b: imax(b) / d,
        f"IMIN{d}": lambda b: imin(b) / d,
        f"IMXD{d}": lambda b: (imax(b) - imin(b)) / d,
        f"CORR{d}": lambda b: corr(b.close, np.log(b.volume + 1)),
        f"CORD{d}": lambda b: corr(b.close / b.prev_close, np.log(b.volume / b.volume.shift(1) + 1)),
        f"CNTP{d}": lambda b: _up_down(b, d)[0],
        f"CNTN{d}": lambda b: _up_down(b, d)[1],
        f"CNTD{d}": lambda b: _up_down(b, d)[0] - _up_down(b, d)[1],
        f"SUMP{d}": lambda b: ratio(b, "close", "P"),
        f"SUMN{d}": lambda b: ratio(b, "close", "N"),
        f"SUMD{d}": lambda b: ratio(b, "close", "D"),
        f"VMA{d}": lambda b: _roll(b.volume, d).mean() / (b.volume + EPS),
        f"VSTD{d}": lambda b: _roll(b.volume, d).std() / (b.volume + EPS),
        f"WVMA{d}": lambda b: _roll(wv(b), d).std() / (_roll(wv(b), d).mean() + EPS),
        f"VSUMP{d}": lambda b: ratio(b, "volume", "P"),
        f"VSUMN{d}": lambda b: ratio(b, "volume", "N"),
        f"VSUMD{d}": lambda b: ratio(b, "volume", "D"),
    }


def _alpha158() -> dict[str, Feature]:
    families = {d: _rolling_family(d) for d in WINDOWS}
    ops = [name.removesuffix(str(WINDOWS[0])) for name in families[WINDOWS[0]]]
    rolling = {f"{op}{d}": families[d][f"{op}{d}"] for op in ops for d in WINDOWS}
    return {**_kbar(), **_price(), **rolling}


def _alpha360() -> dict[str, Feature]:
    fields: dict[str, Callable[[Bars], pd.DataFrame]] = {
        "CLOSE": lambda b: b.close,
        "OPEN": lambda b: b.open,
        "HIGH": lambda b: b.high,
        "LOW": lambda b: b.low,
    }
    out: dict[str, Feature] = {}
    for name, get in fields.items():
        for i in range(59, -1, -1):
            out[f"{name}{i}"] = _lagged_price(get, i)
    for i in range(59, -1, -1):
        out[f"VOLUME{i}"] = _lagged_volume(i)
    return out


def _lagged_price(get: Feature, lag: int) -> Feature:
    """A price field ``lag`` days ago over today's close (Alpha360's CLOSE/OPEN/HIGH/LOW columns)."""
    return lambda b: get(b).shift(lag) / b.close


def _lagged_volume(lag: int) -> Feature:
    """Volume ``lag`` days ago over today's volume (Alpha360's VOLUME columns)."""
    return lambda b: b.volume.shift(lag) / (b.volume + EPS)


ALPHA158: dict[str, Feature] = _alpha158()
ALPHA360: dict[str, Feature] = _alpha360()
