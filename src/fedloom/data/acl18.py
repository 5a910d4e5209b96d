"""ACL18 / StockNet (Xu & Cohen 2018): tweets + prices → next-day movement of 87 US stocks, 9 sectors.

One sample per (ticker, target trading day t) inside StockNet's split (by t: train 2014-01-01 …
2015-07-31, val … 2015-09-30, test … 2015-12-31)::

    date (p = t-1)  target_date (t)  instrument  group       text               c_open … adj_sum_30  return    target
    2015-10-01      2015-10-02       AAPL        Technology  "$ aapl beats …"   -0.41  … 1.92        0.0170    1

* movement (StockNet ``DataPipe``): mv = adj_close(t)/adj_close(t-1) - 1, rounded to 6 decimals as in
  StockNet's preprocessed files; fall (0) if mv < -0.5 %, rise (1) if mv >= 0.55 %, in-between
  dropped. With ``target: return`` every day is kept and ``target`` = mv.
* a sample needs price history before t - (lag_days - 1) days beyond the first row (StockNet's
  window check); with the defaults this gives exactly the paper's 26,614 movement samples.
* covariates: the 11 Adv-ALSTM features of day p in percent (GLT's ``features.csv``, recomputed
  from ``prices.csv``; windows shorter than their length at the start of a history use what exists);
  with ``feature_window`` T > 1, those of the T days up to p (``c_open_4 … c_open_0``, …).
* text: tweets of the ``lag_days`` trading days up to p. Each tweet counts from its ``created_at``
  (UTC) against the 16:00 New York close, so the ~7 % filed under the next day and the 37 tweets of
  2014-11-09/10 filed under 2014-11-14 land where they were posted; ``tweet_time: file_date`` uses
  StockNet's file day instead. Retweets (same text, same day) are kept once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.files import DATA_PATH, dataset_dir
from fedloom.data.glt import GLT_FEATURES
from fedloom.data.posts import assign_rows, session_days, utc_to_market, window_texts
from fedloom.data.reading import read_csv, read_jsonl, refuse_duplicates
from fedloom.data.schema import SampleTable
from fedloom.data.splits import SplitDates
from fedloom.data.windows import lagged_features
from fedloom.errors import DataError

FILES = ("prices.csv", "tweets.jsonl", "sectors.csv")
FALL_BELOW, RISE_FROM = -0.005, 0.0055
STOCKNET_SPLIT = SplitDates(
    train_start="2014-01-01", val_start="2015-08-01", test_start="2015-10-01", test_end="2015-12-31"
)
SECTOR_SPELLING = {"Basic Matierials": "Basic Materials"}  # the source's typo, fixed in client ids


class Acl18Config(BaseModel):
    """ACL18 / StockNet inputs, label and split."""

    model_config = ConfigDict(extra="forbid")

    folder: Annotated[str, DATA_PATH] = Field("acl18", description="folder under the data dir")
    target: Literal["movement", "return"] = Field("movement", description="class 0/1 (fall/rise) or the return")
    lag_days: int = Field(5, ge=1, description="trading days of tweets before the target day (StockNet: 5)")
    max_tweets_per_day: int = Field(30, ge=1, description="latest tweets kept per ticker-day (StockNet: 30)")
    tweet_time: Literal["created_at", "file_date"] = Field(
        "created_at", description="place tweets by timestamp vs the 16:00 ET close, or by StockNet's file day"
    )
    split_dates: SplitDates = Field(STOCKNET_SPLIT, description="standard split by target day")
    feature_window: int = Field(
        1,
        ge=1,
        le=60,
        description="days of the 11 price features per sample, oldest first (1: day p only; "
        "Adv-ALSTM: 5-20); the sequence references (lstm, transformer, ...) read them as a [T, 11] series",
    )


PRICE_COLUMNS = ("open", "high", "low", "close", "adj_close", "volume")


def load_acl18(data_dir: Path | str | None, cfg: Acl18Config) -> SampleTable:
    """Read ``acl18/`` and build the sample table."""
    folder = dataset_dir(data_dir, cfg.folder, FILES)
    prices = read_csv(folder / "prices.csv", required=("ticker",), dates=("date",), numbers=PRICE_COLUMNS)
    refuse_duplicates(prices, ("ticker", "date"), folder / "prices.csv")
    tweets = read_jsonl(folder / "tweets.jsonl", dtype={"ticker": str, "date": str, "text": str})
    sectors = read_csv(folder / "sectors.csv", required=("ticker", "sector"))
    refuse_duplicates(sectors, ("ticker",), folder / "sectors.csv")
    return build_acl18(prices, tweets, sectors, cfg)


def adv_alstm_features(prices: pd.DataFrame) -> pd.DataFrame:
    """The 11 Adv-ALSTM features in percent, per ticker, from OHLC and adjusted close of days ≤ t.

    c_open = 100 (open/close - 1) (also high, low); n_close = 100 (close_t/close_{t-1} - 1) (also
    adj_close); adj_sum_k = 100 (mean(adj_close_{t-k+1..t}) / adj_close_t - 1).
    """
    p = prices.sort_values(["ticker", "date"], kind="stable")
    g = p.groupby("ticker", sort=False)
    out = pd.DataFrame(index=p.index)
    for col in ("open", "high", "low"):
        out[f"c_{col}"] = 100 * (p[col] / p["close"] - 1)
    out["n_close"] = 100 * (p["close"] / g["close"].shift(1) - 1)
    out["n_adj_close"] = 100 * (p["adj_close"] / g["adj_close"].shift(1) - 1)
    for k in (5, 10, 15, 20, 25, 30):
        mean = g["adj_close"].rolling(k, min_periods=1).mean().reset_index(level=0, drop=True)
        out[f"adj_sum_{k}"] = 100 * (mean / p["adj_close"] - 1)
    return out[list(GLT_FEATURES)].reindex(prices.index)


def build_acl18(prices: pd.DataFrame, tweets: pd.DataFrame, sectors: pd.DataFrame, cfg: Acl18Config) -> SampleTable:
    """The sample table from in-memory frames (pure, so tests can perturb the inputs)."""
    rows = prices.sort_values(["ticker", "date"], kind="stable").reset_index(drop=True)
    rows = rows.assign(date=pd.to_datetime(rows["date"])).rename(columns={"ticker": "instrument"})
    rows[list(GLT_FEATURES)] = adv_alstm_features(rows.rename(columns={"instrument": "ticker"})).fillna(0.0)
    g = rows.groupby("instrument", sort=False)
    rows["row"] = g.cumcount()
    mv = (rows["adj_close"] / g["adj_close"].shift(1) - 1).round(6)
    second_day = g["date"].transform(lambda d: d.iloc[1] if len(d) > 1 else pd.NaT)

    prev = g["date"].shift(1)
    samples = pd.DataFrame({"instrument": rows["instrument"], "date": prev, "target_date": rows["date"]})
    samples["row"] = rows["row"] - 1
    window = lagged_features(rows, GLT_FEATURES, cfg.feature_window)
    features = list(window.columns)
    samples[features] = window
    samples["return"] = mv
    samples["split"] = cfg.split_dates.label(samples["target_date"])
    window_ok = second_day < samples["target_date"] - pd.Timedelta(days=cfg.lag_days - 1)
    keep = samples["date"].notna() & mv.notna() & (samples["split"] != "") & window_ok
    if cfg.target == "movement":
        keep &= (mv < FALL_BELOW) | (mv >= RISE_FROM)
    samples = samples[keep].reset_index(drop=True)

    posts = tweets.rename(columns={"ticker": "instrument"})
    if cfg.tweet_time == "created_at":
        local = utc_to_market(posts["created_at"])
        posts = posts.assign(day=session_days(local), time=local)
    else:
        posts = posts.assign(day=pd.to_datetime(posts["date"]).to_numpy(dtype="datetime64[D]"), time=posts.index)
    posts["row"] = assign_rows(posts, rows)
    samples["text"] = window_texts(posts, samples, cfg.lag_days, cfg.max_tweets_per_day, dedupe=True)
    sector = dict(zip(sectors["ticker"], sectors["sector"].replace(SECTOR_SPELLING), strict=True))
    unknown = sorted(set(samples["instrument"]) - set(sector))
    if unknown:  # a sectors.csv cut short would otherwise fold its missing tickers into one client
        raise DataError(f"sectors.csv has no sector for tickers {unknown[:5]} ({len(unknown)} in all); "
                        "restore the file, or give every ticker of prices.csv a row")  # fmt: skip
    samples["group"] = samples["instrument"].map(sector)
    samples["target"] = (
        (samples["return"] >= RISE_FROM).astype(np.int64) if cfg.target == "movement" else samples["return"]
    )
    columns = ["date", "target_date", "instrument", "group", "text", *features, "return", "target", "split"]
    movement = cfg.target == "movement"
    silent = int((samples["text"].str.strip() == "").sum())
    notes = (
        f"{silent} of {len(samples)} samples have no tweet in their {cfg.lag_days}-day window (the paper's sample "
        "set; StockNet's released code also needs a tweet on every day of the window and keeps far fewer)",
        "the 87 stocks were chosen when the dataset was built (StockNet, 2018: the largest per sector), so the "
        "universe is survivorship-biased; tweets exist only for 2014-2015",
    )
    return SampleTable(
        samples[columns],
        tuple(features),
        "acl18",
        task_kind="classification" if movement else "regression",
        num_classes=2 if movement else None,
        default_partition="sector",
        notes=notes,
    )
