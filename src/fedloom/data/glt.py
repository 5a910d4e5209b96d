"""Stock-movement sets in the GLT / Adv-ALSTM format: BigData22, and any folder laid out the same way.

``prices.csv``: one row per (ticker, trading day) with 11 technical features in percent and a label::

    ticker  date        c_open  c_high  c_low  n_close  n_adj_close  adj_sum_5 … adj_sum_30  label
    BA      2020-10-30  1.2     2.2     -0.6   -0.1     -0.1         -1.4      … -2.6        1

``label`` is +1 if ``n_adj_close >= 0.55``, -1 if ``<= -0.5``, else 0 — the move from t-1 to t, so
row t's own features contain it. A sample predicts row t's label (0 = fall, 1 = rise; rows labelled 0
are dropped) from the features of the previous row p and the posts of the ``lag_days`` rows up to p
(``tweets.jsonl[.gz]``: ``ticker, date, text``; no timestamps, so a post counts from its file day).
Rows whose numeric columns hold the placeholder -123321 (GLT's marker for "no price history") are
dropped before anything else. The standard split is by the target day t (GLT ``get_date_info``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.files import DATA_PATH, dataset_dir
from fedloom.data.posts import assign_rows, window_texts
from fedloom.data.reading import read_csv, read_jsonl, refuse_duplicates
from fedloom.data.schema import Partition, SampleTable
from fedloom.data.splits import SplitDates
from fedloom.data.windows import lagged_features
from fedloom.errors import DataError

GLT_FEATURES = (
    "c_open", "c_high", "c_low", "n_close", "n_adj_close",
    "adj_sum_5", "adj_sum_10", "adj_sum_15", "adj_sum_20", "adj_sum_25", "adj_sum_30",
)  # fmt: skip
PLACEHOLDER = -123321.0
BIGDATA22_SPLIT = SplitDates(
    train_start="2019-07-05", val_start="2020-03-02", test_start="2020-05-01", test_end="2020-07-02"
)


class GltConfig(BaseModel):
    """A GLT-format movement set (default: BigData22 with GLT's split)."""

    model_config = ConfigDict(extra="forbid")

    folder: Annotated[str, DATA_PATH] = Field("bigdata22", description="folder under the data dir")
    prices_file: Annotated[str, DATA_PATH] = Field(
        "prices.csv", description="feature + label table (ticker, date, 11 features, label)"
    )
    tweets_file: Annotated[str, DATA_PATH] = Field(
        "tweets.jsonl.gz", description="posts (ticker, date, text) as JSON lines"
    )
    sectors_file: Annotated[str | None, DATA_PATH] = Field(
        None, description="optional ticker,sector CSV; groups = tickers without one"
    )
    split_dates: SplitDates = Field(BIGDATA22_SPLIT, description="standard split by target day")
    target: Literal["movement", "return"] = Field("movement", description="class 0/1, or the t-1→t return")
    lag_days: int = Field(5, ge=1, description="trading days of posts before the target day")
    max_tweets_per_day: int = Field(30, ge=1, description="latest posts kept per ticker-day (StockNet's cap)")
    feature_window: int = Field(
        1,
        ge=1,
        le=60,
        description="days of the 11 price features per sample, oldest first (1: day p only; "
        "Adv-ALSTM: 5-20); the sequence references (lstm, transformer, ...) read them as a [T, 11] series",
    )


def load_glt(data_dir: Path | str | None, cfg: GltConfig, name: str = "bigdata22") -> SampleTable:
    """Read a GLT-format folder and build its sample table."""
    files = [cfg.prices_file, cfg.tweets_file] + ([cfg.sectors_file] if cfg.sectors_file else [])
    folder = dataset_dir(data_dir, cfg.folder, files)
    prices = read_csv(folder / cfg.prices_file, required=("ticker", *GLT_FEATURES, "label"), dates=("date",))
    refuse_duplicates(prices, ("ticker", "date"), folder / cfg.prices_file)
    tweets = read_jsonl(folder / cfg.tweets_file, dtype={"ticker": str, "text": str, "date": str})
    sectors = read_csv(folder / cfg.sectors_file, required=("ticker", "sector")) if cfg.sectors_file else None
    return build_glt(prices, tweets, sectors, cfg, name, source=folder / cfg.prices_file)


def build_glt(
    prices: pd.DataFrame,
    tweets: pd.DataFrame,
    sectors: pd.DataFrame | None,
    cfg: GltConfig,
    name: str,
    source: Path | str = "prices",
) -> SampleTable:
    """The sample table from in-memory frames (pure, so tests can perturb the inputs)."""
    missing = [c for c in ("ticker", "date", *GLT_FEATURES, "label") if c not in prices.columns]
    if missing:
        raise DataError(
            f"{source}: missing columns {missing}; GLT format needs ticker, date, {', '.join(GLT_FEATURES)}, label"
        )
    rows = prices.rename(columns={"ticker": "instrument"}).assign(date=lambda f: pd.to_datetime(f["date"]))
    placeholder = (rows[[*GLT_FEATURES, "label"]] == PLACEHOLDER).any(axis=1)
    rows = rows[~placeholder].sort_values(["instrument", "date"], kind="stable").reset_index(drop=True)
    rows["row"] = rows.groupby("instrument").cumcount()
    bad = ~rows["label"].isin([-1, 0, 1])
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"{source}: column 'label' must be -1, 0 or 1; row {row} has {rows['label'].iloc[row]}")

    prev = rows.groupby("instrument")["date"].shift(1)
    samples = pd.DataFrame(
        {"instrument": rows["instrument"], "date": prev, "target_date": rows["date"], "row": rows["row"] - 1}
    )
    window = lagged_features(rows, GLT_FEATURES, cfg.feature_window)
    features = list(window.columns)
    samples[features] = window
    samples["return"] = rows["n_adj_close"] / 100.0
    samples["label"] = rows["label"]
    samples["split"] = cfg.split_dates.label(samples["target_date"])
    _refuse_disjoint_split(samples["target_date"], cfg.split_dates, source)
    keep = samples["date"].notna() & (samples["split"] != "")
    if cfg.target == "movement":
        keep &= samples["label"] != 0
    samples = samples[keep].reset_index(drop=True)

    posts = tweets.rename(columns={"ticker": "instrument"})
    posts = posts.assign(day=pd.to_datetime(posts["date"]).to_numpy(dtype="datetime64[D]"), time=posts.index)
    posts["row"] = assign_rows(posts, rows)
    samples["text"] = window_texts(posts, samples, cfg.lag_days, cfg.max_tweets_per_day, dedupe=True)
    samples["group"], partition = _groups(samples["instrument"], sectors, source)
    samples["target"] = (samples["label"] > 0).astype(np.int64) if cfg.target == "movement" else samples["return"]
    columns = ["date", "target_date", "instrument", "group", "text", *features, "return", "target", "split"]
    return SampleTable(
        samples[columns],
        tuple(features),
        name,
        task_kind="classification" if cfg.target == "movement" else "regression",
        num_classes=2 if cfg.target == "movement" else None,
        default_partition=partition,
        notes=("posts carry only a file day: a post filed on day p may be after p's close",),
    )


def _refuse_disjoint_split(days: pd.Series, split: SplitDates, source: Path | str) -> None:
    """A folder whose target days all miss the configured split is named with its own span."""
    if len(days) and not split.label(days).astype(bool).any():
        first, last = (pd.Timestamp(d).date() for d in (days.min(), days.max()))
        end = split.test_end or "the end"
        raise DataError(
            f"{source}: its target days run {first} to {last}, outside the configured split "
            f"({split.train_start} to {end}); set data.bigdata22.split_dates.train_start, val_start, "
            "test_start and test_end to dates inside that span"
        )


def _groups(instruments: pd.Series, sectors: pd.DataFrame | None, source: Path | str) -> tuple[pd.Series, Partition]:
    if sectors is None:
        return instruments, "dirichlet"
    mapping = dict(zip(sectors["ticker"], sectors["sector"], strict=True))
    unknown = sorted(set(instruments) - set(mapping))
    if unknown:
        raise DataError(f"{source}: the sectors file has no row for tickers {unknown[:5]} ({len(unknown)} in all)")
    return instruments.map(mapping), "sector"
