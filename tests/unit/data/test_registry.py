"""Every dataset name loads through the registry on the real bundle, CPU-sized, with a standard split."""

from __future__ import annotations

import pytest

from fedloom.data.config import DataConfig
from fedloom.data.registry import DATASETS, load_dataset
from fedloom.data.schema import SampleTable, TextTable
from fedloom.data.summary import availability, describe
from fedloom.errors import ConfigError, DataError
from tests.conftest import SHARED_DATA

REAL = [n for n in DATASETS if n not in ("synthetic", "generic", "coedit")]
KINDS = {
    "acl18": "classification",
    "bigdata22": "classification",
    "fnspid": "regression",
    "csi300": "ranking",
    "csi800": "ranking",
}


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"shared data bundle not found at {SHARED_DATA}")
@pytest.mark.parametrize("name", REAL)
def test_every_dataset_loads_capped_with_a_split(name, fedloom_cache):
    cfg = DataConfig(data_dir=SHARED_DATA, max_dates_per_split=5)
    table = load_dataset(name, cfg)
    assert set(table.frame["split"]) == {"train", "val", "test"}
    if isinstance(table, SampleTable):
        assert table.task_kind == KINDS[name] and not table.synthetic
        per_split = table.frame.groupby("split")["date"].nunique()
        assert per_split["train"] == per_split["val"] == 5 and per_split["test"] > 5  # the test split stays whole
        capped = load_dataset(name, cfg.model_copy(update={"max_test_dates": 4}))
        assert capped.frame.groupby("split")["date"].nunique()["test"] == 4
        assert table.frame.groupby("split")["date"].max()["train"] < table.frame.groupby("split")["date"].min()["val"]
    else:
        assert isinstance(table, TextTable) and name in ("gsm8k", "arc_challenge", "tweeteval", "jfleg", "multitask")
    lines = dict(describe(table, cfg))
    assert lines["rows"] == f"{len(table):,}" and "clients" in lines


def test_synthetic_is_returned_as_generated():
    table = load_dataset("synthetic", DataConfig())
    assert table.synthetic and "split" not in table.frame.columns and len(table) == 1440


def test_unknown_and_missing_datasets(tmp_path):
    with pytest.raises(ConfigError, match="unknown dataset 'nope'; available: acl18, arc_challenge"):
        load_dataset("nope", DataConfig())
    with pytest.raises(DataError, match=r"qlib_cn is missing csi300_daily.csv.gz, index_daily.csv, membership"):
        load_dataset("csi300", DataConfig(data_dir=tmp_path))


def test_availability_lists_every_dataset(tmp_path):
    rows = {r["name"]: r for r in availability(DataConfig(data_dir=tmp_path))}
    assert rows.keys() == DATASETS.keys()
    assert rows["synthetic"]["status"] == "built in"
    assert rows["acl18"]["status"].startswith("missing acl18/prices.csv")
