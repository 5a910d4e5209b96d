"""FNSPID (Dong et al. 2024) sample: daily prices of 51 tickers + news text → next-day return.

One sample per (ticker, trading day p) with a next trading day::

    date        instrument  group  text                                   ret1     ret5 …  sentiment_prev  target
    2021-05-27  AA          AA     "Alcoa prices notes …\\nAluminum …"   0.0123   …       3.42            -0.0071

* target: adj_close(next row) / adj_close(p) - 1.
* covariates, from rows ≤ p only: ret1, ret5, ret20 (adjusted-close returns over 1/5/20 rows), vol20
  (std of daily returns, 20 rows), hl_range ((high - low)/close), volume_z (log-volume z-score over 20
  rows) and sentiment_prev: FNSPID's ``sentiment_gpt`` of the *previous* row. FNSPID dated news by a
  "UTC" time 5 h (EST) / 4 h (EDT) too early and merged it into that day's row, so row p's score can
  include news published after p's close; the previous row's score cannot (it covers news up to
  about 05:00 New York time on p).
* text (only where ``news.jsonl`` has articles — AA, and AAPL outside its price range): headline and
  text of the articles published since the previous close, placed by the corrected time (AAPL: the
  published string; AA: FNSPID time + 5 h, exact for EST and one hour late — i.e. conservatively
  later — under daylight saving). Rows without news have empty text.
* no standard split: the registry splits by date fractions (``data.split``) unless ``split_dates`` is
  set. No sector metadata is bundled, so ``group`` is the ticker and clients come from a Dirichlet
  partition over tickers (seed 000, alpha 0.3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from fedloom.data.files import DATA_PATH, dataset_dir
from fedloom.data.posts import assign_rows, session_days, window_texts
from fedloom.data.reading import read_csv, read_jsonl, refuse_duplicates
from fedloom.data.schema import SampleTable
from fedloom.data.splits import SplitDates

FILES = ("prices_sentiment.csv.gz", "news.jsonl")
WHAT_IT_IS = (
    "FNSPID here is prices + GPT news sentiment of 51 tickers: news text exists only for AA (2016-2024) in this "
    "sample (AAPL's articles fall outside its price range); the other tickers' prompts carry price covariates only"
)  # said by `fedloom data info`, `fedloom data list` and every table of FNSPID runs (issue 43)
COVARIATES = ("ret1", "ret5", "ret20", "vol20", "hl_range", "volume_z", "sentiment_prev")
FNSPID_TO_LOCAL = pd.Timedelta(hours=5)


class FnspidConfig(BaseModel):
    """FNSPID sample: which tickers, how much news text, which split."""

    model_config = ConfigDict(extra="forbid")

    folder: Annotated[str, DATA_PATH] = Field("fnspid", description="folder under the data dir")
    tickers: list[str] | None = Field(None, description="tickers to keep; null = all 51")
    max_news_per_day: int = Field(5, ge=1, description="latest articles kept per ticker-day")
    article_chars: int = Field(600, ge=50, description="characters kept from the start of each article")
    split_dates: SplitDates | None = Field(None, description="fixed date split; null = data.split fractions")


def load_fnspid(data_dir: Path | str | None, cfg: FnspidConfig) -> SampleTable:
    """Read ``fnspid/`` and build the sample table."""
    folder = dataset_dir(data_dir, cfg.folder, FILES)
    prices = read_csv(folder / "prices_sentiment.csv.gz", required=("ticker", "close", "adj_close"), dates=("date",),
                      numbers=("open", "high", "low", "close", "adj_close", "volume"))  # fmt: skip
    refuse_duplicates(prices, ("ticker", "date"), folder / "prices_sentiment.csv.gz")
    news = read_jsonl(folder / "news.jsonl", dtype={"date": str, "date_fnspid_utc": str})
    return build_fnspid(prices, news, cfg)


def price_covariates(rows: pd.DataFrame) -> pd.DataFrame:
    """The covariates of each row from that ticker's rows up to it (``rows`` sorted by ticker, date)."""
    g = rows.groupby("ticker", sort=False)
    ret = g["adj_close"].pct_change(fill_method=None)
    out = pd.DataFrame(index=rows.index)
    out["ret1"] = ret
    for k in (5, 20):
        out[f"ret{k}"] = rows["adj_close"] / g["adj_close"].shift(k) - 1
    out["vol20"] = ret.groupby(rows["ticker"]).rolling(20, min_periods=2).std().reset_index(level=0, drop=True)
    out["hl_range"] = (rows["high"] - rows["low"]) / rows["close"]
    logv = np.log1p(rows["volume"].clip(lower=0))
    roll = logv.groupby(rows["ticker"]).rolling(20, min_periods=2)
    mean, std = (roll.mean().reset_index(level=0, drop=True), roll.std().reset_index(level=0, drop=True))
    out["volume_z"] = (logv - mean) / std.where(std > 0)
    out["sentiment_prev"] = g["sentiment_gpt"].shift(1)
    return out.fillna({"sentiment_prev": 3.0}).fillna(0.0)


def news_local_time(news: pd.DataFrame) -> pd.Series:
    """Publication time in New York local time (naive): the published string where kept, else
    FNSPID's shifted timestamp + 5 h."""
    fnspid = pd.to_datetime(news["date_fnspid_utc"]) + FNSPID_TO_LOCAL
    raw = news["published_raw"].fillna("").str.replace(r"\s+E[SD]T$", "", regex=True)
    published = pd.to_datetime(raw.str.replace(" — ", " ", regex=False), format="%B %d, %Y %I:%M %p", errors="coerce")
    return published.fillna(fnspid)


def build_fnspid(prices: pd.DataFrame, news: pd.DataFrame, cfg: FnspidConfig) -> SampleTable:
    """The sample table from in-memory frames (pure, so tests can perturb the inputs)."""
    if cfg.tickers is not None:
        prices = prices[prices["ticker"].isin(cfg.tickers)]
        news = news[news["ticker"].isin(cfg.tickers)]
    rows = prices.sort_values(["ticker", "date"], kind="stable").reset_index(drop=True)
    rows = rows.assign(date=pd.to_datetime(rows["date"]))
    covariates = price_covariates(rows)
    nxt = rows.groupby("ticker", sort=False)["adj_close"].shift(-1)
    samples = pd.DataFrame({"instrument": rows["ticker"], "date": rows["date"]})
    samples["row"] = rows.groupby("ticker", sort=False).cumcount()
    samples[list(COVARIATES)] = covariates[list(COVARIATES)]
    samples["return"] = nxt / rows["adj_close"] - 1
    samples["target"] = samples["return"]

    local = news_local_time(news)
    body = news["headline"].fillna("") + ". " + news["text"].fillna("").str.slice(0, cfg.article_chars)
    posts = pd.DataFrame({"instrument": news["ticker"], "day": session_days(local), "time": local, "text": body})
    posts["row"] = assign_rows(posts, samples)
    samples["text"] = window_texts(posts, samples, lag=1, max_per_row=cfg.max_news_per_day, dedupe=True)
    samples = samples[samples["return"].notna()].reset_index(drop=True)
    samples["group"] = samples["instrument"]
    columns = ["date", "instrument", "group", "text", *COVARIATES, "return", "target"]
    if cfg.split_dates is not None:
        samples["split"] = cfg.split_dates.label(samples["date"])
        samples = samples[samples["split"] != ""].reset_index(drop=True)
        columns.append("split")
    return SampleTable(
        samples[columns],
        COVARIATES,
        "fnspid",
        default_partition="dirichlet",
        notes=(WHAT_IT_IS,),
    )
