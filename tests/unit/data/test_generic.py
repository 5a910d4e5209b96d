"""A user's CSV / JSONL table: column mapping, and errors that name the file, column and row."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fedloom.data.generic import GenericConfig, load_generic
from fedloom.errors import DataError


def _write(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


ROWS = [
    {
        "day": "2022-01-04",
        "ticker": "B",
        "sector": "tech",
        "headline": "b up",
        "mom": 0.1,
        "ret": 0.01,
        "part": "train",
    },
    {
        "day": "2022-01-03",
        "ticker": "A",
        "sector": "fin",
        "headline": "a down",
        "mom": -0.2,
        "ret": -0.02,
        "part": "test",
    },
]
MAPPING = {"date": "day", "instrument": "ticker", "group": "sector", "text": "headline", "target": "ret"}


def test_columns_are_mapped_and_rows_sorted(tmp_path):
    _write(tmp_path / "panel.csv", ROWS)
    cfg = GenericConfig(path="panel.csv", columns=MAPPING, covariates=["mom"], split_column="part")
    table = load_generic(tmp_path, cfg)
    f = table.frame
    assert f["instrument"].tolist() == ["A", "B"] and f["split"].tolist() == ["test", "train"]
    assert table.covariates == ("mom",) and table.name == "panel" and table.default_partition == "sector"


def test_jsonl_without_group_or_text(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(
        "\n".join(json.dumps({"date": r["day"], "instrument": r["ticker"], "target": r["ret"]}) for r in ROWS)
    )
    table = load_generic(None, GenericConfig(path=path))
    assert table.frame["text"].eq("").all() and table.default_partition == "dirichlet"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"ret": "abc"}, r"panel.csv: column 'ret' row 1: expected a finite number, got 'abc'"),
        ({"day": "someday"}, r"panel.csv: column 'day' row 1: expected a date, got 'someday'"),
        ({"part": "holdout"}, r"column 'split' has \['holdout'\]; expected only \['train', 'val', 'test'\]"),
    ],
)
def test_errors_name_file_column_and_row(tmp_path, bad, message):
    _write(tmp_path / "panel.csv", [ROWS[0], {**ROWS[1], **bad}])
    cfg = GenericConfig(path=tmp_path / "panel.csv", columns=MAPPING, covariates=["mom"], split_column="part")
    with pytest.raises(DataError, match=message):
        load_generic(None, cfg)


def test_missing_column_and_file(tmp_path):
    _write(tmp_path / "panel.csv", ROWS)
    with pytest.raises(DataError, match=r"missing columns \['date', 'instrument', 'target'\]; the file has"):
        load_generic(tmp_path, GenericConfig(path="panel.csv"))
    with pytest.raises(DataError, match=r"data\.generic\.path: no file at"):
        load_generic(tmp_path, GenericConfig(path="nope.csv"))
    with pytest.raises(DataError, match=r"needs data\.generic\.path"):
        load_generic(tmp_path, GenericConfig())
