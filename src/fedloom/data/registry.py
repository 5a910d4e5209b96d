"""Dataset names → loaders. Each loader turns a `DataConfig` into a validated `Table`.

Real financial tables leave `load_dataset` with a ``split`` column (their standard split, or the
chronological ``data.split`` fractions) and, when ``data.max_dates_per_split`` is set, with that many
evenly spaced dates in the train and val splits (the test split keeps every date unless
``data.max_test_dates`` is set). The synthetic market and text tables are returned as loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import pandas as pd

from fedloom.data import acl18, fnspid, qlib_cn
from fedloom.data.acl18 import load_acl18
from fedloom.data.config import DataConfig
from fedloom.data.fnspid import load_fnspid
from fedloom.data.generic import load_generic
from fedloom.data.glt import load_glt
from fedloom.data.instructions import load_arc, load_coedit, load_gsm8k, load_jfleg, load_multitask, load_tweeteval
from fedloom.data.qlib_cn import load_qlib_cn
from fedloom.data.schema import SampleTable, Table
from fedloom.data.splits import thin_dates, with_split_column
from fedloom.data.synthetic import make_synthetic_market
from fedloom.errors import ConfigError


@dataclass(frozen=True)
class Market:
    """What a portfolio backtest of an index dataset reads: every instrument's daily bars (Qlib's fields)
    and the benchmark index's daily close."""

    bars: Callable[[], pd.DataFrame]
    benchmark: Callable[[], pd.Series]


@dataclass(frozen=True)
class Dataset:
    """A dataset name's loader and what ``fedloom data list`` says about it; an index dataset also
    carries its market, so a run can trade its predictions against the index (`dataset_market`), and a
    dataset whose name promises more than the bundled files hold carries a ``caveat`` every table of it
    prints."""

    load: Callable[[DataConfig], Table]
    kind: str
    summary: str
    folders: Callable[[DataConfig], dict[str, tuple[str, ...]]]
    market: Callable[[DataConfig], Market] | None = None
    caveat: str = ""


def _split_and_capped(load: Callable[[DataConfig], SampleTable]) -> Callable[[DataConfig], SampleTable]:
    """``load`` of a real financial table, whose table gets a ``split`` column and the date cap."""

    def load_split(c: DataConfig) -> SampleTable:
        table = load(c)
        frame = with_split_column(table, c.split)
        if c.max_dates_per_split is not None or c.max_test_dates is not None or c.max_val_dates not in (None, "all"):
            frame = thin_dates(frame, c.max_dates_per_split, c.max_test_dates, c.max_val_dates)
        return replace(table, frame=frame)

    return load_split


def _glt_files(c: DataConfig) -> dict[str, tuple[str, ...]]:
    g = c.bigdata22
    return {g.folder: (g.prices_file, g.tweets_file) + ((g.sectors_file,) if g.sectors_file else ())}


def _index(code: str) -> Callable[[DataConfig], Market]:
    """The market of a Qlib CN index dataset benchmarked against index ``code``."""

    def market(c: DataConfig) -> Market:
        return Market(lambda: qlib_cn.market_frame(c.data_dir), lambda: qlib_cn.benchmark_close(c.data_dir, code))

    return market


def _text(*folders: tuple[str, tuple[str, ...]]) -> Callable[[DataConfig], dict[str, tuple[str, ...]]]:
    return lambda c: dict(folders)


_GSM8K = ("gsm8k", ("train.jsonl", "test.jsonl"))
_ARC = ("arc_challenge", ("train.jsonl", "dev.jsonl", "test.jsonl"))
_TWEETEVAL = ("tweeteval_sentiment", ("val.jsonl", "test.jsonl"))
_JFLEG = ("jfleg", ("dev.jsonl", "test.jsonl"))


def _coedit(c: DataConfig) -> dict[str, tuple[str, ...]]:
    return {c.text.coedit_folder: ("train.jsonl", "validation.jsonl")}


