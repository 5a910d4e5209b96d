"""CSI300 / CSI800 cross-sectional ranking on China A-share daily bars (the Qlib benchmark protocol).

One sample per (day t, index member i), point-in-time membership::

    date        instrument  group   text  RESI5  WVMA5 … KLOW  return    target
    2024-01-02  SH600000    Banks   ""    -0.41  1.22  … 0.03  0.0081    0.57

* label (Qlib): ``return`` = Ref($close,-2)/Ref($close,-1) - 1, the close-to-close return from t+1
  to t+2 (a prediction made after t's close trades at t+1's close); ``target`` = that label
  ranked across the day's members (``cs_rank``, Qlib's CSRankNorm, the default of its benchmark
  workflows) or z-scored (``cs_zscore``, CSZScoreNorm).
  IC and backtests use the raw ``return``, as Qlib does.
* covariates: Alpha158 (157 without vwap) or Alpha360 (300 without vwap), see `fedloom.data.alpha`;
  ``feature_set: compact`` keeps Qlib's 20 NN features (Alpha158) or the last 4 days (Alpha360).
* defaults: the Qlib benchmark protocol (every member, every feature, rank label), which the structured
  references (`fedloom.references`) are validated on; the LLM configs (``configs/csi300.yaml``) pin a
  CPU-sized view (50 names, 20 features, z-scored label).
  ``feature_norm: robust_zscore`` is Qlib's RobustZScoreNorm fitted on the training split (median,
  1.4826·MAD, clipped to ±3) followed by Fillna(0).
* MASTER / HIST inputs (off by default): ``step_len: 8`` adds every feature at lags 7 … 1 as ``NAME@k``
  (day t−k's value of the same stock, normalized with day t's statistics; Fillna 0 before the first
  bar); ``market: true`` appends MASTER's 63 market-status columns ``MKT_*`` (`fedloom.data.market`);
  ``concepts: true`` appends 0/1 ``CONCEPT_L1_*`` / ``CONCEPT_L2_*`` memberships (SW industries, HIST's
  stand-in for concept boards), not normalized.
* membership: ``sqlib`` intervals (exactly 300 / 800 members a day; ``fr220574`` misses some); a
  split past the source's last interval is refused. ``max_instruments`` keeps the names with the most
  member days in the training period (never chosen by the test period).
  Suspended days (volume 0 or NaN, flat OHLC) become NaN bars, so they yield no sample and no label;
  volume is adjusted as Qlib's ``$volume`` (raw shares / factor).
* groups: Shenwan level-1 industry (a July-2023 snapshot, not point-in-time; 22 instruments have
  none → "Unknown").
* split: train 2018–2022, val 2023, test 2024-01-01 … 2025-06-30. Bars start on 2018-01-02, so the
  first ``warmup_days`` trading days give no samples (their 60-day windows would be partial).

Caveats carried in ``notes``: the bars are survivorship-biased (15 delisted CSI300 members have no
bars), and CSI800 is restricted to instruments that were ever in CSI300 since 2018 (the only bars
bundled), about 300–380 of its 800 members a day.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data import alpha, market
from fedloom.data.alpha import ALPHA158, ALPHA360, ALPHA360_FIELDS, QLIB_NN_FEATURES, Bars
from fedloom.data.files import DATA_PATH, cached_frame, dataset_dir
from fedloom.data.reading import read_csv, refuse_duplicates
from fedloom.data.schema import SampleTable
from fedloom.data.splits import SplitDates
from fedloom.errors import DataError

FILES = ("csi300_daily.csv.gz", "index_daily.csv", "membership.csv.gz", "industry_sw2021.csv")
INDEXES = {"csi300": ("CSI300", "SH000300"), "csi800": ("CSI800", "SH000906")}
QLIB_CN_SPLIT = SplitDates(train_start="2018-01-01", val_start="2023-01-01", test_start="2024-01-01")
LIMIT_THRESHOLD = 0.095  # Qlib's cn exchange: a move of ±9.5 % or more blocks trading that day
MAD_SCALE, CLIP = 1.4826, 3.0
CONCEPT = "CONCEPT_"  # prefix of the 0/1 concept-membership columns (HIST)
# the cached table's identity includes the code that computes it (features, label, universe)
FEATURE_CODE = hashlib.sha256(
    b"".join(Path(m).read_bytes() for m in (alpha.__file__, market.__file__, __file__))
).hexdigest()[:16]


class QlibCnConfig(BaseModel):
    """CSI300 / CSI800 features, universe, normalization and split."""

    model_config = ConfigDict(extra="forbid")

    folder: Annotated[str, DATA_PATH] = Field("qlib_cn", description="folder under the data dir")
    features: Literal["alpha158", "alpha360"] = Field("alpha158", description="feature family")
    feature_set: Literal["compact", "all"] = Field(
        "all", description="all: 157 or 300 (Qlib's benchmark); compact: 20 (Qlib's NN list / last 4 days)"
    )
    membership: Literal["sqlib", "fr220574"] = Field("sqlib", description="point-in-time index membership source")
    max_instruments: int | None = Field(
        None,
        ge=2,
        description="keep the N instruments with the most training-period member days; null = every member",
    )
    warmup_days: int = Field(60, ge=0, description="first trading days of the bars that give no samples")
    feature_norm: Literal["robust_zscore", "none"] = Field("robust_zscore", description="feature processor")
    label_norm: Literal["cs_zscore", "cs_rank", "none"] = Field(
        "cs_rank", description="training target (cs_rank: CSRankNorm, as Qlib's benchmark workflows)"
    )
    split_dates: SplitDates = Field(QLIB_CN_SPLIT, description="train 2018–2022, val 2023, test 2024–")
    step_len: int = Field(
        1, ge=1, le=60, description="days of history per sample: >1 adds every feature at lags 1…step_len−1 as NAME@k"
    )
    market: bool = Field(False, description="append MASTER's 63 market-status features (fedloom.data.market)")
    concepts: bool = Field(
        False, description="append 0/1 CONCEPT_* columns: SW level-1 and level-2 industry membership (HIST's stand-in)"
    )
    cache: bool = Field(True, description="cache the built table under $FEDLOOM_CACHE/data")


def read_bars(folder: Path) -> pd.DataFrame:
    """Daily bars as stored: suspended days keep their flat OHLC (the last close)."""
    bars = read_csv(folder / "csi300_daily.csv.gz", required=("instrument",), dates=("date",),
                    numbers=("open", "high", "low", "close", "volume", "factor", "change"))  # fmt: skip
    refuse_duplicates(bars, ("instrument", "date"), folder / "csi300_daily.csv.gz")
    return bars


def suspended(bars: pd.DataFrame) -> pd.Series:
    """Days without trading: volume 0 or missing."""
    return ~(bars["volume"] > 0)


def load_bars(folder: Path) -> pd.DataFrame:
    """Daily bars as Qlib's ``$`` fields: suspended days NaN in every price and volume field, volume
    adjusted like the prices (raw shares / factor, Qlib's collectors' rule, so splits and bonus
    shares do not jump)."""
    bars = read_bars(folder)
    bars.loc[suspended(bars), ["open", "high", "low", "close", "volume"]] = np.nan
    bars["volume"] = bars["volume"] / bars["factor"]
    return bars


def membership_matrix(
    intervals: pd.DataFrame, dates: pd.DatetimeIndex, instruments: pd.Index, source: str
) -> pd.DataFrame:
    """(dates × instruments) True where the instrument is in the index on that day (start ≤ d ≤ end)."""
    rows = intervals[(intervals["source"] == source) & intervals["instrument"].isin(instruments)]
    out = np.zeros((len(dates), len(instruments)), dtype=bool)
    col = instruments.get_indexer(rows["instrument"])
    lo = dates.searchsorted(pd.to_datetime(rows["start"]), side="left")
    hi = dates.searchsorted(pd.to_datetime(rows["end"]), side="right")
    for c, a, b in zip(col, lo, hi, strict=True):
        out[a:b, c] = True
    return pd.DataFrame(out, index=dates, columns=instruments)


def check_membership_covers(intervals: pd.DataFrame, source: str, index: str, dates: pd.DatetimeIndex) -> None:
    """Refuse split dates past the last day the membership source knows: they would silently have no members."""
    rows = intervals[(intervals["source"] == source) & (intervals["index"] == index)]
    if rows.empty or len(dates) == 0:
        return
    last = pd.to_datetime(rows["end"]).max()
    if dates.max() > last:
        raise DataError(
            f"{index} membership from {source!r} ends on {last.date()}, but the split runs to {dates.max().date()}: "
            f"every day after {last.date()} would have no members; set data.qlib_cn.split_dates.test_end to "
            f"{last.date()} or earlier" + (", or membership=fr220574" if source == "sqlib" else "")
        )


def qlib_label(close: pd.DataFrame) -> pd.DataFrame:
    """Ref($close, -2) / Ref($close, -1) - 1 on a wide close frame."""
    return close.shift(-2) / close.shift(-1) - 1


def cross_sectional(values: pd.Series, dates: pd.Series, method: str) -> pd.Series:
    """Per-day z-score (ddof 1; 0 on a day with one member) or rank mapped to ``(pct - 0.5) * 3.46``
    (Qlib's CSZScoreNorm / CSRankNorm)."""
    g = values.groupby(dates)
    if method == "cs_zscore":
        out = (values - g.transform("mean")) / g.transform("std")
    elif method == "cs_rank":
        out = (g.rank(pct=True) - 0.5) * 3.46
    else:
        return values
    return out.fillna(0.0)


def robust_stats(x: np.ndarray, fit_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Qlib RobustZScoreNorm's fit: the median and 1.4826·MAD of each column over ``fit_rows``."""
    fit = x[fit_rows]
    median = np.nanmedian(fit, axis=0)
    return median, (np.nanmedian(np.abs(fit - median), axis=0) + 1e-12) * MAD_SCALE


def robust_apply(x: np.ndarray, median: np.ndarray, mad: np.ndarray) -> np.ndarray:
    """RobustZScoreNorm(clip_outlier) + Fillna: (x − median) / MAD clipped to ±3, missing values 0."""
    return np.nan_to_num(np.clip((x - median) / mad, -CLIP, CLIP), nan=0.0).astype(np.float32)


def robust_zscore(x: np.ndarray, fit_rows: np.ndarray) -> np.ndarray:
    """Qlib RobustZScoreNorm(clip_outlier) + Fillna fitted on ``fit_rows``."""
    return robust_apply(x, *robust_stats(x, fit_rows))


def base_features(cfg: QlibCnConfig) -> tuple[str, ...]:
    """The stock features of day t the config selects (before lags and market status)."""
    if cfg.features == "alpha158":
        return QLIB_NN_FEATURES if cfg.feature_set == "compact" else tuple(ALPHA158)
    if cfg.feature_set == "all":
        return tuple(ALPHA360)
    return tuple(f"{field}{lag}" for field in ALPHA360_FIELDS for lag in range(3, -1, -1))


def feature_names(cfg: QlibCnConfig) -> tuple[str, ...]:
    """The covariate columns: the features at lags step_len−1 … 1 (``NAME@k``, oldest first), then day t's,
    then the market status (MASTER's input layout: a [T, F] series per stock plus the day's market)."""
    base = base_features(cfg)
    lagged = tuple(f"{name}@{lag}" for lag in range(cfg.step_len - 1, 0, -1) for name in base)
    return lagged + base + (market.market_names() if cfg.market else ())


def build_qlib_table(
    bars: pd.DataFrame,
    intervals: pd.DataFrame,
    industry: pd.DataFrame,
    cfg: QlibCnConfig,
    index: str,
    index_daily: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The sample frame from in-memory inputs (pure, so tests can perturb bars); ``index_daily`` (long
    index bars) is read only for the market status."""
    if index not in INDEXES:
        raise DataError(f"unknown index {index!r}; expected one of {sorted(INDEXES)}")
    if index == "csi800" and cfg.membership != "sqlib":
        raise DataError("csi800 membership exists only in source 'sqlib'; set data.qlib_cn.membership=sqlib")
    wide = Bars.from_long(bars)
    dates, instruments = wide.close.index, wide.close.columns
    member = membership_matrix(intervals[intervals["index"] == INDEXES[index][0]], dates, instruments, cfg.membership)
    split = pd.Series(cfg.split_dates.label(dates), index=dates)
    check_membership_covers(intervals, cfg.membership, INDEXES[index][0], dates[split.to_numpy() != ""])
    active = (
        member.to_numpy() & (split.to_numpy() != "")[:, None] & (np.arange(len(dates)) >= cfg.warmup_days)[:, None]
    )
    if cfg.max_instruments is not None and cfg.max_instruments < len(instruments):
        # chosen by member days in the training period only: the test period must not pick the universe
        days = pd.Series((active & (split.to_numpy() == "train")[:, None]).sum(axis=0), index=instruments)
        keep = days.sort_values(ascending=False, kind="stable").index[: cfg.max_instruments].sort_values()
        wide = Bars.from_long(bars[bars["instrument"].isin(keep)])
        active = active[:, instruments.get_indexer(keep)]
        instruments = keep
    label = qlib_label(wide.close)
    active &= wide.close.notna().to_numpy() & label.notna().to_numpy()
    t, i = np.nonzero(active)
    if len(t) == 0:
        raise DataError(f"{index}: no member-day has bars and a label inside the split dates")
    names, base = feature_names(cfg), base_features(cfg)
    library = ALPHA158 if cfg.features == "alpha158" else ALPHA360
    day_split = split.to_numpy()[t]
    train_rows = np.flatnonzero(day_split == "train")
    x = np.empty((len(t), len(names)), dtype=np.float32)
    column = {name: k for k, name in enumerate(names)}
    for name in base:
        values = library[name](wide).to_numpy()
        values = np.where(np.isfinite(values), values, np.nan)  # a copy: feature frames may be shared
        x[:, column[name]] = values[t, i]
        stats = robust_stats(x[:, column[name]], train_rows) if cfg.feature_norm == "robust_zscore" else None
        for lag in range(cfg.step_len):  # a lag is day t−k's value, normalized as day t's (Qlib's TSDataSampler)
            k = column[name if lag == 0 else f"{name}@{lag}"]
            if lag:
                x[:, k] = np.where(t >= lag, values[np.maximum(t - lag, 0), i], np.nan)
            if stats is not None:
                x[:, k] = robust_apply(x[:, k], *stats)
    if cfg.market:
        if index_daily is None:
            raise DataError("data.qlib_cn.market needs the index bars (index_daily.csv)")
        status = market.market_status(index_daily, dates).to_numpy(np.float64)[t]
        status[~np.isfinite(status)] = np.nan
        first = column[market.market_names()[0]]
        x[:, first:] = robust_zscore(status, train_rows) if cfg.feature_norm == "robust_zscore" else status
    sector = dict(zip(industry["instrument"], industry["sw_l1_en"], strict=True))
    frame = pd.DataFrame({"date": dates[t], "instrument": instruments[i]})
    frame["group"] = frame["instrument"].map(sector).fillna("Unknown")
    frame["text"] = ""
    returns = pd.Series(label.to_numpy()[t, i])
    tail = pd.DataFrame({"return": returns, "target": cross_sectional(returns, frame["date"], cfg.label_norm)})
    tail["split"] = day_split
    parts = [frame, pd.DataFrame(x, columns=list(names))]
    if cfg.concepts:
        parts.append(concept_columns(frame["instrument"], industry))
    return pd.concat([*parts, tail], axis=1)


def concept_columns(instruments: pd.Series, industry: pd.DataFrame) -> pd.DataFrame:
    """Each row's concept memberships as 0/1 columns ``CONCEPT_L1_<code>`` / ``CONCEPT_L2_<code>``: the SW
    level-1 and level-2 industries of its stock (from the level-3 ``sw_code``). HIST reads Qlib's
    stock-to-concept matrix of market concept boards, which the bundle lacks; two industry levels
    stand in (every stock in exactly two concepts; a stock without an industry in none)."""
    code = dict(zip(industry["instrument"], industry["sw_code"].astype(str), strict=True))
    codes = instruments.map(code)
    columns = {}
    for level, digits in (("L1", 2), ("L2", 4)):
        prefix = codes.str[:digits]
        for value in sorted(prefix.dropna().unique()):
            columns[f"{CONCEPT}{level}_{value}"] = (prefix == value).to_numpy(np.float32)
    return pd.DataFrame(columns, index=instruments.index)


def load_qlib_cn(data_dir: Path | str | None, cfg: QlibCnConfig, index: str) -> SampleTable:
    """CSI300 or CSI800 from ``qlib_cn/`` (cached under ``$FEDLOOM_CACHE/data`` when ``cfg.cache``)."""
    folder = dataset_dir(data_dir, cfg.folder, FILES)

    def build() -> pd.DataFrame:
        intervals = read_csv(folder / "membership.csv.gz")
        industry = read_csv(folder / "industry_sw2021.csv")
        index_daily = read_csv(folder / "index_daily.csv", dates=("date",)) if cfg.market else None
        return build_qlib_table(load_bars(folder), intervals, industry, cfg, index, index_daily)

    sources = [folder / f for f in FILES]
    key = {"index": index, "code": FEATURE_CODE, **cfg.model_dump(mode="json", exclude={"cache"})}
    frame = cached_frame(f"qlib-{index}", sources, key, build) if cfg.cache else build()
    notes = [
        "bars are survivorship-biased: 15 delisted CSI300 members have none",
        "SW industry is a July-2023 snapshot, not point-in-time",
    ]
    if index == "csi800":
        notes.append("CSI800 covers only members that were in CSI300 at some time since 2018 (bundled bars)")
    if cfg.concepts:
        notes.append("concepts are SW level-1/2 industries (a July-2023 snapshot), not Qlib's concept boards")
    concepts = tuple(c for c in frame.columns if c.startswith(CONCEPT))
    return SampleTable(frame, feature_names(cfg) + concepts, index, task_kind="ranking", notes=tuple(notes))


def market_frame(data_dir: Path | str | None, folder: str = "qlib_cn") -> pd.DataFrame:
    """Long ``date, instrument, close, tradable, factor`` for `fedloom.metrics.portfolio.backtest`:
    untradable = suspended, or a close-to-close move of ±9.5 % or more (Qlib's limit rule with
    ``forbid_all_trade_at_limit``); a suspended day keeps its flat close (the last traded one)."""
    bars = read_bars(dataset_dir(data_dir, folder, FILES)).sort_values(["instrument", "date"], kind="stable")
    change = bars.groupby("instrument")["close"].pct_change(fill_method=None)
    tradable = ~suspended(bars) & ~(change.abs() >= LIMIT_THRESHOLD)
    return pd.DataFrame(
        {
            "date": bars["date"],
            "instrument": bars["instrument"],
            "close": bars["close"],
            "tradable": tradable,
            "factor": bars["factor"],
        }
    )


def benchmark_close(data_dir: Path | str | None, code: str = "SH000300", folder: str = "qlib_cn") -> pd.Series:
    """Daily close of an index in ``index_daily.csv`` (SH000300, SH000905, SH000906, SH000001)."""
    frame = read_csv(dataset_dir(data_dir, folder, FILES) / "index_daily.csv", dates=("date",))
    rows = frame[frame["instrument"] == code]
    if rows.empty:
        raise DataError(f"index_daily.csv has no rows for {code!r}; it has {sorted(frame['instrument'].unique())}")
    return rows.set_index("date")["close"].sort_index()
