"""Data-folder resolution, missing-file errors and the derived-table cache."""

from __future__ import annotations

import pandas as pd
import pytest

from fedloom.data.files import REPO_ROOT, cached_frame, dataset_dir, resolve_data_dir
from fedloom.errors import DataError


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLOOM_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert resolve_data_dir(None) == tmp_path / "env"
    monkeypatch.delenv("FEDLOOM_DATA_DIR")
    default = REPO_ROOT.parent / "shared" / "data"
    assert resolve_data_dir(None) == (default if default.is_dir() else None)


def test_missing_files_are_named(tmp_path):
    (tmp_path / "acl18").mkdir()
    (tmp_path / "acl18" / "prices.csv").write_text("x")
    with pytest.raises(DataError, match=r"acl18 is missing tweets.jsonl, sectors.csv \(expected: prices.csv, tweets"):
        dataset_dir(tmp_path, "acl18", ("prices.csv", "tweets.jsonl", "sectors.csv"))


def test_no_data_folder_at_all(monkeypatch):
    monkeypatch.delenv("FEDLOOM_DATA_DIR", raising=False)
    monkeypatch.setattr("fedloom.data.files.REPO_ROOT", REPO_ROOT / "nowhere")
    with pytest.raises(
        DataError, match=r"no data folder for dataset 'acl18': pass --data-dir.*expected acl18/ with a.csv"
    ):
        dataset_dir(None, "acl18", ("a.csv",))


def test_cache_rebuilds_when_a_source_changes(tmp_path, fedloom_cache):
    source = tmp_path / "s.csv"
    source.write_text("a\n1\n")
    calls = []

    def build() -> pd.DataFrame:
        calls.append(1)
        return pd.read_csv(source)

    first = cached_frame("t", [source], {"k": 1}, build)
    second = cached_frame("t", [source], {"k": 1}, build)
    assert len(calls) == 1 and second.equals(first)
    cached_frame("t", [source], {"k": 2}, build)  # another config
    source.write_text("a\n1\n2\n")  # another size
    assert len(cached_frame("t", [source], {"k": 1}, build)) == 2 and len(calls) == 3
    assert len(list((fedloom_cache / "data").glob("t-*.parquet"))) == 3