def _multitask(c: DataConfig) -> dict[str, tuple[str, ...]]:
    edit = dict([_JFLEG]) if c.text.edit_task == "jfleg" else _coedit(c)
    return {**edit, **dict([_GSM8K, _TWEETEVAL, _ARC])}


DATASETS: dict[str, Dataset] = {
    "synthetic": Dataset(
        lambda c: make_synthetic_market(c.synthetic), "regression", "SYNTHETIC sector market (generated)", lambda c: {}
    ),
    "acl18": Dataset(
        _split_and_capped(lambda c: load_acl18(c.data_dir, c.acl18)),
        "classification",
        "StockNet tweets + prices → movement, 9 sectors",
        lambda c: {c.acl18.folder: acl18.FILES},
    ),
    "bigdata22": Dataset(
        _split_and_capped(lambda c: load_glt(c.data_dir, c.bigdata22)),
        "classification",
        "BigData22 (GLT format) tweets + features → movement",
        _glt_files,
    ),
    "fnspid": Dataset(
        _split_and_capped(lambda c: load_fnspid(c.data_dir, c.fnspid)),
        "regression",
        "FNSPID prices + news sentiment (text for AA only) → next-day return",
        lambda c: {c.fnspid.folder: fnspid.FILES},
        caveat=fnspid.WHAT_IT_IS,
    ),
    "csi300": Dataset(
        _split_and_capped(lambda c: load_qlib_cn(c.data_dir, c.qlib_cn, "csi300")),
        "ranking",
        "CSI300 Alpha158/360 cross-sectional ranking",
        lambda c: {c.qlib_cn.folder: qlib_cn.FILES},
        _index("SH000300"),
    ),
    "csi800": Dataset(
        _split_and_capped(lambda c: load_qlib_cn(c.data_dir, c.qlib_cn, "csi800")),
        "ranking",
        "CSI800 (bundled bars only) ranking",
        lambda c: {c.qlib_cn.folder: qlib_cn.FILES},
        _index("SH000906"),
    ),
    "gsm8k": Dataset(
        lambda c: load_gsm8k(c.data_dir, c.text), "text", "grade-school math, final-answer match", _text(_GSM8K)
    ),
    "arc_challenge": Dataset(
        lambda c: load_arc(c.data_dir, c.text), "text", "ARC-Challenge multiple choice", _text(_ARC)
    ),
    "tweeteval": Dataset(
        lambda c: load_tweeteval(c.data_dir, c.text), "text", "TweetEval sentiment (3 classes)", _text(_TWEETEVAL)
    ),
    "jfleg": Dataset(
        lambda c: load_jfleg(c.data_dir, c.text), "text", "JFLEG grammar correction (CoEdIT stand-in)", _text(_JFLEG)
    ),
    "coedit": Dataset(
        lambda c: load_coedit(c.data_dir, c.text), "text", "CoEdIT text editing ({_id,task,src,tgt})", _coedit
    ),
    "multitask": Dataset(
        lambda c: load_multitask(c.data_dir, c.text),
        "text",
        "edit + GSM8K + TweetEval + ARC-C mix (seed 002)",
        _multitask,
    ),
    "generic": Dataset(
        _split_and_capped(lambda c: load_generic(c.data_dir, c.generic)),
        "any",
        "your CSV / JSONL table (data.generic)",
        lambda c: {},
    ),
}


def load_dataset(name: str, cfg: DataConfig) -> Table:
    """Load ``name``; real financial tables get a ``split`` column and the date cap."""
    if name not in DATASETS:
        raise ConfigError(f"unknown dataset {name!r}; available: {', '.join(sorted(DATASETS))}")
    return DATASETS[name].load(cfg)


def dataset_market(name: str, cfg: DataConfig) -> Market | None:
    """The market of an index dataset (its bars and benchmark), None for every other dataset."""
    spec = DATASETS[name].market
    return None if spec is None else spec(cfg)
