"""Alpha158 / Alpha360 against a slow, independent per-instrument computation of Qlib's definitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedloom.data.alpha import ALPHA158, ALPHA158_DROPPED, ALPHA360, QLIB_NN_FEATURES, Bars, rolling_argext

DAYS, WINDOW = 90, 20


@pytest.fixture(scope="module")
def bars() -> pd.DataFrame:
    """Three random-walk instruments; one starts late, one is suspended (NaN) for three days."""
    rng = np.random.default_rng(0)
    dates = pd.bdate_range("2021-01-04", periods=DAYS)
    rows = []
    for k, name in enumerate(["AAA", "BBB", "CCC"]):
        close = 50 * np.exp(np.cumsum(rng.normal(0, 0.02, DAYS))) * (k + 1)
        open_ = close * np.exp(rng.normal(0, 0.01, DAYS))
        high = np.maximum(open_, close) * (1 + rng.uniform(0, 0.02, DAYS))
        low = np.minimum(open_, close) * (1 - rng.uniform(0, 0.02, DAYS))
        volume = rng.uniform(1e5, 1e6, DAYS)
        frame = pd.DataFrame(
            {
                "date": dates,
                "instrument": name,
                "open": open_,
                "high": high,
                "low": low,
                "close": close,
                "volume": volume,
            }
        )
        if name == "BBB":
            frame.loc[40:42, ["open", "high", "low", "close", "volume"]] = np.nan
        if name == "CCC":
            frame = frame.iloc[25:]
        rows.append(frame)
    return pd.concat(rows, ignore_index=True)


def _series(bars: pd.DataFrame, name: str, field: str) -> pd.Series:
    s = bars[bars["instrument"] == name].set_index("date")[field]
    return s.reindex(pd.bdate_range("2021-01-04", periods=DAYS))


def _window_apply(s: pd.Series, d: int, fn) -> pd.Series:
    """Explicit loop: fn over the non-NaN values of each window of up to d days (min 1 value)."""
    out = []
    values = s.to_numpy()
    for t in range(len(values)):
        w = values[max(0, t - d + 1) : t + 1]
        out.append(fn(w) if np.isfinite(w).any() else np.nan)
    return pd.Series(out, index=s.index)


def _linregress(w: np.ndarray, part: str) -> float:
    x = np.arange(len(w), dtype=float)
    ok = np.isfinite(w)
    if ok.sum() < 2:
        return np.nan
    res = stats.linregress(x[ok], w[ok])
    if part == "slope":
        return res.slope
    if part == "rsquare":
        return res.rvalue**2
    return w[-1] - (res.intercept + res.slope * x[-1])


def reference(bars: pd.DataFrame, name: str, feature: str) -> pd.Series:
    """One Alpha158 feature for one instrument, written from the Qlib expression with scipy / loops."""
    c, o, h, lo, v = (_series(bars, name, f) for f in ("close", "open", "high", "low", "volume"))
    if feature == "KMID":
        return (c - o) / o
    if feature == "KLOW2":
        return (np.minimum(o, c) - lo) / (h - lo + 1e-12)
    op, d = feature.rstrip("0123456789"), int(feature.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    if op == "ROC":
        return c.shift(d) / c
    if op == "STD":
        return _window_apply(c, d, lambda w: np.nanstd(w, ddof=1) if np.isfinite(w).sum() > 1 else np.nan) / c
    if op == "BETA":
        return _window_apply(c, d, lambda w: _linregress(w, "slope")) / c
    if op == "RSQR":
        return _window_apply(c, d, lambda w: _linregress(w, "rsquare"))
    if op == "RESI":
        return _window_apply(c, d, lambda w: _linregress(w, "resi")) / c
    if op == "QTLU":
        return _window_apply(c, d, lambda w: np.nanquantile(w, 0.8)) / c
    if op == "RANK":
        return _window_apply(
            c, d, lambda w: stats.percentileofscore(w[np.isfinite(w)], w[-1]) / 100 if np.isfinite(w[-1]) else np.nan
        )
    if op == "IMAX":
        return _window_apply(h, d, lambda w: (np.nanargmax(w) + 1) / d)
    if op == "CORR":
        lv = np.log(v + 1)
        return pd.Series(
            [
                _corr(c.to_numpy()[max(0, t - d + 1) : t + 1], lv.to_numpy()[max(0, t - d + 1) : t + 1])
                for t in range(len(c))
            ],
            index=c.index,
        )
    if op == "SUMP":
        diff = c - c.shift(1)
        up = _window_apply(np.maximum(diff, 0), d, np.nansum)
        total = _window_apply(diff.abs(), d, np.nansum)
        return up / (total + 1e-12)
    if op == "WVMA":
        wv = (c / c.shift(1) - 1).abs() * v
        std = _window_apply(wv, d, lambda w: np.nanstd(w, ddof=1) if np.isfinite(w).sum() > 1 else np.nan)
        return std / (_window_apply(wv, d, np.nanmean) + 1e-12)
    if op == "CNTD":
        return _window_apply((c > c.shift(1)).astype(float) - (c < c.shift(1)).astype(float), d, np.nanmean)
    raise KeyError(feature)


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2 or np.std(a[ok]) < 2e-5 or np.std(b[ok]) < 2e-5:
        return np.nan
    return float(stats.pearsonr(a[ok], b[ok]).statistic)


@pytest.mark.parametrize(
    "feature",
    [
        "KMID",
        "KLOW2",
        "ROC20",
        "STD20",
        "BETA20",
        "RSQR20",
        "RESI20",
        "QTLU20",
        "RANK20",
        "IMAX20",
        "CORR20",
        "SUMP20",
        "WVMA20",
        "CNTD20",
        "BETA5",
        "RESI60",
    ],
)
def test_feature_matches_reference(bars, feature):
    got = ALPHA158[feature](Bars.from_long(bars))
    for name in ("AAA", "BBB", "CCC"):
        want = reference(bars, name, feature)
        have = got[name]
        both = want.notna() & have.notna()
        assert (want.notna() == have.notna()).mean() > 0.95, f"{feature} {name}: NaN pattern differs"
        np.testing.assert_allclose(have[both], want[both], rtol=1e-6, atol=1e-9, err_msg=f"{feature} {name}")


def test_families_and_dropped_vwap():
    assert len(ALPHA158) == 157 and "VWAP0" in ALPHA158_DROPPED and "VWAP0" not in ALPHA158
    assert list(ALPHA158)[:9] == ["KMID", "KLEN", "KMID2", "KUP", "KUP2", "KLOW", "KLOW2", "KSFT", "KSFT2"]
    assert {"ROC60", "MA5", "CORD30", "VSUMD60", "IMXD10"} <= set(ALPHA158)
    assert set(QLIB_NN_FEATURES) <= set(ALPHA158)
    assert len(ALPHA360) == 300 and not any(n.startswith("VWAP") for n in ALPHA360)


def test_alpha360_is_normalized_history(bars):
    f = Bars.from_long(bars)
    c = _series(bars, "AAA", "close")
    np.testing.assert_allclose(ALPHA360["CLOSE0"](f)["AAA"], 1.0)
    np.testing.assert_allclose(ALPHA360["CLOSE5"](f)["AAA"].iloc[10:], (c.shift(5) / c).iloc[10:])


def test_argext_partial_window_positions():
    x = pd.DataFrame({"a": [3.0, 1.0, 2.0, np.nan, 0.5]})
    # windows of up to 3 days: [3], [3,1], [3,1,2], [1,2,nan], [2,nan,0.5]
    assert rolling_argext(x, 3, largest=True)["a"].tolist() == [1, 1, 1, 2, 1]
    assert rolling_argext(x, 3, largest=False)["a"].tolist() == [1, 2, 2, 1, 3]
